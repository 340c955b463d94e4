package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

// permuted transposes t: axis i of the result is axis perm[i] of t.
func permuted(t *Tensor, perm ...int) *Tensor {
	shape := make([]int, len(perm))
	for i, p := range perm {
		shape[i] = t.Shape[p]
	}
	st := make([]int, len(t.Shape))
	s := 1
	for i := len(t.Shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= t.Shape[i]
	}
	tst := make([]int, len(perm))
	for i, p := range perm {
		tst[i] = st[p]
	}
	out := New(t.DType, shape...)
	copyStrided(out, t, tst, 0)
	return out
}

// TestRecurrentLayouts checks layout 1 (batch first, which ONNX Runtime
// refuses) against layout 0 (checked against ONNX Runtime by
// TestDifferentialRecurrent): the same sequences give the same outputs,
// transposed.
func TestRecurrentLayouts(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const seq, batch, in, hid = 4, 3, 2, 5
	for _, op := range []string{"RNN", "GRU", "LSTM"} {
		gates := map[string]int{"RNN": 1, "GRU": 3, "LSTM": 4}[op]
		nout := 2
		if op == "LSTM" {
			nout = 3
		}
		x := randF32(rng, seq, batch, in)
		w, r, b := randF32(rng, 2, gates*hid, in), randF32(rng, 2, gates*hid, hid), randF32(rng, 2, 2*gates*hid)
		lens := FromSlice([]int{batch}, []int32{4, 1, 3})
		h0 := randF32(rng, 2, batch, hid)
		ins0 := []*Tensor{x, w, r, b, lens, h0}
		ins1 := []*Tensor{permuted(x, 1, 0, 2), w, r, b, lens, permuted(h0, 1, 0, 2)}
		if op == "LSTM" {
			c0 := randF32(rng, 2, batch, hid)
			ins0 = append(ins0, c0)
			ins1 = append(ins1, permuted(c0, 1, 0, 2))
		}
		attrs := func(layout int64) []*graph.Attr {
			return []*graph.Attr{graph.StringAttr("direction", "bidirectional"), graph.IntAttr("hidden_size", hid), graph.IntAttr("layout", layout)}
		}
		o0, err := runOp(t, "", op, 22, nout, attrs(0), ins0...)
		if err != nil {
			t.Fatal(err)
		}
		o1, err := runOp(t, "", op, 22, nout, attrs(1), ins1...)
		if err != nil {
			t.Fatal(err)
		}
		// Y: (seq, dirs, batch, H) against (batch, seq, dirs, H); the
		// states: (dirs, batch, H) against (batch, dirs, H).
		want := []*Tensor{permuted(o0[0], 2, 0, 1, 3)}
		for _, s := range o0[1:] {
			want = append(want, permuted(s, 1, 0, 2))
		}
		for i := range want {
			if msg := compareTensors(o1[i], want[i], 0, 0); msg != "" {
				t.Errorf("%s output %d, layout 1 against layout 0 transposed: %s", op, i, msg)
			}
		}
		// The padded steps of the short sequence (batch 1: length 1) are
		// zeros in Y.
		y := Data[float32](o0[0])
		for q := 1; q < seq; q++ {
			for d := range 2 {
				for j := range hid {
					if v := y[((q*2+d)*batch+1)*hid+j]; v != 0 || math.IsNaN(float64(v)) {
						t.Fatalf("%s: Y at step %d of a sequence of 1 is %v, want 0", op, q, v)
					}
				}
			}
		}
	}
}
