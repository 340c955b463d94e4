package verify

import (
	"errors"
	"slices"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// TestDecodeSteps: a set cut into a prompt and single tokens along an
// axis and put back together is the set again; the axis of the steps is
// the one whose sizes follow the cuts.
func TestDecodeSteps(t *testing.T) {
	x := make([]float32, 2*7*3)
	for i := range x {
		x[i] = float32(i)
	}
	whole := kernels.FromSlice([]int{2, 7, 3}, x)
	cuts := [][2]int{{0, 4}, {4, 5}, {5, 6}, {6, 7}}
	var parts []*kernels.Tensor
	for _, c := range cuts {
		parts = append(parts, sliceAxis(whole, 1, c[0], c[1]))
	}
	if got := parts[1].Float64s(); !slices.Equal(got, []float64{12, 13, 14, 33, 34, 35}) {
		t.Fatalf("token 4 of each row: %v", got)
	}
	if ax := stepAxis(parts, cuts); ax != 1 {
		t.Fatalf("step axis %d, want 1", ax)
	}
	back := concatAxis(parts, 1)
	if !slices.Equal(back.Shape, whole.Shape) || !slices.Equal(back.Float64s(), whole.Float64s()) {
		t.Fatalf("put together: %v %v", back.Shape, back.Float64s())
	}
	// Outputs without a token axis cannot be put together.
	pooled := []*kernels.Tensor{kernels.New(graph.Float, 2, 3), kernels.New(graph.Float, 2, 3)}
	if ax := stepAxis(pooled, cuts[:2]); ax != -1 {
		t.Fatalf("pooled outputs: axis %d", ax)
	}
}

// TestLinkCache: B is A with a cache only when each input A lacks is a
// past an op returns the present of as an output A lacks.
func TestLinkCache(t *testing.T) {
	build := func(cache, extraOut bool) *graph.Model {
		m := graph.NewModel(10, "t", graph.Opset{Domain: "", Version: 17})
		g := m.Graph
		x := g.AddInput("x", graph.TensorType(graph.Float, []graph.Dim{{Param: "b"}, {Param: "s"}, {Value: 4, Known: true}}))
		y := x
		if cache {
			p := g.AddInput("past", graph.TensorType(graph.Float, []graph.Dim{{Param: "b"}, {Param: "p"}, {Value: 4, Known: true}}))
			n := g.NewNode("Concat", "", []*graph.Value{p, x}, 1, graph.IntAttr("axis", 1))
			g.Append(n)
			if extraOut {
				g.RenameValue(n.Output(0), "present")
				g.AddOutput(n.Output(0))
			}
			y = n.Output(0)
		}
		n := g.NewNode("Identity", "", []*graph.Value{y}, 1)
		g.Append(n)
		g.RenameValue(n.Output(0), "y")
		g.AddOutput(n.Output(0))
		return m
	}
	a := build(false, false)
	if l, err := linkCache(a, a); l != nil || err != nil {
		t.Fatalf("A with itself: %v %v", l, err)
	}
	l, err := linkCache(a, build(true, true))
	if err != nil || l == nil || l.present["past"] != "present" || l.axis["past"] != 1 {
		t.Fatalf("A with a cache: %+v %v", l, err)
	}
	if _, err := linkCache(a, build(true, false)); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("an extra input whose present is no output: %v", err)
	}
}
