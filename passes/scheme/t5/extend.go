package t5

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// planT5 plans the extension of T5's bias: a computed bias is bucketed for
// any distance; a stored one holds the distances below its length only,
// and the bias of the others is not in the file.
func planT5(x *rewrite.Extended, f *passes.Finding) (*rewrite.ExtendItem, error) {
	if ev, _ := f.Evidence.(*Evidence); ev != nil && ev.Stored != "" {
		_, where := rewrite.NewTableItem(f)
		return nil, rewrite.ExtendErr("%s is a stored table (%s) of the distances below %d: the bias of longer distances is not in the file", where, ev.Stored, ev.MaxRel+1)
	}
	return rewrite.PlanRelative(x, f)
}
