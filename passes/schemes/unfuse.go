package schemes

import (
	"errors"
	"fmt"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Unfuse lowers the fused positional-encoding ops to primitive ops.
var Unfuse = &passes.Pass[*rewrite.Change]{
	Name: "unfuse",
	Doc: `Lower fused positional-encoding ops to primitive ONNX ops.

RotaryEmbedding (com.microsoft and the opset-23 op) becomes a Gather of
the cos/sin caches at the positions (position_ids, the com.microsoft
offset form, or caches given per token) and the rotation written out:
the halves (or the even and odd elements) multiplied by cos and sin and
added, the dimensions beyond rotary_embedding_dim passed through.
GroupQueryAttention's do_rotary becomes the same rotation of q and k
before the op (positions 0..S-1 on the first prompt, after each
sequence's past otherwise, or its position_ids), the op keeping its
attention. ALiBiBias becomes slope·(j - (key_length-1)) (or
-slope·|i - j|) from a Range. For runtimes without the fused ops.`,
	Requires: []passes.Analyzer{rewrite.Edit},
	Run: func(c *passes.Context) (*rewrite.Change, error) {
		r := rewrite.Of(c)
		ch := r.Begin("unfuse", "")
		defer r.End(ch)
		for _, n := range r.M.Graph.Nodes() {
			for _, sc := range All {
				if sc.Lower == nil {
					continue
				}
				done, err := sc.Lower(r, n)
				if err != nil {
					if errors.Is(err, rewrite.ErrRewrite) {
						ch.Skipped = append(ch.Skipped, fmt.Sprintf("%s (%s): %s", work.NodeName(n), n.OpType, rewrite.Reason(err)))
						break
					}
					return ch, err
				}
				if done {
					break
				}
			}
		}
		return ch, nil
	},
}
