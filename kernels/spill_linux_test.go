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

// TestRunIntoWritesProductsToSpill: an output a matrix product makes, at
// sinkMin bytes or more, is written into the Spill a block of rows at a
// time with each block's pages released behind it; its values are the
// in-memory run's, it is not spilled again, and smaller outputs and
// values the run does not return stay in memory.
func TestRunIntoWritesProductsToSpill(t *testing.T) {
	defer func(m int64, b int) { sinkMin, sinkBlock = m, b }(sinkMin, sinkBlock)
	sinkMin, sinkBlock = 1<<20, 64<<10
	const R, K, N = 300, 16, 1500 // 1.8 MB of output, 11 blocks of 27 rows
	m := graph.NewModel(9, "sink", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(1, R, K)))
	wv := make([]float32, K*N)
	for i := range wv {
		wv[i] = float32(i%13) - 6
	}
	w, _ := graph.NewTensor("w", graph.Float, []int64{K, N}, wv)
	y := g.Op("MatMul", []*graph.Value{x, g.AddInitializer(w)}, 1)[0]
	z := g.Op("MatMul", []*graph.Value{x, g.AddInitializer(w)}, 1)[0]
	small := g.Op("ReduceSum", []*graph.Value{z}, 1)[0]
	g.AddOutput(y)
	g.AddOutput(small)
	xv := make([]float32, R*K)
	for i := range xv {
		xv[i] = float32(i%7) * 0.5
	}
	in := map[string]*Tensor{"x": FromSlice([]int{1, R, K}, xv)}
	s, err := NewSession(m, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	want, err := s.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	if isSpilled(want[y.Name]) {
		t.Fatal("Run spilled an output")
	}
	sp := NewSpill()
	defer sp.Close()
	got, err := s.RunInto(in, sp)
	if err != nil {
		t.Fatal(err)
	}
	gy := got[y.Name]
	if !isSpilled(gy) || isSpilled(got[small.Name]) {
		t.Fatalf("spilled: the product %v, the small output %v; want true, false", isSpilled(gy), isSpilled(got[small.Name]))
	}
	if sp.Bytes() != R*N*4 {
		t.Errorf("the Spill holds %d bytes, want %d", sp.Bytes(), R*N*4)
	}
	d := Data[float32](gy)
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(d))), len(d)*4)
	if r := resident(t, b); r > 2 {
		t.Errorf("%d pages of the written output are in the process, want them released", r)
	}
	if again := sp.Tensor(gy); again != gy || sp.Bytes() != R*N*4 {
		t.Errorf("an output in the Spill was spilled again")
	}
	for i, v := range Data[float32](want[y.Name]) {
		if d[i] != v {
			t.Fatalf("element %d: %v, Run's %v", i, d[i], v)
		}
	}
	if g, w := Data[float32](got[small.Name])[0], Data[float32](want[small.Name])[0]; g != w {
		t.Errorf("the small output: %v, Run's %v", g, w)
	}
}
