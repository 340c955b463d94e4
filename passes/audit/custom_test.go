package audit_test

import (
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
)

// customRotaryModel rotates q and k half-split through an op of another
// domain (q·cos + op(q, splits)·sin, as experimental-experiment's DORT
// exports write onnx-extended's Rotary), cos/sin gathered from stored
// [64, 16] tables by position_ids.
func customRotaryModel(domain, op string, splits []int64, side string) *graph.Model {
	b := newFub(onnx(18), graph.Opset{Domain: domain, Version: 1})
	ids, pos := b.ids(), b.posIDs()
	x := b.embed(ids)
	c, s := b.caches(64, fbHD, 10000, one, 1)
	full := func(t *graph.Value) *graph.Value {
		g := b.op("Gather", []*graph.Value{b.op("Concat", []*graph.Value{t, t}, graph.IntAttr("axis", -1)), pos})
		return b.op("Unsqueeze", []*graph.Value{g, b.i64(1)})
	}
	cos, sin := full(c), full(s)
	rot := func(t *graph.Value) *graph.Value {
		h := b.heads4(t, fbHeads)
		r := b.dop(domain, op, []*graph.Value{h, b.i64(splits...)}, 1, graph.StringAttr("side", side))[0]
		return b.op("Add", []*graph.Value{b.op("Mul", []*graph.Value{h, cos}), b.op("Mul", []*graph.Value{r, sin})})
	}
	q, k := rot(b.proj(x, fbHidden)), rot(b.proj(x, fbHidden))
	a := b.softmaxAttention(q, k, b.heads4(b.proj(x, fbHidden), fbHeads))
	b.output(b.op("Add", []*graph.Value{x, b.proj(b.merge3(a), fbHidden)}))
	return b.m
}

// TestCustomRotation: a rotation by an op of another domain gives the
// sizes and table rows the shapes prove; the layout only when the op's
// contract is rotate_half (onnx-extended's Rotary with equal splits), with
// a note saying so; never for an op whose semantics are not known.
func TestCustomRotation(t *testing.T) {
	sizes := map[string]any{"head_dim": fbHD, "rotary_dim": fbHD, "num_heads": fbHeads, "num_kv_heads": fbHeads, "max_positions": 64}
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
