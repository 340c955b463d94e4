package sinusoidal

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// sinusoidalExact reads the exact arithmetic of a computed sinusoidal
// encoding x, confirmed on its measured rows (positions sp.offset, ...).
func sinusoidalExact(w *work.Work, x *graph.Value, sp absolute.SinFit, rows [][]float64) (*probe.Angles, string) {
	a, why := probe.ExactAngles(w, []*graph.Value{x}, sp.Omega, w.ElemType(x))
	if a == nil {
		return nil, why
	}
	cos, sin := make([][]float64, len(rows)), make([][]float64, len(rows))
	for i, r := range rows {
		for _, p := range sp.Pairs {
			sin[i] = append(sin[i], r[p[0]])
			cos[i] = append(cos[i], r[p[1]])
		}
	}
	if why := a.Confirm(sp.Offset, cos, sin); why != "" {
		return nil, why
	}
	return a, ""
}
