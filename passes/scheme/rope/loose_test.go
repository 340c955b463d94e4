package rope_test

import (
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	st "github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
)

// fragment is a model without attention: hidden [batch, seq, 2·16] viewed
// as [batch, 2, seq, 16], turned by change, viewed back.
func fragment(change func(b *st.Net, x, pos *graph.Value) *graph.Value) *graph.Model {
	b := st.NewNet(st.ONNX(17))
	x := b.G.AddInput("hidden", graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: 2 * st.HeadDim, Known: true}}))
	pos := b.PosIDs()
	y := b.Merge3(change(b, b.Heads4(x, 2), pos))
	y.Type = x.Type
	b.G.AddOutput(y)
	return b.M
}

// TestRotationOutsideAttention: RoPE applied to a tensor no attention
// block reads is measured as q is, and reported with no layers; a change
// of the tensor by the position that turns no pairs is not.
func TestRotationOutsideAttention(t *testing.T) {
	m := fragment(func(b *st.Net, x, pos *graph.Value) *graph.Value { return b.RopeUnfused(x, pos, 500000) })
	st.Executes(t, m, 6)
	fs, trace := st.Detect(t, m, rope.Detect)
	f := st.Only(t, fs, trace)
	if len(f.Layers) != 0 {
		t.Errorf("layers %v, want none (no attention block)", f.Layers)
	}
	st.WantParams(t, f, map[string]any{"layout": "half_split", "base": 500000.0, "scaling": "none", "head_dim": st.HeadDim,
		"rotary_dim": st.HeadDim, "num_heads": 2, "num_kv_heads": nil})

	// hidden · (position + 1): position-dependent, but no pairs turn.
	scaled := fragment(func(b *st.Net, x, pos *graph.Value) *graph.Value {
		p := b.Op("Cast", []*graph.Value{b.Op("Add", []*graph.Value{pos, b.I64s(1)})}, graph.IntAttr("to", int64(graph.Float)))
		p = b.Op("Unsqueeze", []*graph.Value{p, b.I64(1, 3)})
		return b.Op("Mul", []*graph.Value{x, p})
	})
	st.Executes(t, scaled, 6)
	fs, trace = st.Detect(t, scaled, rope.Detect)
	st.WantMiss(t, fs, trace, "rope", "outside attention: no dimensions of q are paired")
}

// TestFusedRotationBeforeProjections: a RotaryEmbedding whose output
// reaches a block's q and k only through their projections does not rotate
// them: it is reported with no layers (the static cache's scatter, through
// which a rotation does reach the scores, is TestGeneralityForms'
// rope_fused_static_cache_scatternd).
func TestFusedRotationBeforeProjections(t *testing.T) {
	b := st.NewNet(st.ONNX(17), st.MS())
	pos := b.PosIDs()
	x := b.Embed(b.IDs())
	cos, sin := b.Caches(64, st.HeadDim, 10000, st.One, 1)
	xr := b.Dop("com.microsoft", "RotaryEmbedding", []*graph.Value{x, pos, cos, sin}, 1, graph.IntAttr("num_heads", st.Heads))[0]
	q, k, v := b.Heads4(b.Proj(xr, st.Hidden), st.Heads), b.Heads4(b.Proj(xr, st.Hidden), st.Heads), b.Heads4(b.Proj(xr, st.Hidden), st.Heads)
	b.Output(b.Op("Add", []*graph.Value{x, b.Proj(b.Merge3(b.SoftmaxAttention(q, k, v)), st.Hidden)}))
	st.Executes(t, b.M, 6)
	fs, trace := st.Detect(t, b.M, rope.Detect)
	f := st.Only(t, fs, trace)
	if !f.Fused || len(f.Layers) != 0 {
		t.Errorf("fused %v, layers %v: want the op's finding with no layers", f.Fused, f.Layers)
	}
}
