package graph_test

import (
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

// TestGraphModel makes models of the graphs held by a node's attributes:
// one that stands alone becomes a model with the names, initializers and
// opsets it had; one that reads a value of the graph around it is refused.
func TestGraphModel(t *testing.T) {
	m := graph.NewModel(9, "test", graph.Opset{Domain: "", Version: 17}, graph.Opset{Domain: "com.microsoft", Version: 1})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(2)))
	outer, _ := graph.NewTensor("outer_c", graph.Float, []int64{2}, []float32{1, 2})
	oc := g.AddInitializer(outer)

	alone := g.NewSubgraph("decoder")
	in := alone.AddInput("ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
	ct, _ := graph.NewTensor("table", graph.Float, []int64{4, 2}, []float32{1, 2, 3, 4, 5, 6, 7, 8})
	tab := alone.AddInitializer(ct)
	gn := alone.NewNode("Gather", "", []*graph.Value{tab, in}, 1)
	gn.Name = "embed"
	alone.Append(gn)
	alone.AddOutput(gn.Output(0))

	reads := g.NewSubgraph("then")
	rn := reads.NewNode("Add", "", []*graph.Value{oc, oc}, 1)
	reads.Append(rn)
	reads.AddOutput(rn.Output(0))

	n := g.NewNode("BeamSearch", "com.microsoft", []*graph.Value{x}, 1, graph.GraphAttr("decoder", alone), graph.GraphAttr("other", reads))
	g.Append(n)
	g.AddOutput(n.Output(0))

	sm, err := m.GraphModel(alone)
	if err != nil {
		t.Fatal(err)
	}
	if len(sm.Graph.Inputs) != 1 || sm.Graph.Inputs[0].Name != "ids" || len(sm.Graph.Nodes()) != 1 || sm.Graph.Nodes()[0].Name != "embed" {
		t.Fatalf("the model of the decoder has inputs %v and nodes %v", sm.Graph.Inputs, sm.Graph.Nodes())
	}
	if sm.Graph.Lookup("table") == nil || sm.Graph.Lookup("table").Const == nil || sm.OpsetVersion("com.microsoft") != 1 || sm.IRVersion() != 9 {
		t.Fatal("the model of the decoder lost its initializer, opsets or IR version")
	}
	// The copy shares nothing: renaming in it leaves the original alone.
	sm.Graph.Nodes()[0].Name = "renamed"
	if gn.Name != "embed" {
		t.Fatal("the copy shares its nodes with the original")
	}
	if _, err := m.GraphModel(reads); err == nil || !strings.Contains(err.Error(), "stand alone") {
		t.Fatalf("a graph reading an outer value gave %v", err)
	}
	other := graph.NewModel(9, "x", graph.Opset{Domain: "", Version: 17})
	if _, err := other.GraphModel(alone); err == nil {
		t.Fatal("a graph of another model was accepted")
	}
}
