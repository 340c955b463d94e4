package testmodels

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/onnxpe/onnxpe/graph"
)

// LearnedTransposed builds one attention block (2 heads of 16) whose
// input embeddings get a learned position table stored transposed,
// [32, rows], read by Gather on axis 1: at Range(0, S) ([32, S],
// transposed to [S, 32]) or, with offset, at RoBERTa's positions
// cumsum(ids != 1)·(ids != 1) + 1 ([32, B, S], transposed to [B, S, 32]),
// as passes' learned_transposed_gather_axis1 and _offset forms. It
// returns the model and the name of the encoding added to the
// embeddings.
func LearnedTransposed(rows int64, offset bool) (*graph.Model, string) {
	const D, V = 32, 50
	m := graph.NewModel(8, "onnxpe testmodels", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	rng := rand.New(rand.NewPCG(11, 13))
	// Embeddings and the table have entries of 0.5; a product's weights
	// 1/sqrt(rows), so that activations stay of order 1 and an output is
	// not a cancellation of terms of order 5 (with entries of 0.5 there,
	// ONNX Runtime's and onnxpe's float32 sums differed by 3.8e-6 at an
	// output of 0.044, outside verify's tolerance across runtimes).
	weight := func(r, c int64, std float64) *graph.Value {
		v := make([]float32, r*c)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * std)
		}
		tt, err := graph.NewTensor(fmt.Sprintf("w%d", len(g.Initializers)), graph.Float, []int64{r, c}, v)
		if err != nil {
			panic(err)
		}
		return g.AddInitializer(tt)
	}
	ints := func(v ...int64) *graph.Value {
		shape := []int64{int64(len(v))}
		if len(v) == 1 {
			shape = nil
		}
		tt, err := graph.NewTensor(fmt.Sprintf("c%d", len(g.Initializers)), graph.Int64, shape, v)
		if err != nil {
			panic(err)
		}
		return g.AddInitializer(tt)
	}
	op := func(typ string, attrs []*graph.Attr, in ...*graph.Value) *graph.Value {
		return g.Op(typ, in, 1, attrs...)[0]
	}
	axis := func(a int64) []*graph.Attr { return []*graph.Attr{graph.IntAttr("axis", a)} }
	perm := func(p ...int64) []*graph.Attr { return []*graph.Attr{graph.IntsAttr("perm", p...)} }
	ids := g.AddInput("input_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
	x := op("Gather", nil, weight(V, D, 0.5), ids)
	var pe *graph.Value
	if offset {
		real := op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Int64))}, op("Not", nil, op("Equal", nil, ids, ints(1))))
		pos := op("Add", nil, op("Mul", nil, op("CumSum", nil, real, ints(1)), real), ints(1))
		pe = op("Transpose", perm(1, 2, 0), op("Gather", axis(1), weight(D, rows, 0.5), pos))
	} else {
		seq := op("Gather", axis(0), op("Shape", nil, ids), ints(1))
		pe = op("Transpose", perm(1, 0), op("Gather", axis(1), weight(D, rows, 0.5), op("Range", nil, ints(0), seq, ints(1))))
	}
	x = op("Add", nil, x, pe)
	proj := func() *graph.Value {
		r := op("Reshape", nil, op("MatMul", nil, x, weight(D, D, 1/math.Sqrt(D))), ints(0, 0, 2, 16))
		return op("Transpose", perm(0, 2, 1, 3), r)
	}
	q, k, v := proj(), proj(), proj()
	scores := op("MatMul", nil, q, op("Transpose", perm(0, 1, 3, 2), k))
	sc, err := graph.NewTensor("scale", graph.Float, nil, []float32{0.25})
	if err != nil {
		panic(err)
	}
	w := op("Softmax", axis(-1), op("Mul", nil, scores, g.AddInitializer(sc)))
	o := op("Reshape", nil, op("Transpose", perm(0, 2, 1, 3), op("MatMul", nil, w, v)), ints(0, 0, D))
	out := op("MatMul", nil, o, weight(D, V, 1/math.Sqrt(D)))
	out.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: V, Known: true}})
	g.AddOutput(out)
	return m, pe.Name
}
