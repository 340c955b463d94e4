package complexorder

import (
	"embed"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/passes/scheme"
)

// templates are the code generator's (templates/go, templates/c).
//
//go:embed templates
var templates embed.FS

// Color is the scheme's in the HTML report's layer map and plots
// (Okabe and Ito's palette, told apart with colour blindness).
const Color = "#6a3d9a"

// Scheme is complexorder's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `Complex-order embeddings: each word a wave of amplitude, frequency and phase over the positions.

Complex-order word embeddings (Wang et al.): each word embedded as
amplitude·e^(i(ω·pos + θ)), its frequency (and phase) learned per word,
the real and imaginary parts the embedding.`,
	Color:    Color,
	Rank:     4,
	Params:   &Params{},
	Measure:  measure,
	Detect:   Detect,
	Rewrites: nil,
	Extend:   nil,
	Codegen:  &emit.Generator{Emit: EmitComplexOrder, Templates: templates},
	Plots:    Plots,
	Lower:    nil,
}
