package learned

import (
	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme"
)

// Color is the scheme's in the HTML report's layer map and plots
// (Okabe and Ito's palette, told apart with colour blindness).
const Color = "#009e73"

// Scheme is learned's entry in the list of schemes (passes/schemes).
var Scheme = &scheme.Scheme{
	Name: Name,
	Doc: `Learned absolute encoding: a trained table of one row per position added to the embeddings.

Learned absolute encoding: a trained table with a row per position
(GPT-2, BERT, OPT's offset 2, ViT's patches), read at the positions and
added to the token embeddings; fused in EmbedLayerNormalization.`,
	Color:    Color,
	Rank:     5,
	Params:   &Params{},
	Measure:  measure,
	Detect:   Detect,
	Rewrites: []scheme.Rewrite{{Name: "learned", Pass: Rewrite, Help: `a learned table gathered at 0, 1, 2, ... is sliced instead`}},
	Extend:   &rewrite.Extender{Methods: []string{rewrite.MethodHierarchical}, Absent: "decomposes learned position tables; the model has none", Plan: PlanLearned, Apply: absolute.ApplyTable},
	Codegen:  &emit.Generator{Emit: EmitLearned, Templates: absolute.Templates},
	Plots:    Plots,
	Lower:    nil,
}
