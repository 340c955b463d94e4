package probe

import (
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/work"
)

// evidenceRows is how many consecutive positions a finding's evidence
// samples (the encoding as the model computes it, for reports' plots):
// more than the detection's probes need, few enough to stay cheap.
const EvidenceRows = 64

// tableValues reads a constant [rows, cols] table.
func TableValues(w *work.Work, v *graph.Value) [][]float64 {
	t := w.Const(v)
	if t == nil || t.Rank() != 2 {
		return nil
	}
	vals := t.Float64s()
	rows, cols := t.Shape[0], t.Shape[1]
	out := make([][]float64, rows)
	for i := range out {
		out[i] = slices.Clone(vals[i*cols : (i+1)*cols])
	}
	return out
}
