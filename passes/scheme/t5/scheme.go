package t5

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
const Color = "#cc79a7"

// Scheme is t5's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `T5's relative bias: a learned bias per head and bucket of key - query added to the scores.

T5's relative attention bias: key - query mapped to log-spaced buckets
(bidirectional or causal, exact below num_buckets/2, saturating at
max_distance), a learned [buckets, heads] table gathered by bucket and
added to the scores; fused as RelativePositionBias.`,
	Color:    Color,
	Rank:     2,
	Params:   &Params{},
	Tables:   scheme.ByPair,
	Measure:  measure,
	Relative: true,
	Detect:   Detect,
	Rewrites: []scheme.Rewrite{{Name: "t5", Pass: Rewrite, Help: `the bucketed relative bias becomes a table of 2N-1 rows of
heads gathered by key - query (ONNX Runtime's CPU provider runs
it); --t5-op com.microsoft emits RelativePositionBias, which
ONNX Runtime has on CUDA only`}},
	Extend:  &rewrite.Extender{Plan: planT5},
	Codegen: &emit.Generator{Emit: EmitT5, Templates: templates},
	Plots:   Plots,
	Lower:   nil,
}
