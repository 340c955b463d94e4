package absolute

import (
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// sampleRows evaluates an absolute encoding x at evidenceRows positions;
// rows0, the detection's rows, are kept when the model does not take that
// many positions or disagrees with them.
func sampleRows(w *work.Work, x *graph.Value, rows0 [][]float64) [][]float64 {
	if len(rows0) >= probe.EvidenceRows {
		return rows0
	}
	rows, _ := TableRows(w, probe.NewProbe(w, 1, probe.EvidenceRows, 0), x)
	if len(rows) < len(rows0) {
		return rows0
	}
	for i, r := range rows0 {
		if !slices.Equal(r, rows[i]) {
			return rows0
		}
	}
	return rows
}
