package testmodels_test

import (
	"math"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestHalfLlamaTracksFloat32 runs the float16 and bfloat16 builds of a
// narrow Llama in every RoPE form next to the float32 build on the same
// tokens and positions: their logits are the float32 ones up to the half
// type's rounding (measured: float16 9.2e-4, bfloat16 1.1e-2 of the
// logits' scale in every form; allowed 4e-3 and 4e-2), no NaN (a -1e9 mask is -inf in float16, 0·-inf
// NaN), so the half builds are the same model rounded, not another.
func TestHalfLlamaTracksFloat32(t *testing.T) {
	forms := testmodels.LlamaRoPEForms
	const B, S = 2, 12
	ids, pos := make([]int64, B*S), make([]int64, B*S)
	for i := range ids {
		ids[i] = int64((i * 37) % 128)
		pos[i] = int64(i%S + 50*(i/S)) // the second row at positions 50..61
	}
	in := map[string]*kernels.Tensor{"input_ids": kernels.FromSlice([]int{B, S}, ids), "position_ids": kernels.FromSlice([]int{B, S}, pos)}
	run := func(cfg testmodels.LlamaConfig) []float64 {
		m := testmodels.Llama(cfg)
		sess, err := kernels.NewSession(m, kernels.Options{})
		if err != nil {
			t.Fatal(err)
		}
		out, err := sess.Run(in)
		if err != nil {
			t.Fatal(err)
		}
		logits := out[m.Graph.Outputs[0].Name]
		if logits.DType != cfg.DType && cfg.DType != 0 {
			t.Fatalf("logits are %v, want %v", logits.DType, cfg.DType)
		}
		return logits.Float64s()
	}
	for _, f := range forms {
		cfg := testmodels.DefaultLlama
		cfg.Layers, cfg.Hidden, cfg.Heads, cfg.KVHeads, cfg.FFN = 1, 32, 2, 1, 64
		f.Edit(&cfg)
		want := run(cfg)
		scale := 0.0
		for _, w := range want {
			scale = math.Max(scale, math.Abs(w))
		}
		for _, c := range []struct {
			dt  graph.DataType
			tol float64
		}{{graph.Float16, 4e-3}, {graph.BFloat16, 4e-2}} {
			cfg.DType = c.dt
			got := run(cfg)
			worst := 0.0
			for i := range want {
				d := math.Abs(got[i] - want[i])
				if math.IsNaN(d) {
					d = math.Inf(1)
				}
				worst = math.Max(worst, d)
			}
			if !(worst <= c.tol*scale) {
				t.Errorf("%s %v: logits off the float32 ones by %.3g (scale %.3g)", f.Name, c.dt, worst, scale)
			} else {
				t.Logf("%s %v: logits off the float32 ones by %.3g of their scale %.3g", f.Name, c.dt, worst/scale, scale)
			}
		}
	}
}
