package t5

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/scorebias"
	"github.com/onnxpe/onnxpe/passes/work"
)

// T5Pass finds T5's bucketed relative bias.
var Detect = &passes.Pass[[]*passes.Finding]{
	Name: "t5",
	Doc: `Find T5's bucketed relative bias added to the attention scores.

A bias of the scores (the score_bias pass) that depends only on key -
query but not linearly is a relative bias, T5's when it gathers a
[buckets, heads] table by a bucket index: evaluating the index over all
relative positions gives the bucket map, from which the number of
buckets, bidirectionality and max_distance are fitted. RelativePositionBias
(and GatedRelativePositionBias gating one) on a block's bias input is T5's
bias fused, its parameters read from the attributes and the table's shape.`,
	Requires: []passes.Analyzer{work.Normalize, attn.Blocks, scorebias.ScoreBias},
	Run: func(c *passes.Context) ([]*passes.Finding, error) {
		w := work.Of(c)
		fused := relPosBiases(w, c, passes.Result(c, attn.Blocks))
		return scorebias.ClaimBiases(c, func(b *scorebias.Bias) *passes.Finding {
			if b.Slopes != nil || !b.Toeplitz {
				return nil
			}
			f, why := t5Finding(w, b.Block, b.Term, b.Cone, b.Readers)
			if f == nil {
				c.Miss("t5", b.At, why, 3)
			}
			return f
		}, fused), nil
	},
}
