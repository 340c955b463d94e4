package kernels

import (
	"errors"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/x448/float16"
)

func TestEvalNode(t *testing.T) {
	m := graph.NewModel(8, "t", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	a := g.AddInput("a", graph.TensorType(graph.Float16, graph.Dims(2)))
	b := g.AddInput("b", graph.TensorType(graph.Float16, graph.Dims(2)))
	n := g.NewNode("Add", "", []*graph.Value{a, b}, 1)
	x := FromSlice([]int{2}, []float16.Float16{float16.Fromfloat32(1), float16.Fromfloat32(2048)})
	y := FromSlice([]int{2}, []float16.Float16{float16.Fromfloat32(2), float16.Fromfloat32(1)})
	outs, err := EvalNode(n, 17, []*Tensor{x, y}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := Data[float16.Float16](outs[0])
	// 2048 + 1 is not a float16: it rounds to even, as in a session.
	if got[0].Float32() != 3 || got[1].Float32() != 2048 {
		t.Errorf("Add = %v", got)
	}
	iff := g.NewNode("If", "", []*graph.Value{a}, 1, graph.GraphAttr("then_branch", g.NewSubgraph("t")), graph.GraphAttr("else_branch", g.NewSubgraph("e")))
	if _, err := EvalNode(iff, 17, []*Tensor{x}, Options{}); !errors.Is(err, ErrUnsupportedOp) {
		t.Errorf("If: %v, want ErrUnsupportedOp", err)
	}
	bad := g.NewNode("NoSuchOp", "", []*graph.Value{a}, 1)
	if _, err := EvalNode(bad, 17, []*Tensor{x}, Options{}); !errors.Is(err, ErrUnsupportedOp) {
		t.Errorf("unknown op: %v", err)
	}
	mm := g.NewNode("MatMul", "", []*graph.Value{a, b}, 1)
	if _, err := EvalNode(mm, 17, []*Tensor{FromSlice([]int{2, 3}, make([]float32, 6)), FromSlice([]int{2, 3}, make([]float32, 6))}, Options{}); err == nil {
		t.Error("MatMul of mismatched shapes succeeded")
	} else if ne := new(NodeError); !errors.As(err, &ne) {
		t.Errorf("kernel error %v is not a *NodeError", err)
	}
}
