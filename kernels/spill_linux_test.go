package kernels

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"github.com/onnxpe/onnxpe/graph"
)

// resident counts the pages of the mapping that starts at b mapped into
// the process (its Rss in /proc/self/smaps: mincore would count the page
// cache's).
func resident(t *testing.T, b []byte) int {
	t.Helper()
	sm, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	start := fmt.Sprintf("%x-", uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	in := false
	for _, l := range strings.Split(string(sm), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			in = strings.HasPrefix(l, start)
			continue
		}
		if in && strings.HasPrefix(l, "Rss:") {
			var kb int
			fmt.Sscanf(strings.TrimPrefix(l, "Rss:"), "%d", &kb)
			return kb * 1024 / pageSize
		}
	}
	t.Fatalf("no mapping at %s in /proc/self/smaps", start)
	return 0
}

// TestReleaseSpilledRange: a range of a spilled tensor read back goes
// back to the file whichever Spill made it, and only that range; the
// values stay readable.
func TestReleaseSpilledRange(t *testing.T) {
	s := NewSpill()
	defer s.Close()
	n := SpillMin / 4
	big := New(graph.Float, n)
	d := Data[float32](big)
	for i := range d {
		d[i] = float32(i % 977)
	}
	got := s.Tensor(big)
	g := Data[float32](got)
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(g))), n*4)
	for _, v := range g {
		spillSink += v
	}
	all := resident(t, b)
	if all < len(b)/pageSize/2 {
		t.Fatalf("%d of %d pages resident after reading them all", all, len(b)/pageSize)
	}
	half := n / 2
	ReleaseSpilled(got, 0, half)
	left := resident(t, b)
	if want := all - half*4/pageSize; left > want+1 || left < want-1 {
		t.Errorf("after releasing half: %d pages resident, want about %d", left, want)
	}
	var other *Spill // a nil Spill releases any spilled tensor too
	other.Release(got)
	if r := resident(t, b); r != 0 {
		t.Errorf("after Release: %d pages resident", r)
	}
	for i := range g {
		if g[i] != d[i] {
			t.Fatalf("element %d after release: %v, want %v", i, g[i], d[i])
		}
	}
	// Memory that is not a spill's is never advised.
	ReleaseSpilled(big, 0, n)
	if d[n-1] != float32((n-1)%977) {
		t.Fatalf("an ordinary tensor lost its values")
	}
	s.Close()
	ReleaseSpilled(got, 0, 1) // unmapped: nothing to do, no fault
}

// spillSink keeps the reads of the test from being optimised away.
var spillSink float32
