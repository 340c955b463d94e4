package alibi

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
const Color = "#d55e00"

// Scheme is alibi's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `ALiBi: a bias linear in the key position, one slope per head, added to the scores.

ALiBi (Press et al.): a bias m_h·(j - i) (or -m_h·|i - j|, symmetric)
added to the attention scores, one slope m_h per head, the positions from
the key index, the mask's cumulative sum or the distance to the last key;
no position information enters q, k or the embeddings.`,
	Color:    Color,
	Rank:     1,
	Params:   &Params{},
	Tables:   scheme.ByPair,
	Measure:  measure,
	Relative: true,
	Detect:   Detect,
	Rewrites: []scheme.Rewrite{{Name: "alibi", Pass: Rewrite, Help: `--alibi fold (default): the slopes and the distance pattern
become constants, leaving the smallest subgraph ONNX Runtime
runs; --alibi fuse: one ai.onnxpe ALiBiBias node (onnxpe's
executor and generated code; not ONNX Runtime)`}},
	Extend:  &rewrite.Extender{Plan: PlanALiBi},
	Codegen: &emit.Generator{Emit: EmitALiBi, Templates: templates},
	Plots:   Plots,
	Lower:   LowerALiBi,
}
