package work_test

import (
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/work"
)

// shapesOf normalises m and returns the inferred shape of the output of
// each node of the working copy, by op type (the last of each).
func shapesOf(t *testing.T, m *graph.Model) (*work.Work, map[string]work.Shape) {
	t.Helper()
	ctx, err := passes.Run(m, passes.Options{}, work.Normalize)
	if err != nil {
		t.Fatal(err)
	}
	w := passes.Result(ctx, work.Normalize)
	out := map[string]work.Shape{}
	for _, n := range w.M.Graph.Nodes() {
		out[n.OpType] = w.Shape(n.Output(0))
	}
	return w, out
}

func weight(g *graph.Graph, dims ...int64) *graph.Value {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	t, err := graph.NewTensor("w", graph.Float, dims, make([]float32, n))
	if err != nil {
		panic(err)
	}
	return g.AddInitializer(t)
}

// TestEinsumEllipsis: MatMul written as Einsum "...ij,...jk->...ik" (as
// other exporters write it) has MatMul's shape, and a bias added to it
// keeps it.
func TestEinsumEllipsis(t *testing.T) {
	m := graph.NewModel(8, "test", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: 8, Known: true}}))
	e := g.Op("Einsum", []*graph.Value{x, weight(g, 8, 12)}, 1, graph.StringAttr("equation", "...ij,...jk->...ik"))[0]
	y := g.Op("Add", []*graph.Value{weight(g, 12), e}, 1)[0]
	g.AddOutput(y)
	w, s := shapesOf(t, m)
	for _, op := range []string{"Einsum", "Add"} {
		got := s[op]
		if got.Rank() != 3 || got.Dims[0].Known() || got.Dims[1].Known() || got.Dims[2] != 12 {
			t.Errorf("%s: shape %s, want [batch, seq, 12]", op, w.ShapeString(got))
		}
	}
}

// TestBiasOfUnknownShape: a bias added to the output of an op nothing
// infers (an ATen embedding) does not give the sum the bias's shape.
func TestBiasOfUnknownShape(t *testing.T) {
	m := graph.NewModel(8, "test", graph.Opset{Domain: "", Version: 17}, graph.Opset{Domain: "org.pytorch.aten", Version: 1})
	g := m.Graph
	ids := g.AddInput("ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
	n := g.NewNode("ATen", "org.pytorch.aten", []*graph.Value{weight(g, 16, 8), ids}, 1, graph.StringAttr("operator", "embedding"))
	g.Append(n)
	y := g.Op("Add", []*graph.Value{weight(g, 8), n.Output(0)}, 1)[0]
	g.AddOutput(y)
	w, s := shapesOf(t, m)
	if got := s["Add"]; got.Ranked && got.Rank() < 2 {
		t.Errorf("Add: shape %s of a [8] bias added to a value of unknown shape", w.ShapeString(got))
	}
}
