package sinusoidal

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/work"
)

// paddingRow finds the row of a stored sinusoidal table that is zero where
// the sinusoid is not (fairseq zeroes the row of padding_idx).
func paddingRow(w *work.Work, tv *graph.Value, axis int) (int, bool) {
	t, ok := absolute.ViewTable(w, tv, axis)
	if !ok {
		return 0, false
	}
	buf := make([]float64, t.Width())
	pad := -1
	for r := 0; r < t.N; r++ {
		row := t.Row(r, buf)
		zero := true
		for _, x := range row {
			if x != 0 {
				zero = false
			}
		}
		if zero && r > 0 {
			if pad >= 0 {
				return 0, false
			}
			pad = r
		}
	}
	return pad, pad >= 0
}
