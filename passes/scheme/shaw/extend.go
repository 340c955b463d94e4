package shaw

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// plan is the extension's plan of a finding: embeddings gathered by an
// index are computed for any distance; embeddings stored whole hold the
// queries and keys of the stored table only, and are refused (as T5's
// stored bias is): the embeddings of longer inputs are not in the file.
func plan(x *rewrite.Extended, f *passes.Finding) (*rewrite.ExtendItem, error) {
	if ev, _ := f.Evidence.(*Evidence); ev != nil && ev.Stored != "" {
		_, where := rewrite.NewTableItem(f)
		return nil, rewrite.ExtendErr("%s is stored whole (%s, [queries, keys, dim], of %d queries and keys): the embeddings of longer inputs are not in the file", where, ev.Stored, ev.Held)
	}
	return rewrite.PlanRelative(x, f)
}
