package complexorder

import (
	"fmt"
	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
)

// complexorderPlots: the frequencies of the first words.
func Plots(ids *plot.IDs, fd *passes.Finding) []*plot.Figure {
	ev, ok := fd.Evidence.(*Evidence)
	if !ok {
		return nil
	}
	return []*plot.Figure{complexFrequencies(ids, ev)}
}

func complexFrequencies(ids *plot.IDs, ev *Evidence) *plot.Figure {
	if len(ev.Omega) == 0 || len(ev.Omega[0]) == 0 {
		return nil
	}
	cb := plot.SymmetricBar("frequency", ev.Omega)
	hm := &plot.Heatmap{Title: "per-word frequencies", XLabel: "dimension", YLabel: "word id", Rows: ev.Omega}
	desc := fmt.Sprintf("Heat map of the per-word frequencies of the first %d words by %d dimensions, values from %s to %s.", len(ev.Omega), len(ev.Omega[0]), plot.NumLabel(cb.Vmin), plot.NumLabel(cb.Vmax))
	caption := fmt.Sprintf("The frequencies ω(w) of the first %d words (table %s): word w at position pos turns dimension j by ω(w)_j·pos.", len(ev.Omega), ev.FreqTable)
	if len(ev.Pos) > 1 && ev.Pos[0] > ev.Pos[1] {
		caption += " Positions count down: the last token is at 0."
	}
	return plot.HeatmapFigure(ids, "complex_frequencies", "Complex-order frequencies", desc, caption, cb, hm)
}
