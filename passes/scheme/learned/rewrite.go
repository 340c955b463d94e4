package learned

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
)

// RewriteLearned turns a learned table gathered at 0, 1, 2, ... into a
// slice of the table.
var Rewrite = &passes.Pass[*rewrite.Change]{
	Name: "rewrite_learned",
	Doc: `Replace the Gather of a learned position table at 0, 1, 2, ... by a Slice.

When the positions a learned table is read at are consecutive (a Range
offset by a cache length, Range(0, S) plus that length, a slice of
BERT's 0, 1, 2, ... buffer), the Gather and the index computation become
one Slice of the table, on the axis the Gather reads (axis 1 of a table
stored transposed, [dim, positions]). Tables read at positions that are
data (computed from a mask, given as input) and tables added whole are
left as they are, and so, with the reason, are positions computed from a
Range otherwise and rows read by a one-hot MatMul (which gives zero rows
past the table, where a Slice refuses the sequence).`,
	Requires: []passes.Analyzer{work.Normalize, Detect, rewrite.Edit},
	Run: func(c *passes.Context) (*rewrite.Change, error) {
		return absolute.AbsolutePass(rewrite.Of(c), c, "rewrite_learned", Name, Detect)
	},
}
