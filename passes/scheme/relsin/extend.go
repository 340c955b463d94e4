package relsin

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// planRelSin plans the extension of a relative sinusoid: a computed one
// is computed for any distance; a stored one holds the distances of its
// rows only, and the sinusoid of the others is not in the file.
func planRelSin(x *rewrite.Extended, f *passes.Finding) (*rewrite.ExtendItem, error) {
	if ev, _ := f.Evidence.(*Evidence); ev != nil && ev.Stored != "" {
		_, where := rewrite.NewTableItem(f)
		return nil, rewrite.ExtendErr("%s is a stored table (%s) of the distances %s: the sinusoid of longer distances is not in the file", where, ev.Stored, distanceSpan(ev.Distances))
	}
	return rewrite.PlanRelative(x, f)
}
