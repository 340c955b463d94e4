package kernels

import (
	"math/rand/v2"
	"testing"
)

// TestRunRetainsNoBuffers checks that after Run the session keeps the
// run's buffers only in its pool: the tracker's records (kept for the next
// run) and the steps' allocation lists (kept for their next call) hold no
// tensor, so freed intermediates are the collector's. Before, they kept
// every buffer of the run alive (4 GB at 8192 tokens of a 0.32B Llama).
func TestRunRetainsNoBuffers(t *testing.T) {
	m, in := transformerModel(64, 4, 32, 2)
	s, err := NewSession(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 32*64)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for run := range 2 {
		if _, err := s.Run(map[string]*Tensor{in: FromSlice([]int{32, 64}, x)}); err != nil {
			t.Fatal(err)
		}
		tr := s.spare
		if tr == nil || tr.used == 0 {
			t.Fatal("no tracker records after a run")
		}
		for i, st := range tr.slab[:tr.used] {
			if st.buf != nil {
				t.Fatalf("run %d: record %d still holds a %v buffer", run, i, st.buf.DType)
			}
		}
		if len(tr.live) != 0 {
			t.Errorf("run %d: %d live storage records after the run", run, len(tr.live))
		}
		for _, st := range s.main.steps {
			for _, a := range st.call.allocs[:cap(st.call.allocs)] {
				if a != nil {
					t.Fatalf("run %d: step %q keeps an allocation", run, st.node.Name)
				}
			}
		}
	}
}
