package graph_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
)

// TestGraphModel makes models of the graphs held by a node's attributes:
// one that stands alone becomes a model with the names, initializers and
// opsets it had; one that reads an initializer of the graph around it
// (convert_generation.py's moved initializers) carries a copy of it; one
// that reads a value the graph around it computes is refused.
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

	computed := g.NewSubgraph("else")
	cn := computed.NewNode("Add", "", []*graph.Value{x, oc}, 1)
	computed.Append(cn)
	computed.AddOutput(cn.Output(0))

	n := g.NewNode("BeamSearch", "com.microsoft", []*graph.Value{x}, 1, graph.GraphAttr("decoder", alone), graph.GraphAttr("other", reads),
		graph.GraphAttr("third", computed))
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
	rm, err := m.GraphModel(reads)
	if err != nil {
		t.Fatalf("a graph reading an outer initializer: %v", err)
	}
	if c := rm.Graph.Lookup("outer_c"); c == nil || c.Const == nil || len(rm.Graph.Initializers) != 1 {
		t.Fatalf("the model of a graph reading outer_c has initializers %v", rm.Graph.Initializers)
	}
	// The outer initializer is the copy's alone: the original graph, saved
	// and loaded, still reads it from the main graph.
	p := filepath.Join(t.TempDir(), "m.onnx")
	if err := m.Save(p, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	back, err := graph.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	for bn := range back.Graph.All() {
		if a := bn.Attr("other"); a != nil && len(a.Graph.Initializers) != 0 {
			t.Fatalf("the original branch gained initializers %v", a.Graph.Initializers)
		}
	}
	if _, err := m.GraphModel(computed); err == nil || !strings.Contains(err.Error(), "stand alone") || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("a graph reading an outer input gave %v", err)
	}
	other := graph.NewModel(9, "x", graph.Opset{Domain: "", Version: 17})
	if _, err := other.GraphModel(alone); err == nil {
		t.Fatal("a graph of another model was accepted")
	}
}
