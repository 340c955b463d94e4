package shaw

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
)

func shawClipping(ids *plot.IDs, ev *Evidence, p *Params) *plot.Figure {
	if len(ev.IndexMap) == 0 {
		return nil
	}
	xs, ys := make([]float64, len(ev.IndexMap)), make([]float64, len(ev.IndexMap))
	hi := 0.0
	for i, v := range ev.IndexMap {
		xs[i], ys[i] = float64(i-ev.MaxRel), float64(v)
		hi = math.Max(hi, float64(v))
	}
	xsc := plot.Scale{Kind: plot.Linear, Min: float64(-ev.MaxRel) - 0.5, Max: float64(ev.MaxRel) + 0.5, Integer: true}
	c := &plot.Chart{Title: "Relative embedding row per relative position", XLabel: "relative position key − query", YLabel: "table row", X: xsc, Y: plot.LinScale(0, hi, true).Padded(0.04)}
	c.Series = []plot.Series{{Xs: xs, Ys: ys, Style: plot.StylePoints, Color: Color}}
	caption := fmt.Sprintf("The row of the relative embedding table the graph reads for each relative position from −%d to %d.", ev.MaxRel, ev.MaxRel)
	if ev.Stored != "" {
		c.YLabel = "embedding (equal: one number)"
		caption = fmt.Sprintf("The relative embeddings stored whole in %s, numbered by value for each relative position from −%d to %d: positions of one number read equal embeddings.", ev.Stored, ev.MaxRel, ev.MaxRel)
	}
	if p != nil {
		if p.Clipped && p.MaxRelativePosition != nil {
			m := *p.MaxRelativePosition
			c.Vlines = []plot.RefLine{{V: float64(-m), Label: fmt.Sprintf("−%d", m)}, {V: float64(m), Label: fmt.Sprintf("%d", m)}}
			if ev.Stored != "" {
				caption += fmt.Sprintf(" Distances beyond ±%d read the embeddings of ±%d.", m, m)
			} else {
				caption += fmt.Sprintf(" Distances beyond ±%d are clipped to the first and last rows.", m)
			}
		} else {
			caption += " The index did not saturate in this range."
		}
	}
	desc := fmt.Sprintf("Plot of the table row against the relative position, from %d to %d, rows 0 to %d.", -ev.MaxRel, ev.MaxRel, int(hi))
	if ev.Stored != "" {
		desc = fmt.Sprintf("Plot of the number of the stored embedding against the relative position, from %d to %d, numbers 0 to %d.", -ev.MaxRel, ev.MaxRel, int(hi))
	}
	return plot.StackFigure(ids, "shaw_clipping", "Shaw clipping", desc, caption, c)
}

// shawPlots: the clipping of the distances.
func Plots(ids *plot.IDs, fd *passes.Finding) []*plot.Figure {
	ev, ok := fd.Evidence.(*Evidence)
	if !ok {
		return nil
	}
	p, _ := fd.Params.(*Params)
	return []*plot.Figure{shawClipping(ids, ev, p)}
}
