package disentangled

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
const Color = "#7f4f24"

// Scheme is disentangled's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `DeBERTa's disentangled attention: content-to-position and position-to-content scores of bucketed distances.

DeBERTa's disentangled attention: a relative embedding of the
log-bucketed distance projected by the key (c2p) and query (p2c)
projections, gathered by q - k and added to the content scores, scaled by
sqrt(d·s).`,
	Color:    Color,
	Rank:     3,
	Params:   &Params{},
	Tables:   scheme.ByDistance,
	Measure:  measure,
	Relative: true,
	Detect:   Detect,
	Rewrites: []scheme.Rewrite{{Name: "disentangled", Pass: Rewrite, Help: `DeBERTa's log buckets become a table of 2N-1 relative
positions gathered at q - k`}},
	Extend:  &rewrite.Extender{Plan: rewrite.PlanRelative},
	Codegen: &emit.Generator{Emit: EmitDisentangled, Templates: templates},
	Plots:   Plots,
	Lower:   nil,
}
