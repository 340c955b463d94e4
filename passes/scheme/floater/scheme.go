package floater

import (
	"embed"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme"
)

// templates are the code generator's (templates/go, templates/c).
//
//go:embed templates
var templates embed.FS

// Color is the scheme's in the HTML report's layer map and plots
// (Okabe and Ito's palette, told apart with colour blindness).
const Color = "#1b9e77"

// Scheme is floater's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `FLOATER: positions as the states of a learned ODE, integrated by a solver and added per layer.

FLOATER (Liu et al.): the positions are the states of a learned
dynamical system, integrated by an ODE solver (unrolled, in a Loop, or
folded into a table) and added to the embeddings or to each layer's q, k
and v.`,
	Color:   Color,
	Rank:    4,
	Params:  &Params{},
	Measure: measure,
	Detect:  Detect,
	Rewrites: []scheme.Rewrite{{Name: "floater", Pass: Rewrite, Help: `FLOATER's integration (an unrolled chain of solver steps or a
Loop) becomes the table of states it produces, the model's own
number of them (--max-positions does not apply)`}},
	Extend:  &rewrite.Extender{Plan: PlanFloater},
	Codegen: &emit.Generator{Emit: EmitFloater, Templates: templates},
	Plots:   Plots,
	Lower:   nil,
}
