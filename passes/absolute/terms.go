package absolute

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/work"
)

// attentionTerm reports whether v, a sum with one activation, is a term
// of the attention rather than an encoding of the embeddings: it reaches
// a block's products (Q·Kᵀ, the weights times V, a score term of Shaw's)
// before any product by weights (it is added to q, k or v after their
// projection: FLOATER's per-layer states, Transformer-XL's bias u), or it
// reaches the scores other than through those products (Transformer-XL's
// bias v, in q·R added to the scores). An encoding of the embeddings
// reaches the blocks through their projections. Such terms are found near
// the sum: the walk stops after attentionReach values.
func attentionTerm(w *work.Work, v *graph.Value, blocks []*attn.Block) bool {
	products, scores := map[*graph.Node]bool{}, map[*graph.Node]bool{}
	for _, b := range blocks {
		if b.Fused != nil {
			continue
		}
		for _, n := range append([]*graph.Node{b.QK, b.AV}, append(b.Terms, b.OutTerms...)...) {
			products[n] = n != nil
		}
		for _, n := range append([]*graph.Node{b.Softmax}, b.ScorePath...) {
			scores[n] = n != nil
		}
	}
	type item struct {
		v         *graph.Value
		projected bool
	}
	seen := map[item]bool{{v, false}: true}
	queue := []item{{v, false}}
	for k := 0; k < len(queue) && k < attentionReach; k++ {
		x := queue[k]
		for _, u := range x.v.Uses() {
			n := u.Node
			switch {
			case scores[n], products[n] && !x.projected:
				return true
			case products[n], n.OpType == "Shape", n.OpType == "Size", n.Graph() != x.v.Graph():
				continue // through the block's products, or only its size read
			}
			next := item{projected: x.projected || weightProduct(w, n, x.v)}
			for _, o := range n.Outputs() {
				if next.v = o; !seen[next] {
					seen[next] = true
					queue = append(queue, next)
				}
			}
		}
	}
	return false
}

// attentionReach bounds the values attentionTerm walks through.
const attentionReach = 512

// weightProduct reports whether n multiplies x by weights: a matrix
// product (or convolution) whose other operand is computed from constants
// and parameters only (not from content, positions or sizes).
func weightProduct(w *work.Work, n *graph.Node, x *graph.Value) bool {
	switch n.OpType {
	case "MatMul", "Gemm", "Einsum", "FusedMatMul", "Conv", "MatMulInteger", "MatMulNBits":
	default:
		return false
	}
	for _, in := range n.Inputs() {
		if in != nil && in != x && fromWeights(w, in, 0) {
			return true
		}
	}
	return false
}

// fromWeights reports whether v is computed from constants and
// parameters given as inputs only (a weight transposed, dequantised).
func fromWeights(w *work.Work, v *graph.Value, depth int) bool {
	if v == nil || w.IsAct(v) {
		return false
	}
	if w.IsConst(v) || w.IsWeight(v) {
		return true
	}
	n := v.Producer()
	if n == nil || depth > 4 || len(n.Subgraphs()) > 0 {
		return false
	}
	switch n.OpType {
	case "Shape", "Size", "Range", "ConstantOfShape":
		return false
	}
	for _, in := range n.Inputs() {
		if in != nil && !fromWeights(w, in, depth+1) {
			return false
		}
	}
	return true
}
