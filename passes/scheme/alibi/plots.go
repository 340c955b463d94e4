package alibi

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
)

func alibiSlopes(ids *plot.IDs, ev *Evidence) *plot.Figure {
	n := len(ev.Slopes)
	if n == 0 {
		return nil
	}
	hs := make([]float64, n)
	lo, hi := math.Inf(1), math.Inf(-1)
	positive := true
	for i, v := range ev.Slopes {
		hs[i] = float64(i)
		lo, hi = math.Min(lo, v), math.Max(hi, v)
		if !(v > 0) {
			positive = false
		}
	}
	xsc := plot.LinScale(0, float64(max(n-1, 1)), true)
	xsc.Min, xsc.Max = -0.5, float64(n)-0.5
	c := &plot.Chart{Title: "ALiBi slope per head", XLabel: "head", YLabel: "bias per position of distance", X: xsc}
	if positive {
		c.Y = plot.LogScaleOf(lo, hi, 2)
		c.Y.Min /= 2
	} else {
		c.Y = plot.LinScale(math.Min(0, lo), math.Max(0, hi), false).Padded(0.06)
		c.Hlines = []plot.RefLine{{V: 0}}
	}
	c.Series = []plot.Series{{Xs: hs, Ys: ev.Slopes, Style: plot.StyleLollipop, Color: Color}}
	desc := fmt.Sprintf("Slopes of the %d heads, measured from the bias the graph adds to the scores: %s.", n, plot.JoinValues(ev.Slopes))
	caption := "The slope of each head, read from the bias the graph adds to the attention scores (log scale, base 2)."
	if !positive {
		caption = "The slope of each head, read from the bias the graph adds to the attention scores."
	}
	return plot.StackFigure(ids, "alibi_slopes", "ALiBi slopes", desc, caption, c)
}

// alibiPlots: the slopes per head.
func Plots(ids *plot.IDs, fd *passes.Finding) []*plot.Figure {
	ev, ok := fd.Evidence.(*Evidence)
	if !ok {
		return nil
	}
	return []*plot.Figure{alibiSlopes(ids, ev)}
}
