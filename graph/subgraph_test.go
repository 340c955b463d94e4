package graph_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/onnxpb"
	"github.com/onnxpe/onnxpe/testmodels"
)

// TestUsesInsideSubgraphs edits a value read only from inside an If branch.
func TestUsesInsideSubgraphs(t *testing.T) {
	m := testmodels.SinusoidalIf()
	g := m.Graph
	table := g.Lookup("pe_table")
	if table == nil || table.Const == nil {
		t.Fatal("no pe_table initializer")
	}
	uses := table.Uses()
	if len(uses) != 1 || uses[0].Node.Graph() == g || uses[0].Node.Graph().Owner() == nil || uses[0].Node.Graph().Owner().OpType != "If" {
		t.Fatalf("pe_table should be read once, from inside the If: %v", uses)
	}
	// Replace it by another initializer: the branch must read the new one.
	nt, _ := graph.NewTensor("pe_table_v2", graph.Float, table.Const.Dims(), make([]float32, table.Const.Len()))
	repl := g.AddInitializer(nt)
	table.ReplaceAllUsesWith(repl)
	if len(table.Uses()) != 0 || len(repl.Uses()) != 1 || uses[0].Node.Input(0) != repl {
		t.Fatalf("after replacement: old %d uses, new %d", len(table.Uses()), len(repl.Uses()))
	}
	before := len(g.Initializers)
	g.EliminateDeadCode()
	if len(g.Initializers) != before-1 || g.Lookup("pe_table") != nil {
		t.Fatal("the unused initializer was not removed")
	}
	// Removing the If drops the readers inside its branches.
	var ifNode *graph.Node
	for _, n := range g.Nodes() {
		if n.OpType == "If" {
			ifNode = n
		}
	}
	if err := g.Remove(ifNode); err == nil {
		t.Fatal("removed an If whose output is read")
	}
	ifNode.Output(0).ReplaceAllUsesWith(repl) // any value will do for the test
	if err := g.Remove(ifNode); err != nil {
		t.Fatal(err)
	}
	if len(repl.Uses()) != 1 { // the encoder's Add now reads it directly
		t.Fatalf("uses from inside the removed branches remain: %v", repl.Uses())
	}
	// The edited model still saves and loads.
	data, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := graph.Decode(data, ""); err != nil {
		t.Fatal(err)
	}
}

// TestTopoSortSeesSubgraphReads: a node whose branch reads a value must
// come after that value's producer even though none of its inputs names it.
func TestTopoSortSeesSubgraphReads(t *testing.T) {
	vi := func(n string) *onnxpb.ValueInfoProto { return &onnxpb.ValueInfoProto{Name: proto.String(n)} }
	branch := func(name string) *onnxpb.GraphProto {
		return &onnxpb.GraphProto{
			Name:   proto.String(name),
			Node:   []*onnxpb.NodeProto{{OpType: proto.String("Neg"), Input: []string{"s"}, Output: []string{name + "_out"}}},
			Output: []*onnxpb.ValueInfoProto{vi(name + "_out")},
		}
	}
	graphAttr := func(name string, g *onnxpb.GraphProto) *onnxpb.AttributeProto {
		return &onnxpb.AttributeProto{Name: proto.String(name), Type: onnxpb.AttributeProto_GRAPH.Enum(), G: g}
	}
	m := decode(t, &onnxpb.GraphProto{
		Input:  []*onnxpb.ValueInfoProto{vi("x"), vi("c")},
		Output: []*onnxpb.ValueInfoProto{vi("y")},
		Node: []*onnxpb.NodeProto{
			// The If comes first, but its branches read s, made after it.
			{OpType: proto.String("If"), Name: proto.String("if"), Input: []string{"c"}, Output: []string{"y"},
				Attribute: []*onnxpb.AttributeProto{graphAttr("then_branch", branch("t")), graphAttr("else_branch", branch("e"))}},
			{OpType: proto.String("Neg"), Name: proto.String("make_s"), Input: []string{"x"}, Output: []string{"s"}},
		},
	})
	s := m.Graph.Lookup("s")
	if s.NumUses() != 2 {
		t.Fatalf("s is read %d times, want 2 (once per branch)", s.NumUses())
	}
	if err := m.Graph.TopoSort(); err != nil {
		t.Fatal(err)
	}
	if got := m.Graph.Nodes()[0].Name; got != "make_s" {
		t.Fatalf("first node after sorting: %s, want make_s", got)
	}
}
