package verify_test

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/testmodels"
)

// learnedWithPositionIDs is a model that adds rows of a learned position
// table (64 rows) gathered by its position_ids input [batch, seq] to the
// token embeddings, with no attention mask and no attention: each token's
// logits follow its own position.
func learnedWithPositionIDs() *graph.Model {
	m := graph.NewModel(8, "onnxpe test", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	bs := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	ids := g.AddInput("input_ids", graph.TensorType(graph.Int64, bs))
	pos := g.AddInput("position_ids", graph.TensorType(graph.Int64, bs))
	rng := rand.New(rand.NewPCG(3, 5))
	weight := func(name string, dims ...int64) *graph.Value {
		v := make([]float32, dims[0]*dims[1])
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		t, err := graph.NewTensor(name, graph.Float, dims, v)
		if err != nil {
			panic(err)
		}
		return g.AddInitializer(t)
	}
	tok := g.Op("Gather", []*graph.Value{weight("wte", 32, 16), ids}, 1)[0]
	pe := g.Op("Gather", []*graph.Value{weight("wpe", 64, 16), pos}, 1)[0]
	x := g.Op("Add", []*graph.Value{tok, pe}, 1)[0]
	logits := g.Op("MatMul", []*graph.Value{x, weight("head", 16, 32)}, 1)[0]
	logits.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: 32, Known: true}})
	g.AddOutput(logits)
	return m
}

// firstRowPositions makes m read only row 0 of its position_ids:
// position_ids[0:1], expanded back to the input's shape when expand is
// set, else left to broadcast over the batch where it is used (what a
// rewrite that feeds a fused RotaryEmbedding, or gathers its cos/sin or
// position rows, by one row's positions computes).
func firstRowPositions(t *testing.T, m *graph.Model, expand bool) {
	t.Helper()
	g := m.Graph
	pos := g.Lookup("position_ids")
	if pos == nil || !pos.IsGraphInput() {
		t.Fatal("no position_ids input")
	}
	i64 := func(name string, v int64) *graph.Value {
		tt, err := graph.NewTensor(name, graph.Int64, []int64{1}, []int64{v})
		if err != nil {
			t.Fatal(err)
		}
		return g.AddInitializer(tt)
	}
	uses := pos.Uses()
	first := g.NewNode("Slice", "", []*graph.Value{pos, i64("row0_start", 0), i64("row0_end", 1), i64("row0_axis", 0)}, 1)
	g.InsertBefore(g.Nodes()[0], first)
	row0 := first.Output(0)
	if expand {
		shape := g.NewNode("Shape", "", []*graph.Value{pos}, 1)
		e := g.NewNode("Expand", "", []*graph.Value{row0, shape.Output(0)}, 1)
		g.InsertBefore(g.Nodes()[1], e)
		g.InsertBefore(e, shape)
		row0 = e.Output(0)
	}
	for _, u := range uses {
		u.Node.SetInput(u.Index, row0)
	}
}

// TestRowZeroPositionsBroadcastAreCaught verifies models against copies
// that read only row 0's position ids for every row (a learned table's
// gather, a stored cos/sin gather, a fused RotaryEmbedding, computed
// cos/sin; without and with an attention mask): the default sweep gives
// the rows of a batch different positions, so each pair is not equal and
// the report names the differing output. Before the rows' positions
// differed, the models without a mask were reported equal (every row had
// the same positions), and so was rope_llama (its padded rows' real
// tokens sit at positions shifted uniformly, which RoPE does not see),
// and the ONNX backend test's RotaryEmbedding, whose batch of 2 is fixed
// (position_ids [2, 3]: both rows got 0, 1, 2).
func TestRowZeroPositionsBroadcastAreCaught(t *testing.T) {
	llama := func(form testmodels.RopeForm) func() *graph.Model {
		return func() *graph.Model {
			c := testmodels.DefaultLlama
			c.RoPE = form
			if form == testmodels.RopeFusedONNX {
				c.Opset = 23
			}
			return testmodels.Llama(c)
		}
	}
	corpusModel := func(name string) func() *graph.Model {
		return func() *graph.Model { e := entry(t, name); return loadModel(t, e.ModelPath()) }
	}
	cases := []struct {
		name   string
		build  func() *graph.Model
		expand bool
	}{
		{"learned table gather", learnedWithPositionIDs, false},
		{"stored cos/sin gather (Llama)", llama(testmodels.RopeCacheTable), false},
		{"com.microsoft RotaryEmbedding (Llama)", llama(testmodels.RopeFusedMS), true},
		{"ONNX RotaryEmbedding (Llama)", llama(testmodels.RopeFusedONNX), true},
		{"computed cos/sin (Llama)", llama(testmodels.RopeComputed), true},
		{"rope_llama, with an attention mask", corpusModel("rope_llama"), true},
		{"ONNX RotaryEmbedding, every size fixed (batch 2)", func() *graph.Model {
			return loadModel(t, "../passes/testdata/realmodels/onnx_rotary_embedding_3d_input/model.onnx")
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := c.build(), c.build()
			firstRowPositions(t, b, c.expand)
			r := equalToItselfNotTo(t, a, c.build(), b, "a copy reading row 0's positions for every row is equal")
			set, out := firstDifference(t, r)
			if want := a.Graph.Outputs[0].Name; out.Name != want || !strings.Contains(r.Summary, "output "+want) {
				t.Errorf("set %s: output %q differs, want %q; summary %q", set.Name, out.Name, want, r.Summary)
			}
			t.Log(r.Summary)
		})
	}
}
