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
