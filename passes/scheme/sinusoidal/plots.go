package sinusoidal

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
)

func sinusoidalFrequencies(ids *plot.IDs, ev *absolute.TableEvidence, p *Params) *plot.Figure {
	n := len(ev.Omega)
	if n == 0 {
		return nil
	}
	ks := make([]float64, n)
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, v := range ev.Omega {
		ks[i] = float64(i)
		if v > 0 {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	xsc := plot.LinScale(0, float64(max(n-1, 1)), true)
	xsc.Min, xsc.Max = -0.5, float64(n)-0.5
	c := &plot.Chart{Title: "Frequency per sin/cos pair", XLabel: "pair k", YLabel: "radians per position", X: xsc}
	caption := "Frequencies read from the encoding's values (points)"
	if p.Base != nil && p.Dim > 0 {
		den := float64(p.Dim) / 2
		denName := "d/2"
		if p.FreqDenominator == "d/2-1" {
			den, denName = den-1, "d/2−1"
		}
		plain := make([]float64, n)
		for i := range plain {
			plain[i] = math.Pow(*p.Base, -float64(i)/den)
			lo, hi = math.Min(lo, plain[i]), math.Max(hi, plain[i])
		}
		c.Series = append(c.Series, plot.Series{Name: fmt.Sprintf("base %s: base^(−k/(%s))", plot.ValueLabel(*p.Base), denName), Xs: ks, Ys: plain, Style: plot.StyleDashed, Color: "#777777"})
		caption += fmt.Sprintf(" against base^(−k/(%s)) for the fitted base %s (dashed).", denName, plot.ValueLabel(*p.Base))
	} else {
		caption += "."
	}
	c.Series = append(c.Series, plot.Series{Name: "measured", Xs: ks, Ys: ev.Omega, Style: plot.StylePoints, Color: Color})
	c.Y = plot.LogScaleOf(lo, hi, 10)
	desc := fmt.Sprintf("Log-scale plot of the %d frequencies of the sinusoidal encoding, from %s to %s radians per position.", n, plot.ValueLabel(ev.Omega[0]), plot.ValueLabel(ev.Omega[n-1]))
	return plot.StackFigure(ids, "sinusoidal_frequencies", "Sinusoidal frequencies", desc, caption, c)
}

// sinusoidalPlots: the encoding per position and its frequencies.
func Plots(ids *plot.IDs, fd *passes.Finding) []*plot.Figure {
	ev, ok := fd.Evidence.(*absolute.TableEvidence)
	p, ok2 := fd.Params.(*Params)
	if !ok || !ok2 {
		return nil
	}
	return []*plot.Figure{absolute.TableHeatmap(ids, "Sinusoidal encoding", ev), sinusoidalFrequencies(ids, ev, p)}
}
