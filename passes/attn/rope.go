package attn

import (
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Sides finds, for every unfused block, what reaches its Q and K operands.
var Sides = &passes.Pass[map[*Block]*BlockSides]{
	Name: "sides",
	Doc: `Walk back from both operands of every block's Q·Kᵀ to the projected q and k.

Fused attention ops that take q and k projected are walked back from
those inputs. Layout changes, constant scales, the repeat of grouped KV
heads, the concatenation with a KV cache and a weightless row norm are
skipped; what
remains between the projection and the scores is the side's region, with
the values that do not depend on content entering it (cos/sin, a
temperature). A region with no such value means no positional change.`,
	Requires: []passes.Analyzer{work.Normalize, Blocks},
	Run: func(c *passes.Context) (map[*Block]*BlockSides, error) {
		w := work.Of(c)
		out := map[*Block]*BlockSides{}
		for _, b := range passes.Result(c, Blocks) {
			if b.Q == nil || b.K == nil {
				continue // a fused op that projects q and k itself
			}
			bs := &BlockSides{}
			hd := w.Shape(b.Q).Last()
			if b.HeadDim != 0 {
				hd = b.HeadDim
			}
			bs.Q, bs.QWhy = findSide(w, b.Q, hd)
			bs.K, bs.KWhy = findSide(w, b.K, hd)
			if bs.QWhy != "" {
				c.Miss("rope", w.OrigName(b.Node()), bs.QWhy, 0)
			}
			out[b] = bs
		}
		return out, nil
	},
}

// BlockSides are the two sides of a block.
type BlockSides struct {
	Q, K       *Side
	QWhy, KWhy string
}
