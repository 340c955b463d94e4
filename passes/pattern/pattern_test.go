package pattern_test

import (
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/pattern"
)

// env names values by their names and knows no ranks.
type env struct{}

func (env) ValueName(v *graph.Value) string                        { return v.Name }
func (env) Rank(*graph.Value) int                                  { return -1 }
func (env) Axes(*graph.Node, int) ([]int64, bool)                  { return nil, false }
func op(g *graph.Graph, t string, in ...*graph.Value) *graph.Value { return g.Op(t, in, 1)[0] }

// TestThroughAndFailures: Thru sees through Cast and Identity only,
// Through through the ops it is given; a failed match says why and at
// which node, the furthest attempt's.
func TestThroughAndFailures(t *testing.T) {
	m := graph.NewModel(8, "test", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, nil))
	neg := op(g, "Neg", x)
	reshaped := op(g, "Reshape", op(g, "Identity", neg), x)
	p := pattern.Op("Neg", pattern.Capture("x"))
	if mt, _ := pattern.MatchValue(env{}, pattern.Thru(p), reshaped); mt != nil {
		t.Error("Thru saw through a Reshape")
	}
	mt, _ := pattern.MatchValue(env{}, pattern.Through([]string{"Reshape", "Identity"}, p), reshaped)
	if mt == nil || mt.Values["x"] != x || len(mt.Nodes) != 3 {
		t.Errorf("Through Reshape and Identity: %v", mt)
	}
	// Neg(Neg(x)) against Neg(Exp(...)): it fails at the inner Neg.
	double := op(g, "Neg", neg)
	mt, miss := pattern.MatchValue(env{}, pattern.Op("Neg", pattern.Op("Exp", pattern.Capture("y"))), double)
	switch {
	case mt != nil:
		t.Fatal("matched")
	case miss.Node != neg.Producer() || miss.Value != neg || !strings.Contains(miss.Reason, "computed by Neg, not [Exp]"):
		t.Errorf("failure %q at %v (value %v), want the inner Neg", miss.Reason, miss.Node, miss.Value.Name)
	}
}
