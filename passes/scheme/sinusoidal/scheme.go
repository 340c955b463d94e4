package sinusoidal

import (
	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme"
)

// Color is the scheme's in the HTML report's layer map and plots
// (Okabe and Ito's palette, told apart with colour blindness).
const Color = "#e69f00"

// Scheme is sinusoidal's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `Sinusoidal absolute encoding: sin/cos of position·frequency added to the embeddings.

Sinusoidal absolute encoding (Vaswani et al.): sin and cos of
position·base^(-k/D) (D = d/2 or d/2 - 1), interleaved or [sin | cos],
added to the token embeddings; computed in the graph or read from a
stored table (fairseq's with a zeroed padding row).`,
	Color:   Color,
	Rank:    4,
	Params:  &Params{},
	Measure: measure,
	Detect:  Detect,
	Rewrites: []scheme.Rewrite{{Name: "sinusoidal", Pass: Rewrite, Help: `a sinusoidal encoding computed in the graph becomes a
constant table sliced (or gathered) by the positions; a
stored table gathered at 0, 1, 2, ... is sliced instead`}},
	Extend:  &rewrite.Extender{Plan: PlanSinusoidal, Apply: absolute.ApplyTable},
	Codegen: &emit.Generator{Emit: EmitSinusoidal, Templates: absolute.Templates},
	Plots:   Plots,
	Lower:   nil,
}
