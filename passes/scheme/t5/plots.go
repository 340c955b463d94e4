package t5

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
)

func t5BucketMap(ids *plot.IDs, ev *Evidence, p *Params) *plot.Figure {
	if len(ev.BucketMap) == 0 {
		return nil
	}
	xs, ys := make([]float64, len(ev.BucketMap)), make([]float64, len(ev.BucketMap))
	hi := 0.0
	for i, b := range ev.BucketMap {
		xs[i], ys[i] = float64(i-ev.MaxRel), float64(b)
		hi = math.Max(hi, float64(b))
	}
	c := &plot.Chart{Title: "T5 bucket per relative position", XLabel: "relative position key − query (symmetric log scale)", YLabel: "bucket", X: plot.RelAxis(ev.MaxRel),
		Y: plot.Scale{Kind: plot.Linear, Min: -1, Max: hi + 1, Integer: true}}
	c.Series = []plot.Series{{Xs: xs, Ys: ys, Style: plot.StyleStep, Color: Color}}
	caption := fmt.Sprintf("The bucket index the graph computes for every relative position from −%d to %d.", ev.MaxRel, ev.MaxRel)
	if ev.Stored != "" {
		caption = fmt.Sprintf("The bucket of every relative position from −%d to %d under the one setting that groups them as the stored bias %s does.", ev.MaxRel, ev.MaxRel, ev.Stored)
	}
	if p != nil && p.MaxDistance != nil {
		md := float64(*p.MaxDistance)
		c.Vlines = append(c.Vlines, plot.RefLine{V: md, Label: fmt.Sprintf("max_distance %d", *p.MaxDistance)})
		if p.Bidirectional != nil && *p.Bidirectional {
			c.Vlines = append(c.Vlines, plot.RefLine{V: -md})
		} else {
			c.Vlines[0].V = -md
		}
		caption += " Beyond max_distance every distance shares the last bucket."
	}
	desc := fmt.Sprintf("Step plot of the T5 bucket index against the relative position key minus query, from %d to %d, buckets 0 to %d.", -ev.MaxRel, ev.MaxRel, int(hi))
	return plot.StackFigure(ids, "t5_bucket_map", "T5 bucket map", desc, caption, c)
}

func t5BiasPerHead(ids *plot.IDs, ev *Evidence) *plot.Figure {
	if len(ev.BucketMap) == 0 || len(ev.Weights) == 0 {
		return nil
	}
	heads := len(ev.Weights[0])
	shown := min(heads, plot.MaxHeadLines)
	lo, hi := math.Inf(1), math.Inf(-1)
	var charts []*plot.Chart
	for h := 0; h < shown; h++ {
		xs, ys := make([]float64, len(ev.BucketMap)), make([]float64, len(ev.BucketMap))
		for i, b := range ev.BucketMap {
			xs[i] = float64(i - ev.MaxRel)
			ys[i] = math.NaN()
			if b >= 0 && b < len(ev.Weights) {
				ys[i] = ev.Weights[b][h]
				lo, hi = math.Min(lo, ys[i]), math.Max(hi, ys[i])
			}
		}
		// One panel per head, on a shared x axis and y range.
		c := &plot.Chart{YLabel: fmt.Sprintf("head %d", h), X: plot.RelAxis(ev.MaxRel), Ph: 62, Bare: h < shown-1,
			Series: []plot.Series{{Xs: xs, Ys: ys, Style: plot.StyleStep, Color: plot.SeriesColors[h%len(plot.SeriesColors)]}}}
		c.Hlines = []plot.RefLine{{V: 0}}
		if h == 0 {
			c.Title = "T5 bias per relative position, one panel per head"
		}
		if h == shown-1 {
			c.XLabel = "relative position key − query (symmetric log scale)"
		}
		charts = append(charts, c)
	}
	ysc := plot.LinScale(lo, hi, false)
	for _, c := range charts {
		c.Y = ysc
	}
	caption := "The bias each head adds to the scores for each relative position (the bias table's value at the position's bucket), on one y range."
	if shown < heads {
		caption += fmt.Sprintf(" The first %d of %d heads; the table below shows all.", shown, heads)
	}
	desc := fmt.Sprintf("Step plots of the T5 bias of %d heads against the relative position, from %s to %s.", shown, plot.ValueLabel(lo), plot.ValueLabel(hi))
	return plot.StackFigure(ids, "t5_bias", "T5 bias per head", desc, caption, charts...)
}

func t5Table(ids *plot.IDs, ev *Evidence) *plot.Figure {
	if len(ev.Weights) == 0 || len(ev.Weights[0]) == 0 {
		return nil
	}
	nb, heads := len(ev.Weights), len(ev.Weights[0])
	rows := make([][]float64, heads)
	for h := range rows {
		rows[h] = make([]float64, nb)
		for b := range rows[h] {
			rows[h][b] = ev.Weights[b][h]
		}
	}
	cb := plot.SymmetricBar("bias", rows)
	hm := &plot.Heatmap{Title: "T5 bias table", XLabel: "bucket", YLabel: "head", Rows: rows}
	desc := fmt.Sprintf("Heat map of the T5 relative-attention bias table, %d heads by %d buckets, values from %s to %s.", heads, nb, plot.NumLabel(cb.Vmin), plot.NumLabel(cb.Vmax))
	caption := fmt.Sprintf("The stored bias table %s: one row per head, one column per bucket.", ev.Table)
	return plot.HeatmapFigure(ids, "t5_table", "T5 bias table", desc, caption, cb, hm)
}

// t5Plots: the bucket map, the bias per head and the learned table.
func Plots(ids *plot.IDs, fd *passes.Finding) []*plot.Figure {
	ev, ok := fd.Evidence.(*Evidence)
	if !ok {
		return nil
	}
	p, _ := fd.Params.(*Params)
	return []*plot.Figure{t5BucketMap(ids, ev, p), t5BiasPerHead(ids, ev), t5Table(ids, ev)}
}
