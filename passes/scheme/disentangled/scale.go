package disentangled

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/work"
)

// scaledRoot follows v back through layout ops and multiplications or
// divisions by a scalar constant to the value they start from, and returns
// it with the constant v is that value divided by. A key divided by
// sqrt(d·s) before its product with q (DeBERTa-v2) is still the key the
// p2c term multiplies.
func scaledRoot(w *work.Work, v *graph.Value) (*graph.Value, float64) {
	div := 1.0
	for steps := 0; steps < 24 && v != nil; steps++ {
		v = attn.OpRoot(w, v)
		n := v.Producer()
		if n == nil || !work.IsONNX(n) || n.OpType != "Mul" && n.OpType != "Div" {
			return v, div
		}
		x, c, ok := scalarOperand(w, n)
		if !ok || n.OpType == "Div" && x != 0 || c == 0 {
			return v, div
		}
		if n.OpType == "Div" {
			div *= c
		} else {
			div /= c
		}
		v = n.Input(x)
	}
	return v, div
}

// scalarOperand is the index of the one non-constant input of a two-input
// node and the value of its other input, a scalar constant (false when n
// is not so).
func scalarOperand(w *work.Work, n *graph.Node) (int, float64, bool) {
	if len(n.Inputs()) != 2 {
		return 0, 0, false
	}
	for i := range 2 {
		k := w.Const(n.Input(1 - i))
		if k != nil && k.Len() == 1 && !w.IsConst(n.Input(i)) {
			return i, k.Float64s()[0], true
		}
	}
	return 0, 0, false
}

// qkDivisor is the constant q·kᵀ is divided by on its way to the
// Softmax: the scales of q and k before their product and those of the
// score path after it. False when no one constant does (a scale that is
// not a constant, a path that splits).
func qkDivisor(w *work.Work, b *attn.Block) (float64, bool) {
	_, dq := scaledRoot(w, b.QK.Input(0))
	_, dk := scaledRoot(w, b.QK.Input(1))
	f, ok := forwardDivisor(w, b, b.QK.Output(0))
	return dq * dk * f, ok
}

// termDivisor is the constant a position term is divided by on its way to
// the Softmax: the scales of its content and position operands, those on
// its own path to the scores, and those of the score path after it joins.
func termDivisor(w *work.Work, b *attn.Block, t *attn.ScoreTerm) (float64, bool) {
	if len(t.Path) == 0 {
		return 0, false
	}
	_, dc := scaledRoot(w, t.Content)
	_, dp := scaledRoot(w, t.Pos)
	f, ok := forwardDivisor(w, b, t.Path[0].Output(0))
	return dc * dp * t.Scale * f, ok
}

// forwardDivisor follows v forward along the block's score path to the
// Softmax and returns the product of the scalar constants it is divided
// by (multiplications count as divisions by the inverse).
func forwardDivisor(w *work.Work, b *attn.Block, v *graph.Value) (float64, bool) {
	on := map[*graph.Node]bool{}
	for _, n := range b.ScorePath {
		on[n] = true
	}
	div := 1.0
	for steps := 0; steps < 64; steps++ {
		var next *graph.Node
		for _, u := range v.Uses() {
			switch {
			case u.Node == b.Softmax:
				return div, true
			case !on[u.Node]:
			case next != nil && next != u.Node:
				return 0, false
			default:
				next = u.Node
			}
		}
		if next == nil {
			return 0, false
		}
		if next.OpType == "Mul" || next.OpType == "Div" {
			if x, c, ok := scalarOperand(w, next); ok && next.Input(x) == v && c != 0 {
				if next.OpType == "Div" && x != 0 {
					return 0, false // c / scores
				}
				if next.OpType == "Div" {
					div *= c
				} else {
					div /= c
				}
			}
		}
		v = next.Output(0)
	}
	return 0, false
}
