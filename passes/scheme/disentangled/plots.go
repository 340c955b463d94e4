package disentangled

import (
	"fmt"
	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
	"math"
)

// disentangledPlots: the relative position of every q - k.
func Plots(ids *plot.IDs, fd *passes.Finding) []*plot.Figure {
	ev, ok := fd.Evidence.(*Evidence)
	if !ok {
		return nil
	}
	p, _ := fd.Params.(*Params)
	return []*plot.Figure{disentangledBuckets(ids, ev, p)}
}

func disentangledBuckets(ids *plot.IDs, ev *Evidence, p *Params) *plot.Figure {
	if len(ev.Buckets) == 0 {
		return nil
	}
	xs, ys := make([]float64, len(ev.Buckets)), make([]float64, len(ev.Buckets))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, b := range ev.Buckets {
		xs[i], ys[i] = float64(i-ev.MaxDist), float64(b)
		lo, hi = math.Min(lo, ys[i]), math.Max(hi, ys[i])
	}
	c := &plot.Chart{Title: "Relative position per distance q − k", XLabel: "distance query − key (symmetric log scale)", YLabel: "relative position", X: plot.RelAxis(ev.MaxDist),
		Y: plot.LinScale(lo, hi, true).Padded(0.04)}
	c.Series = []plot.Series{{Xs: xs, Ys: ys, Style: plot.StyleStep, Color: Color}}
	c.Hlines = []plot.RefLine{{V: float64(ev.Span - 1), Label: fmt.Sprintf("table edge ±%d", ev.Span)}, {V: float64(-ev.Span)}}
	caption := fmt.Sprintf("The relative position the graph computes for every distance from −%d to %d, before its clamp to the %d rows of the position table.", ev.MaxDist, ev.MaxDist, 2*ev.Span)
	if p != nil && p.PositionBuckets != nil && p.MaxRelativePositions != nil {
		mid := *p.PositionBuckets / 2
		c.Vlines = []plot.RefLine{{V: float64(mid), Label: fmt.Sprintf("exact up to %d", mid)}, {V: float64(-mid)},
			{V: float64(*p.MaxRelativePositions), Label: fmt.Sprintf("max_relative_positions %d", *p.MaxRelativePositions)}}
		caption += fmt.Sprintf(" Exact within ±%d, then logarithmic buckets reaching the table's edge at max_relative_positions %d.", mid, *p.MaxRelativePositions)
	} else if p != nil && p.MaxRelativePositions != nil {
		caption += fmt.Sprintf(" Not bucketed: clamped at ±%d.", *p.MaxRelativePositions)
	}
	desc := fmt.Sprintf("Step plot of DeBERTa's relative position against the distance query minus key, from %d to %d, values %d to %d.", -ev.MaxDist, ev.MaxDist, int(lo), int(hi))
	return plot.StackFigure(ids, "disentangled_buckets", "Disentangled attention bucket map", desc, caption, c)
}
