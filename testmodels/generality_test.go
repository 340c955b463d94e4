package testmodels_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// generalityNotRun are the generality forms the executor cannot run here,
// with the reason.
var generalityNotRun = map[string]string{
	"sinusoidal_static_long_context":                        "its fixed input of 65536 tokens of 4096 makes tensors of gigabytes",
	"rope_longrope_genai_if_absent_weights":                 "its weights are in a side file that is absent",
	"rope_longrope_phi4mini_if_factor_lists_absent_weights": "its weights are in a side file that is absent",
}

// TestGeneralityFormsRun builds every generality form, saves and reloads
// it, and runs it in the executor at two sequence lengths on inputs that
// respect their names (token ids, masks of ones, positions counting from
// the past's length): the outputs are finite and follow the length. A
// model that is one generation op runs the graphs the op runs.
func TestGeneralityFormsRun(t *testing.T) {
	forms := testmodels.GeneralityForms()
	names := map[string]bool{}
	skipped := 0
	for _, f := range forms {
		names[f.Name] = true
		if f.Class < 1 || f.Class > 4 || f.Note == "" || len(f.Truth.Schemes) == 0 {
			t.Errorf("%s: class %d, note %q, schemes %v", f.Name, f.Class, f.Note, f.Truth.Schemes)
		}
		if why, ok := generalityNotRun[f.Name]; ok {
			skipped++
			t.Logf("%s: not run: %s", f.Name, why)
			continue
		}
		t.Run(f.Name, func(t *testing.T) {
			dir := t.TempDir()
			m, err := f.Build(dir)
			if err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, "saved.onnx")
			if err := m.Save(p, graph.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			if m, err = graph.Load(p); err != nil {
				t.Fatalf("the model does not load back: %v", err)
			}
			for _, r := range runnable(t, m) {
				runAtLengths(t, r)
			}
		})
	}
	for name := range generalityNotRun {
		if !names[name] {
			t.Errorf("generalityNotRun lists %s, which is not a generality form", name)
		}
	}
	t.Logf("%d forms, %d not run", len(forms), skipped)
}

// runnable is m, or for a model that is one generation op (BeamSearch
// and the like, which the executor does not run) the graphs it runs as
// models of their own, as ONNX Runtime runs them.
func runnable(t *testing.T, m *graph.Model) []*graph.Model {
	t.Helper()
	var out []*graph.Model
	for n := range m.Graph.All() {
		if n.Domain != "com.microsoft" || !strings.HasSuffix(n.OpType, "Search") && n.OpType != "Sampling" {
			continue
		}
		for _, a := range n.Attrs {
			if a.Graph == nil {
				continue
			}
			sm, err := m.GraphModel(a.Graph)
			if err != nil {
				t.Fatalf("%s's %s: %v", n.OpType, a.Name(), err)
			}
			out = append(out, sm)
		}
	}
	if out == nil {
		out = []*graph.Model{m}
	}
	return out
}

// runAtLengths runs m at two sequence lengths: its outputs are finite and
// follow the length (or the past's and the new tokens').
func runAtLengths(t *testing.T, m *graph.Model) {
	t.Helper()
	sess, err := kernels.NewSession(m, kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []int{5, 9} {
		in := generalityInputs(t, m, seq)
		out, err := sess.Run(in)
		if err != nil {
			t.Fatalf("length %d: %v", seq, err)
		}
		for _, o := range m.Graph.Outputs {
			v := out[o.Name]
			for _, x := range v.Float64s() {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					t.Fatalf("length %d: %s holds %v", seq, o.Name, x)
				}
			}
			// A KV cache's present holds the past's tokens too.
			if !slicesContain(v.Shape, seq) && !slicesContain(v.Shape, runPast+seq) && !fixedShape(o) {
				t.Errorf("length %d: %s has shape %v", seq, o.Name, v.Shape)
			}
		}
	}
}

func slicesContain(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// fixedShape reports whether o's declared shape has no symbolic size but
// the batch's (a static KV cache's slots do not follow the length).
func fixedShape(o *graph.Value) bool {
	dims, ok := o.Type.Shape()
	if !ok {
		return false
	}
	for _, d := range dims {
		if !d.Known && !strings.HasPrefix(d.Param, "batch") {
			return false
		}
	}
	return true
}

// runPast is the length of the past given to models with a KV cache.
const runPast = 3

// generalityInputs makes inputs for m: sizes named batch* are 2, past*
// 3, total* past + seq, others seq; int64 inputs named *mask* are ones,
// *position* count from the past's length, others are token ids in
// [3, 60); float inputs are normal.
func generalityInputs(t *testing.T, m *graph.Model, seq int) map[string]*kernels.Tensor {
	t.Helper()
	const batch, past = 2, runPast
	hasPast := false
	for _, in := range m.Graph.Inputs {
		hasPast = hasPast || strings.HasPrefix(in.Name, "past")
	}
	rng := rand.New(rand.NewPCG(uint64(seq), 3))
	out := map[string]*kernels.Tensor{}
	for _, in := range m.Graph.Inputs {
		var shape []int
		n := 1
		dims, _ := in.Type.Shape()
		for _, d := range dims {
			x := seq
			switch {
			case d.Known:
				x = int(d.Value)
			case strings.HasPrefix(d.Param, "batch"):
				x = batch
			case strings.HasPrefix(d.Param, "past"):
				x = past
			case strings.HasPrefix(d.Param, "total"):
				x = past + seq
			}
			shape = append(shape, x)
			n *= x
		}
		switch in.Type.ElemType() {
		case graph.Int64, graph.Int32:
			v := make([]int64, n)
			last := shape[len(shape)-1]
			for i := range v {
				switch {
				case strings.Contains(in.Name, "mask"):
					v[i] = 1
				case strings.Contains(in.Name, "position"):
					v[i] = int64(i % last)
					if hasPast {
						v[i] += past
					}
				default:
					v[i] = int64(3 + rng.IntN(57))
				}
			}
			out[in.Name] = kernels.FromSlice(shape, v)
			if in.Type.ElemType() == graph.Int32 {
				v32 := make([]int32, n)
				for i, x := range v {
					v32[i] = int32(x)
				}
				out[in.Name] = kernels.FromSlice(shape, v32)
			}
		case graph.Float:
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			out[in.Name] = kernels.FromSlice(shape, v)
		default:
			t.Fatalf("input %s: element type %v", in.Name, in.Type.ElemType())
		}
	}
	return out
}
