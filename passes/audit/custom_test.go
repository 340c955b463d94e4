package audit_test

import (
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/internal/schemetest"
)

// customRotaryModel rotates q and k half-split through an op of another
// domain (q·cos + op(q, splits)·sin, as experimental-experiment's DORT
// exports write onnx-extended's Rotary), cos/sin gathered from stored
// [64, 16] tables by position_ids.
func customRotaryModel(domain, op string, splits []int64, side string) *graph.Model {
	b := schemetest.NewNet(schemetest.ONNX(18), graph.Opset{Domain: domain, Version: 1})
	ids, pos := b.IDs(), b.PosIDs()
	x := b.Embed(ids)
	c, s := b.Caches(64, schemetest.HeadDim, 10000, schemetest.One, 1)
	full := func(t *graph.Value) *graph.Value {
		g := b.Op("Gather", []*graph.Value{b.Op("Concat", []*graph.Value{t, t}, graph.IntAttr("axis", -1)), pos})
		return b.Op("Unsqueeze", []*graph.Value{g, b.I64(1)})
	}
	cos, sin := full(c), full(s)
	rot := func(t *graph.Value) *graph.Value {
		h := b.Heads4(t, schemetest.Heads)
		r := b.Dop(domain, op, []*graph.Value{h, b.I64(splits...)}, 1, graph.StringAttr("side", side))[0]
		return b.Op("Add", []*graph.Value{b.Op("Mul", []*graph.Value{h, cos}), b.Op("Mul", []*graph.Value{r, sin})})
	}
	q, k := rot(b.Proj(x, schemetest.Hidden)), rot(b.Proj(x, schemetest.Hidden))
	a := b.SoftmaxAttention(q, k, b.Heads4(b.Proj(x, schemetest.Hidden), schemetest.Heads))
	b.Output(b.Op("Add", []*graph.Value{x, b.Proj(b.Merge3(a), schemetest.Hidden)}))
	return b.M
}

// TestCustomRotation: a rotation by an op of another domain gives the
// sizes and table rows the shapes prove; the layout only when the op's
// contract is rotate_half (onnx-extended's Rotary with equal splits), with
// a note saying so; never for an op whose semantics are not known.
func TestCustomRotation(t *testing.T) {
	sizes := map[string]any{"head_dim": schemetest.HeadDim, "rotary_dim": schemetest.HeadDim, "num_heads": schemetest.Heads, "num_kv_heads": schemetest.Heads, "max_positions": 64}
	with := func(k string, v any) map[string]any {
		out := map[string]any{k: v}
		for k, v := range sizes {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		m      *graph.Model
		params map[string]any
		null   []string
		note   string
	}{
		{"onnx_extended_rotary", customRotaryModel("onnx_extended.ortops.optim.cuda", "Rotary", []int64{8, 8}, "right"),
			with("layout", "half_split"), []string{"base", "scaling", "factor"}, "dimension i pairs with i+8"},
		{"onnx_extended_rotary_left", customRotaryModel("onnx_extended.ortops.optim.cuda", "Rotary", []int64{8, 8}, "left"),
			with("layout", "half_split"), []string{"base", "scaling", "factor"}, "side \"left\""},
		{"onnx_extended_rotary_unequal_splits", customRotaryModel("onnx_extended.ortops.optim.cuda", "Rotary", []int64{4, 12}, "right"),
			sizes, []string{"layout", "base", "scaling", "factor"}, "whose semantics onnxpe does not know"},
		{"unknown_op", customRotaryModel("example.custom", "RotateHalf", []int64{8, 8}, "right"),
			sizes, []string{"layout", "base", "scaling", "factor"}, "whose semantics onnxpe does not know"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, err := audit.AuditModel(tc.m, tc.name, passes.Options{})
			if err != nil {
				t.Fatal(err)
			}
			checkReport(t, r, []string{"rope"}, []wantFinding{{scheme: "rope", layers: []int{0}, params: tc.params, null: tc.null, note: tc.note}})
		})
	}
}
