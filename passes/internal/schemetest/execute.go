package schemetest

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Executes runs m with the executor on one sequence of S tokens and fails
// t when it cannot: a form built for a test is a model that computes.
// Inputs are made by name and type: input_ids below 32, attention_mask
// ones, position_ids 0..S-1, other inputs random; the size symbols batch,
// seq and past are 1, S and 2, others S.
func Executes(t testing.TB, m *graph.Model, S int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, uint64(S)))
	in := map[string]*kernels.Tensor{}
	for _, v := range m.Graph.Inputs {
		dims, ok := v.Type.Shape()
		if !ok {
			t.Fatalf("input %s has no shape", v.Name)
		}
		shape := make([]int, len(dims))
		n := 1
		for i, d := range dims {
			switch {
			case d.Known:
				shape[i] = int(d.Value)
			case d.Param == "batch":
				shape[i] = 1
			case d.Param == "past":
				shape[i] = 2
			default:
				shape[i] = S
			}
			n *= shape[i]
		}
		switch dt := v.Type.ElemType(); {
		case dt == graph.Int64:
			x := make([]int64, n)
			for i := range x {
				switch v.Name {
				case "input_ids":
					x[i] = rng.Int64N(32)
				case "attention_mask":
					x[i] = 1
				default:
					x[i] = int64(i % shape[len(shape)-1])
				}
			}
			in[v.Name] = kernels.FromSlice(shape, x)
		case dt == graph.Float:
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			in[v.Name] = kernels.FromSlice(shape, x)
		default:
			t.Fatalf("input %s of type %v: no synthesis", v.Name, dt)
		}
	}
	s, err := kernels.NewSession(m, kernels.Options{Threads: 1})
	if err != nil {
		t.Fatalf("the model does not compile: %v", err)
	}
	out, err := s.Run(in)
	if err != nil {
		t.Fatalf("the model does not run: %v", err)
	}
	for name, o := range out {
		for _, x := range o.Float64s() {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("output %s holds %v", name, x)
			}
		}
	}
}
