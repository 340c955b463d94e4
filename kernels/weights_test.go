package kernels_test

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestWeightsUsedInPlace saves Llamas in float32, float16 and bfloat16
// with their weights in a side file and checks that a session uses them
// in place: the constants over the mapped file (MappedBytes) are the
// weights; half weights are never widened to float32 copies (PackedBytes,
// which counts the widened and packed copies, stays under 1% of them: the
// products widen them tile by tile); the outputs equal those of the model
// with inline weights bit for bit.
func TestWeightsUsedInPlace(t *testing.T) {
	for _, dt := range []graph.DataType{graph.Float, graph.Float16, graph.BFloat16} {
		t.Run(dt.String(), func(t *testing.T) {
			cfg := testmodels.DefaultLlama
			cfg.DType = dt
			inline := testmodels.Llama(cfg)
			path := filepath.Join(t.TempDir(), "model.onnx")
			if err := inline.Save(path, graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: 256}); err != nil {
				t.Fatal(err)
			}
			ext, err := graph.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			var external, weights int64
			for _, v := range ext.Graph.Initializers {
				if v.Const.IsExternal() {
					external += v.Const.ByteSize()
				}
				if len(v.Const.Dims()) == 2 {
					weights += v.Const.ByteSize()
				}
			}
			in := map[string]*kernels.Tensor{
				"input_ids":    kernels.FromSlice([]int{2, 6}, []int64{1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9}),
				"position_ids": kernels.FromSlice([]int{2, 6}, []int64{0, 1, 2, 3, 4, 5, 1, 2, 3, 4, 5, 6}),
			}
			run := func(m *graph.Model) (map[string]*kernels.Tensor, kernels.RunStats) {
				s, err := kernels.NewSession(m, kernels.Options{})
				if err != nil {
					t.Fatal(err)
				}
				out, err := s.Run(in)
				if err != nil {
					t.Fatal(err)
				}
				return out, s.LastRunStats()
			}
			want, ws := run(inline)
			got, gs := run(ext)
			t.Logf("weights %d B, external %d B; mapped side file: mapped %d B, widened/packed %d B; inline: widened/packed %d B",
				weights, external, gs.MappedBytes, gs.PackedBytes, ws.PackedBytes)
			if gs.MappedBytes < external*99/100 {
				t.Errorf("%d B of constants over the mapped file, the side file holds %d B", gs.MappedBytes, external)
			}
			if dt != graph.Float && gs.PackedBytes > weights/100 {
				t.Errorf("%d B widened or packed copies of %d B of half weights", gs.PackedBytes, weights)
			}
			for name, w := range want {
				g := got[name]
				if g == nil || !slices.Equal(g.Shape, w.Shape) {
					t.Fatalf("output %s: %v, want %v", name, g, w)
				}
				wv, gv := w.Float64s(), g.Float64s()
				for i := range wv {
					if math.Float64bits(wv[i]) != math.Float64bits(gv[i]) {
						t.Fatalf("output %s[%d]: %v with the weights mapped, %v inline", name, i, gv[i], wv[i])
					}
				}
			}
		})
	}
}
