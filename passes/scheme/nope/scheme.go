package nope

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme"
)

// Color is the scheme's in the HTML report's layer map and plots
// (Okabe and Ito's palette, told apart with colour blindness).
const Color = "#bbbbbb"

// Scheme is nope's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `No positional encoding: the attention block receives no position information.

No positional encoding (NoPE): an attention block whose scores, q and
k receive no position information (order only through a causal mask);
Llama 4's temperature tuning of q by the position is its one parameter.`,
	Color:    Color,
	Rank:     9,
	Params:   &Params{},
	ByAudit:  true,
	Rewrites: nil,
	Extend:   &rewrite.Extender{Plan: func(*rewrite.Extended, *passes.Finding) (*rewrite.ExtendItem, error) { return nil, nil }},
	Lower:    nil,
}
