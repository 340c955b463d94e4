package kernels

import (
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

func TestInputsMustMatchDeclaredShapes(t *testing.T) {
	m := graph.NewModel(8, "t", graph.Opset{Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, []graph.Dim{{Param: "n"}, {Value: 3, Known: true}}))
	g.AddOutput(g.Op("Neg", []*graph.Value{x}, 1)[0])
	s, err := NewSession(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(map[string]*Tensor{"x": New(graph.Float, 5, 3)}); err != nil {
		t.Fatalf("a symbolic dimension takes any size: %v", err)
	}
	for _, bad := range [][]int{{5, 4}, {15}, {1, 5, 3}} {
		_, err := s.Run(map[string]*Tensor{"x": New(graph.Float, bad...)})
		if err == nil || !strings.Contains(err.Error(), "declares float32[n,3]") {
			t.Errorf("shape %v: error %v", bad, err)
		}
	}
	if _, err := s.Run(map[string]*Tensor{"x": New(graph.Int64, 5, 3)}); err == nil {
		t.Error("an int64 input for a float32 declaration was accepted")
	}
	lenient, _ := NewSession(m, Options{IgnoreDeclaredShapes: true})
	if _, err := lenient.Run(map[string]*Tensor{"x": New(graph.Float, 15)}); err != nil {
		t.Errorf("IgnoreDeclaredShapes: %v", err)
	}
}
