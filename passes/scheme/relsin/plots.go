package relsin

import (
	"fmt"
	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
	"math"
)

// Plots of the rest of the family (issue 14): the relative sinusoid
// table, DeBERTa's bucket map, M-RoPE's sections and 2-D RoPE's axes, the
// complex-order frequencies and FLOATER's states.

// relsinPlots: the relative sinusoid table and its distances.
func Plots(ids *plot.IDs, fd *passes.Finding) []*plot.Figure {
	ev, ok := fd.Evidence.(*Evidence)
	if !ok {
		return nil
	}
	p, _ := fd.Params.(*Params)
	return []*plot.Figure{relativeTable(ids, ev), relativeDistances(ids, ev, p)}
}

func relativeTable(ids *plot.IDs, ev *Evidence) *plot.Figure {
	if len(ev.Sample) == 0 || len(ev.Sample[0]) == 0 {
		return nil
	}
	cb := plot.SymmetricBar("value", ev.Sample)
	hm := &plot.Heatmap{Title: "relative sinusoid", XLabel: "column (sin | cos of each frequency)", YLabel: "table row", Rows: ev.Sample}
	desc := fmt.Sprintf("Heat map of the sinusoid of relative distances the position scores project, %d rows by %d columns at query and key length %d, values from %s to %s.",
		len(ev.Sample), len(ev.Sample[0]), ev.S, plot.NumLabel(cb.Vmin), plot.NumLabel(cb.Vmax))
	caption := fmt.Sprintf("The relative sinusoid table (%s) the graph computes for queries and keys %d long: one row per relative distance (the next plot gives each row's distance), sin and cos of distance·frequency in its columns.", ev.Table, ev.S)
	if ev.Stored != "" {
		caption = fmt.Sprintf("The relative sinusoid table (%s) the graph stores for its %d keys: one row per relative distance (the next plot gives each row's distance, read from the row), sin and cos of distance·frequency in its columns.", ev.Stored, ev.S)
	}
	return plot.HeatmapFigure(ids, "relative_table", "Relative sinusoid table", desc, caption, cb, hm)
}

func relativeDistances(ids *plot.IDs, ev *Evidence, p *Params) *plot.Figure {
	if len(ev.Distances) == 0 {
		return nil
	}
	xs, ys := make([]float64, len(ev.Distances)), make([]float64, len(ev.Distances))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, d := range ev.Distances {
		xs[i], ys[i] = float64(i), d
		lo, hi = math.Min(lo, d), math.Max(hi, d)
	}
	c := &plot.Chart{Title: "Relative distance of every table row", XLabel: "table row", YLabel: "distance",
		X: plot.LinScale(0, float64(len(xs)-1), true).Padded(0.02), Y: plot.LinScale(lo, hi, true).Padded(0.04)}
	c.Series = []plot.Series{{Xs: xs, Ys: ys, Style: plot.StylePoints, Color: Color}}
	caption := fmt.Sprintf("The distance each row of the sinusoid encodes, for queries and keys %d long.", ev.S)
	if p != nil {
		switch p.Variant {
		case "transfo_xl":
			caption += " Transformer-XL's klen−1 down to 0."
		case "xlnet":
			caption += " XLNet's klen down to −qlen+1."
		}
		if p.ClampLen != nil {
			c.Hlines = []plot.RefLine{{V: float64(*p.ClampLen), Label: fmt.Sprintf("clamp_len %d", *p.ClampLen)}}
			caption += fmt.Sprintf(" Distances beyond %d are clamped.", *p.ClampLen)
		}
	}
	desc := fmt.Sprintf("Plot of the relative distance against the table row, %d rows, distances from %d to %d.", len(xs), int(lo), int(hi))
	return plot.StackFigure(ids, "relative_distances", "Relative distances", desc, caption, c)
}
