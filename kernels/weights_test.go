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

// TestWeightsSharedBySessions saves one Llama to two folders and a third
// with one weight changed, and checks by the budget's accounting that two
// live sessions of the equal models hold their packed weights once (the
// private budget counts one model's worth), that the
// changed model adds exactly its changed weight, that weights no session
// holds are not reserved and are taken over (not packed again) by the
// next session of an equal model, and that weights a budget cannot hold
// are not packed while the model still runs, with the same outputs.
func TestWeightsSharedBySessions(t *testing.T) {
	kernels.ReleaseUnusedWeights()
	cfg := testmodels.DefaultLlama
	cfg.Hidden, cfg.FFN, cfg.Seed = 128, 256, 77
	save := func(m *graph.Model) *graph.Model {
		path := filepath.Join(t.TempDir(), "model.onnx")
		if err := m.Save(path, graph.SaveOptions{External: graph.ExternalizeLarge, Threshold: 256}); err != nil {
			t.Fatal(err)
		}
		l, err := graph.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := save(testmodels.Llama(cfg)), save(testmodels.Llama(cfg))
	changed := testmodels.Llama(cfg)
	w := changed.Graph.Lookup("layers.0.up_proj")
	v := make([]float32, w.Const.Len())
	for i := range v {
		v[i] = float32(i%7) / 7
	}
	nt, _ := graph.NewTensor(w.Const.Name(), graph.Float, w.Const.Dims(), v)
	w.Const = nt
	c := save(changed)
	budget := kernels.NewBudget(0)
	open := func(m *graph.Model) *kernels.Session {
		s, err := kernels.NewSession(m, kernels.Options{Budget: budget})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	sa := open(a)
	one := budget.Used()
	if st := sa.LastRunStats(); one == 0 {
		t.Fatalf("one model reserves %d B of packed weights (%+v)", one, st)
	}
	sb := open(b)
	if got := budget.Used(); got != one {
		t.Errorf("two sessions of equal models hold %d B of packed weights, one holds %d B", got, one)
	}
	upBytes := int64(4 * 128 * 256)
	sc := open(c)
	if got := budget.Used(); got != one+upBytes {
		t.Errorf("with the changed model: %d B, want %d + %d", got, one, upBytes)
	}
	sa.Close()
	sb.Close()
	sc.Close()
	if got := budget.Used(); got != 0 {
		t.Errorf("weights no session holds stay reserved: %d B", got)
	}
	kernels.ResetWeightPeak()
	sd := open(b) // takes over the equal weights; the changed one goes
	if got := budget.Used(); got != one {
		t.Errorf("after a session of the equal model: %d B, want %d", got, one)
	}
	if made := kernels.Weights().Made; made != 0 {
		t.Errorf("the session of the equal model packed %d B, not taking over the closed sessions' weights", made)
	}
	if _, err := sa.Run(nil); err == nil {
		t.Error("a closed session ran")
	}
	// Over the budget, weights are not packed (the steps pack per call)
	// and the model still runs.
	small := kernels.NewBudget(one / 2)
	se, err := kernels.NewSession(c, kernels.Options{Budget: small})
	if err != nil {
		t.Fatal(err)
	}
	if used := small.Used(); used > one/2 {
		t.Errorf("%d B reserved in a budget of %d B", used, one/2)
	}
	in := map[string]*kernels.Tensor{"input_ids": kernels.FromSlice([]int{1, 3}, []int64{1, 2, 3}), "position_ids": kernels.FromSlice([]int{1, 3}, []int64{0, 1, 2})}
	ref := sc2(t, c)
	want, err := ref.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	ref.Close()
	got, err := se.Run(in)
	if err != nil {
		t.Fatal(err)
	}
	for name, w := range want {
		if !slices.Equal(got[name].Float64s(), w.Float64s()) {
			t.Errorf("output %s differs with weights packed per call", name)
		}
	}
	se.Close()
	sd.Close()
	kernels.ReleaseUnusedWeights()
	if got := budget.Used(); got != 0 {
		t.Errorf("after every session closed: %d B still reserved", got)
	}
}

// sc2 is a session of m in a budget of its own.
func sc2(t *testing.T, m *graph.Model) *kernels.Session {
	s, err := kernels.NewSession(m, kernels.Options{Budget: kernels.NewBudget(0)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
