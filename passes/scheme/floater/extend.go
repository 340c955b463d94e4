package floater

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// planFloater refuses FLOATER integrated over a fixed number of positions.
func PlanFloater(x *rewrite.Extended, f *passes.Finding) (*rewrite.ExtendItem, error) {
	if p := f.Params.(*Params); p.MaxPositions != nil {
		_, where := rewrite.NewTableItem(f)
		return nil, rewrite.ExtendErr("%s is the solution of an ODE integrated over %d positions (%s form): extend does not continue the integration", where, *p.MaxPositions, p.Form)
	}
	return rewrite.PlanComputed(x, f)
}
