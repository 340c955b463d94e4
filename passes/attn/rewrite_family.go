package attn

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/work"
)

// distanceOperand is the 1-D value of distances the angles multiply by
// constant frequencies (through layout ops), or nil.
func DistanceOperand(w *work.Work, angles *graph.Value) *graph.Value {
	n := angles.Producer()
	if n == nil || len(n.Inputs()) != 2 {
		return nil
	}
	var x *graph.Value
	for _, in := range n.Inputs() {
		if !w.IsConst(in) {
			if x != nil {
				return nil
			}
			x = in
		}
	}
	for steps := 0; steps < 6 && x != nil; steps++ {
		if w.Shape(x).Rank() == 1 {
			return x
		}
		p := x.Producer()
		if p == nil || !work.LayoutOps[p.OpType] {
			return nil
		}
		x = p.Input(0)
	}
	return nil
}
