package shaw

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
const Color = "#56b4e9"

// Scheme is shaw's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `Shaw's relative embeddings: learned vectors of the clipped distance added to q·k (and the values).

Relative position representations (Shaw et al.): learned vectors of the
distance clipped at max_relative_position, multiplied with q and added to
the scores (and with the weights, to the values).`,
	Color:    Color,
	Rank:     3,
	Params:   &Params{},
	Tables:   scheme.ByDistance,
	Measure:  measure,
	Relative: true,
	Detect:   Detect,
	Rewrites: nil,
	Extend:   &rewrite.Extender{Plan: plan},
	Codegen:  &emit.Generator{Emit: EmitShaw, Templates: templates},
	Plots:    Plots,
	Lower:    nil,
}
