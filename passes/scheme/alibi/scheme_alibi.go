package alibi

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/scorebias"
	"github.com/onnxpe/onnxpe/passes/work"
)

// ALiBiPass finds ALiBi biases added to the attention scores.
var Detect = &passes.Pass[[]*passes.Finding]{
	Name: "alibi",
	Doc: `Find ALiBi: a score bias linear in the key position, with a slope per head.

A bias of the scores (the score_bias pass) linear in the key position with
one slope per head, or falling by it on both sides of the diagonal
(symmetric), is ALiBi: the slopes read exactly from a constant of the
cone when there is one, the positions from the mask's cumulative sum,
the key index, the offset from the last key, or the distance; the
published slope rules give alibi_bias_max.`,
	Requires: []passes.Analyzer{work.Normalize, scorebias.ScoreBias},
	Run: func(c *passes.Context) ([]*passes.Finding, error) {
		w := work.Of(c)
		return scorebias.ClaimBiases(c, func(b *scorebias.Bias) *passes.Finding {
			if b.Slopes == nil {
				return nil
			}
			return alibiFinding(w, b.Block, b.Term, b.View, b.Slopes, b.Symmetric, b.Cone, b.Eps)
		}, nil), nil
	},
}
