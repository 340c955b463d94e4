package testmodels_test

import (
	"math"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/testmodels"
)

// referenceTolerance is the largest absolute difference accepted between
// a run and PyTorch's reference output of element type dt.
func referenceTolerance(dt graph.DataType) float64 {
	if dt == graph.Float16 {
		// The fp16 model's reference comes from PyTorch computing in
		// float32 between ops; runtimes round every float16
		// intermediate, which moves logits by about 1e-3 (measured).
		return 1e-2
	}
	return 1e-5
}

// checkReference runs each corpus model on its stored inputs with run and
// compares every output with PyTorch's.
func checkReference(t *testing.T, run func(e *testmodels.Entry, m *graph.Model, in map[string]*kernels.Tensor) (map[string]*kernels.Tensor, error)) {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range man.Models {
		t.Run(e.Name, func(t *testing.T) {
			m, err := graph.Load(e.ModelPath())
			if err != nil {
				t.Fatal(err)
			}
			in, err := kernels.ReadInputs(e.TestDataDir(), m)
			if err != nil {
				t.Fatal(err)
			}
			want, err := kernels.ReadOutputs(e.TestDataDir(), m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := run(&e, m, in)
			if err != nil {
				t.Fatal(err)
			}
			for name, w := range want {
				g := got[name]
				if g == nil || len(g.Shape) != len(w.Shape) {
					t.Fatalf("output %s: got %v, want shape %v", name, g, w.Shape)
				}
				for i := range w.Shape {
					if g.Shape[i] != w.Shape[i] {
						t.Fatalf("output %s: shape %v, want %v", name, g.Shape, w.Shape)
					}
				}
				gv, wv := g.Float64s(), w.Float64s()
				worst := 0.0
				for i := range wv {
					worst = math.Max(worst, math.Abs(gv[i]-wv[i]))
				}
				if tol := referenceTolerance(w.DType); !(worst <= tol) {
					t.Errorf("output %s: max abs difference from PyTorch %.3g > %.3g", name, worst, tol)
				}
			}
		})
	}
}

// TestExecutorReproducesPyTorch runs every exported model in onnxpe's
// executor on the stored inputs.
func TestExecutorReproducesPyTorch(t *testing.T) {
	checkReference(t, func(_ *testmodels.Entry, m *graph.Model, in map[string]*kernels.Tensor) (map[string]*kernels.Tensor, error) {
		s, err := kernels.NewSession(m, kernels.Options{})
		if err != nil {
			return nil, err
		}
		return s.Run(in)
	})
}
