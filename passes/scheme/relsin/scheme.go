package relsin

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
const Color = "#f0e442"

// Scheme is relsin's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `Transformer-XL / XLNet relative attention: sinusoids of the distance projected and scored with global biases.

Transformer-XL and XLNet relative attention: a sinusoid table of the
distances, projected by its own key weights, scored against q plus learned
global biases u and v, aligned to key - query by a relative shift.`,
	Color:    Color,
	Rank:     3,
	Params:   &Params{},
	Tables:   scheme.ByDistance,
	Measure:  measure,
	Relative: true,
	Detect:   Detect,
	Rewrites: []scheme.Rewrite{{Name: "relative_sinusoidal", Pass: Rewrite, Help: `Transformer-XL's and XLNet's sinusoid of relative
distances becomes a [2N+1, dim] table gathered at the
distances (which stay computed, clamp_len included)`}},
	Extend:  &rewrite.Extender{Plan: planRelSin},
	Codegen: &emit.Generator{Emit: EmitRelSin, Templates: templates},
	Plots:   Plots,
	Lower:   nil,
}
