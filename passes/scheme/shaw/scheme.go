package shaw

import (
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme"
)

// Scheme is shaw's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `Shaw's relative embeddings: learned vectors of the clipped distance added to q·k (and the values).

Relative position representations (Shaw et al.): learned vectors of the
distance clipped at max_relative_position, multiplied with q and added to
the scores (and with the weights, to the values).`,
	Rank:     3,
	Params:   &Params{},
	Detect:   Detect,
	Rewrites: nil,
	Extend:   &rewrite.Extender{Plan: rewrite.PlanRelative},
	Lower:    nil,
}
