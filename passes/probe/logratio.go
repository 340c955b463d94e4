package probe

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/work"
	"math"
)

// logRatio finds the scalar float constant of the cone that is want
// (within float32 rounding).
func LogRatio(w *work.Work, cone []*graph.Node, want float64) (float64, string) {
	for _, n := range cone {
		for _, in := range n.Inputs() {
			if in == nil || !w.IsConst(in) || !work.IsFloatType(w.ElemType(in)) {
				continue
			}
			if t := w.Const(in); t != nil && t.Len() == 1 {
				if v := t.Float64s()[0]; math.Abs(v-want) <= 1e-6*want {
					return v, w.Name(in)
				}
			}
		}
	}
	return 0, ""
}
