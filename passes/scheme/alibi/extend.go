package alibi

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// planALiBi plans the extension of ALiBi: bias constants fixed at export
// are continued with the model's slopes (by widenBounded).
func PlanALiBi(x *rewrite.Extended, f *passes.Finding) (*rewrite.ExtendItem, error) {
	it, where := rewrite.NewTableItem(f)
	if x.Opts.Method != "" {
		return nil, rewrite.ExtendErr("--method %s does not fit %s: ALiBi bias constants are continued with their own slopes (no --method)", x.Opts.Method, where)
	}
	p := f.Params.(*Params)
	it.Params["slopes"] = p.Slopes
	if p.MaxPositions == nil {
		it.Form, it.Method = rewrite.FormComputed, "none"
		it.Note("computed from the positions of every call: nothing to enlarge")
		return it, nil
	}
	it.Form, it.Method, it.OldMax = "constants", rewrite.MethodOwnFormula, passes.Ptr(*p.MaxPositions)
	it.Note("the bias constants, linear in the key position with the model's slopes, are continued to %d keys", x.Opts.To)
	return it, nil
}
