package unknown

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme"
)

// Color is the scheme's in the HTML report's layer map: dark, where
// nope's is light grey.
const Color = "#4d4d4d"

// Scheme is unknown's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `The audit cannot tell: no attention found, a probe that could not run, or position information no scheme fits.

Where the audit cannot tell a block's positional encoding it says so
instead of guessing: no attention block was found, a probe it needed
could not run, or the block receives position information (its scores
change with the positions, or a value that changes with the position
joins its inputs) that fits no scheme onnxpe reads. The reason and the
node are its params, what was measured its notes and evidence.`,
	Color:   Color,
	Rank:    10,
	Params:  &Params{},
	ByAudit: true,
	Extend:  &rewrite.Extender{Plan: refuse},
}

// refuse is extend's plan of an unknown finding: what the audit cannot
// read, extend cannot change.
func refuse(_ *rewrite.Extended, f *passes.Finding) (*rewrite.ExtendItem, error) {
	why := "the audit cannot tell their encoding"
	if len(f.Notes) > 0 {
		why = f.Notes[0]
	}
	return nil, rewrite.ExtendErr("layers %v: %s (unknown); extend changes only encodings the audit reads", f.Layers, why)
}
