package passes

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

// Block is one attention block: scores Q·Kᵀ (maybe scaled, biased and
// masked) through a Softmax to a product with V, or a fused attention op.
// Blocks are numbered in the model's topological order from 0.
type Block struct {
	Index int
	// Softmax is the normalisation of the scores (nil for a fused op).
	Softmax *graph.Node
	// QK is the product of the scores; Q and K its operands as the graph
	// has them (K maybe transposed).
	QK   *graph.Node
	Q, K *graph.Value
	// AV is the product of the weights with V (nil when not found).
	AV *graph.Node
	V  *graph.Value
	// ScorePath are the nodes between QK and Softmax (additions of bias and
	// mask, scaling, reshapes).
	ScorePath []*graph.Node
	// Bias are the values added to the scores that do not depend on the
	// tokens' content (masks, ALiBi, T5 bias), with the node adding each.
	Bias []BiasTerm
	// Terms are other products of a content value with a value that does
	// not depend on content, added to the scores (Shaw's q·aᵀ).
	Terms []*graph.Node
	// OutTerms are products of the attention weights with a value that
	// does not depend on content (Shaw's weights·a^V).
	OutTerms []*graph.Node
	// Scaled reports whether the scores are multiplied or divided by a
	// constant on the way to the Softmax.
	Scaled bool
	// Fused is the fused attention op (com.microsoft Attention,
	// MultiHeadAttention, GroupQueryAttention, ..., ONNX Attention) when the
	// block is one node.
	Fused *graph.Node
}

// BiasTerm is a value added to the scores.
type BiasTerm struct {
	Value *graph.Value
	Add   *graph.Node
}

func (b *Block) String() string {
	if b.Fused != nil {
		return fmt.Sprintf("block %d (%v)", b.Index, b.Fused)
	}
	return fmt.Sprintf("block %d (%v)", b.Index, b.Softmax)
}

// FusedAttentionOps are the fused attention ops counted as blocks, by
// "domain.op" ("" for the ONNX domain).
var FusedAttentionOps = map[string]bool{
	"com.microsoft.Attention": true, "com.microsoft.MultiHeadAttention": true,
	"com.microsoft.GroupQueryAttention": true, "com.microsoft.DecoderMaskedMultiHeadAttention": true,
	"com.microsoft.DecoderMaskedSelfAttention": true, "com.microsoft.PackedAttention": true,
	"com.microsoft.PackedMultiHeadAttention": true, "com.microsoft.SparseAttention": true,
	"com.microsoft.LongformerAttention": true, "com.microsoft.QAttention": true,
	"com.microsoft.PagedAttention": true, "com.microsoft.DecoderAttention": true,
	"com.microsoft.QOrderedAttention": true, "com.microsoft.RemovePadding": false,
	".Attention": true,
}

func opKey(n *graph.Node) string {
	d := n.Domain
	if d == "ai.onnx" {
		d = ""
	}
	return d + "." + n.OpType
}

// Blocks finds the attention blocks of the model.
var Blocks = &Pass{
	Name: "blocks",
	Doc: `Find the attention blocks, numbered in topological order from 0.

An unfused block is a Softmax whose input comes (through additions,
scaling, masking and reshapes) from a product of two values that both
depend on the tokens' content (Q·Kᵀ as MatMul, Einsum, FusedMatMul or
Gemm), and whose output multiplies such a value (·V). Values added to the
scores that do not depend on content are the block's bias terms (masks,
ALiBi, T5); products of content with position-only values are its extra
terms (Shaw). Fused attention ops (com.microsoft Attention,
MultiHeadAttention, GroupQueryAttention and the like, and ONNX Attention)
are blocks too.`,
	Requires: []*Pass{Normalize},
	Run: func(c *Context) (any, error) {
		w := c.Work()
		var out []*Block
		for _, g := range graphs(w.M.Graph) {
			for _, n := range g.Nodes() {
				switch {
				case FusedAttentionOps[opKey(n)]:
					out = append(out, &Block{Fused: n})
				case n.OpType == "Softmax" && isONNX(n):
					if b := w.unfusedBlock(c, n); b != nil {
						out = append(out, b)
					}
				}
			}
		}
		slices.SortStableFunc(out, func(a, b *Block) int { return w.Pos(a.node()) - w.Pos(b.node()) })
		for i, b := range out {
			b.Index = i
		}
		return out, nil
	},
}

func (b *Block) node() *graph.Node {
	if b.Fused != nil {
		return b.Fused
	}
	return b.Softmax
}

func isMatMulLike(n *graph.Node) bool {
	switch n.OpType {
	case "MatMul", "Einsum", "Gemm":
		return isONNX(n)
	case "FusedMatMul":
		return n.Domain == "com.microsoft"
	}
	return false
}

// scoreOps are the ops the score path may pass through between Q·Kᵀ and
// the Softmax.
var scoreOps = map[string]bool{"Add": true, "Sub": true, "Mul": true, "Div": true, "Where": true, "Cast": true,
	"Reshape": true, "Transpose": true, "Unsqueeze": true, "Squeeze": true, "Expand": true, "Slice": true,
	"Tanh": true, "Clip": true, "Max": true, "Min": true, "Identity": true, "Sum": true, "Neg": true}

func (w *Work) unfusedBlock(c *Context, sm *graph.Node) *Block {
	b := &Block{Softmax: sm}
	at := w.OrigName(sm)
	if !w.IsAct(sm.Input(0)) {
		c.Miss("block", at, "Softmax input does not depend on the tokens (not attention)", 0)
		return nil
	}
	seen := map[*graph.Node]bool{}
	queue := []*graph.Value{sm.Input(0)}
	for len(queue) > 0 && len(seen) < 64 {
		v := queue[0]
		queue = queue[1:]
		n := v.Producer()
		if n == nil || seen[n] {
			continue
		}
		seen[n] = true
		if isMatMulLike(n) && len(n.Inputs()) >= 2 {
			a, bb := n.Input(0), n.Input(1)
			switch {
			case w.IsAct(a) && w.IsAct(bb):
				if b.QK == nil {
					b.QK, b.Q, b.K = n, a, bb
				}
			case w.IsAct(a) || w.IsAct(bb):
				// A product of content with a constant is a projection (the
				// logits of a classifier); with a position-only value, a
				// relative term.
				other := bb
				if !w.IsAct(a) {
					other = a
				}
				if !w.IsConst(other) && w.roles.of[other] != RoleParam {
					b.Terms = append(b.Terms, n)
				}
			}
			continue
		}
		if !scoreOps[n.OpType] || !isONNX(n) {
			continue
		}
		b.ScorePath = append(b.ScorePath, n)
		for i, x := range n.Inputs() {
			if x == nil {
				continue
			}
			switch {
			case w.IsAct(x):
				queue = append(queue, x)
			case (n.OpType == "Add" || n.OpType == "Sub" || n.OpType == "Sum") && (!w.IsConst(x) || w.Shape(x).Rank() >= 2):
				// Position-side values and constant matrices (a bias the
				// fixed shapes of the model let normalisation fold).
				b.Bias = append(b.Bias, BiasTerm{Value: x, Add: n})
			case n.OpType == "Where" && i > 0 && !w.IsConst(x):
				b.Bias = append(b.Bias, BiasTerm{Value: x, Add: n})
			case (n.OpType == "Mul" || n.OpType == "Div") && w.IsConst(x):
				b.Scaled = true
			}
		}
	}
	if b.QK == nil {
		c.Miss("block", at, "no product of two content values (Q·Kᵀ) before the Softmax", 1)
		return nil
	}
	w.findAV(b)
	return b
}

// avOps are the ops between the Softmax and the product with V.
var avOps = map[string]bool{"Cast": true, "Dropout": true, "Where": true, "Mul": true, "Reshape": true,
	"Expand": true, "Transpose": true, "Slice": true, "Identity": true, "Unsqueeze": true, "Squeeze": true, "Div": true}

func (w *Work) findAV(b *Block) {
	seen := map[*graph.Node]bool{}
	queue := []*graph.Value{b.Softmax.Output(0)}
	for len(queue) > 0 && len(seen) < 32 {
		v := queue[0]
		queue = queue[1:]
		for _, u := range v.Uses() {
			n := u.Node
			if seen[n] {
				continue
			}
			seen[n] = true
			if isMatMulLike(n) && len(n.Inputs()) >= 2 {
				other := n.Input(1 - min(u.Index, 1))
				if w.IsAct(other) {
					if b.AV == nil {
						b.AV, b.V = n, other
					}
				} else if other != nil && !w.IsConst(other) {
					b.OutTerms = append(b.OutTerms, n)
				}
				continue
			}
			if avOps[n.OpType] && isONNX(n) {
				for _, o := range n.Outputs() {
					queue = append(queue, o)
				}
			}
		}
	}
}
