package rope

import (
	"fmt"
	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
	"math"
	"strings"
)

func cosSinPlot(ids *plot.IDs, ev *Evidence, p *Params) *plot.Figure {
	if len(ev.Cos) == 0 || len(ev.Cos[0]) == 0 || ev.Synthetic {
		return nil
	}
	ylabel, row0 := "position", ev.Start
	if ev.Start < 0 {
		ylabel, row0 = "probe row", 0
	}
	cb := plot.SymmetricBar("value", ev.Cos, ev.Sin)
	cos := &plot.Heatmap{Title: "cos", XLabel: "rotary pair (frequency order)", YLabel: ylabel, Rows: ev.Cos, Row0: row0}
	sin := &plot.Heatmap{Title: "sin", XLabel: "rotary pair (frequency order)", YLabel: ylabel, Rows: ev.Sin, Row0: row0}
	first, last := row0, row0+len(ev.Cos)-1
	desc := fmt.Sprintf("Heat maps of the cos and sin that the rotation applies to each of %d rotary pairs at %s %d to %d, measured by evaluating the graph; values from %s to %s.",
		len(ev.Pairs), ylabel, first, last, plot.NumLabel(cb.Vmin), plot.NumLabel(cb.Vmax))
	caption := fmt.Sprintf("The cos and sin the model applies at %ss %d–%d, as onnxpe's kernels evaluated the graph (one column per rotary pair, fastest frequency first).", ylabel, first, last)
	if math.Abs(ev.Amplitude-1) > 1e-5 {
		caption += fmt.Sprintf(" They are scaled by %s (the attention factor).", plot.ValueLabel(ev.Amplitude))
	}
	if p != nil && p.RotaryDim > 0 && p.RotaryDim < p.HeadDim {
		caption += fmt.Sprintf(" Only %d of the head's %d dimensions are rotated; the others pass unchanged.", p.RotaryDim, p.HeadDim)
	}
	return plot.HeatmapFigure(ids, "rope_cos_sin", "RoPE cos and sin per position", desc, caption, cb, cos, sin)
}

// ropeFrequencies plots the measured frequencies against those of the
// plain base, and their ratio (the scaling rule's factor per frequency).
func frequencyPlot(ids *plot.IDs, ev *Evidence, p *Params) *plot.Figure {
	if len(ev.InvFreq) == 0 || ev.Synthetic || p != nil && p.Axes == 2 {
		return nil // 2-D RoPE: each axis has a base of its own (rope_axes)
	}
	n := len(ev.InvFreq)
	ks := make([]float64, n)
	for i := range ks {
		ks[i] = float64(i)
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	span := func(vs []float64) {
		for _, v := range vs {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	span(ev.InvFreq)
	span(ev.InvFreqLong)
	var plain []float64
	var base float64
	if p != nil && p.Base != nil && p.RotaryDim > 0 {
		base = *p.Base
		plain = make([]float64, n)
		for i := range plain {
			plain[i] = math.Pow(base, -2*float64(i)/float64(p.RotaryDim))
		}
		span(plain)
	}
	xsc := plot.LinScale(0, float64(max(n-1, 1)), true)
	xsc.Min, xsc.Max = -0.5, float64(n)-0.5
	measured := "measured"
	if ev.InvFreqLong != nil {
		measured = "measured, up to the original length"
	}
	top := &plot.Chart{
		Title: "Frequency per rotary pair", XLabel: "rotary pair k", YLabel: "radians per position",
		X: xsc, Y: plot.LogScaleOf(lo, hi, 10),
	}
	if plain != nil {
		top.Series = append(top.Series, plot.Series{Name: fmt.Sprintf("plain base %s: base^(−2k/%d)", plot.ValueLabel(base), p.RotaryDim), Xs: ks, Ys: plain, Style: plot.StyleDashed, Color: "#777777"})
	}
	top.Series = append(top.Series, plot.Series{Name: measured, Xs: ks, Ys: ev.InvFreq, Style: plot.StylePoints, Color: plot.SeriesColors[0]})
	if ev.InvFreqLong != nil {
		top.Series = append(top.Series, plot.Series{Name: "measured, beyond the original length", Xs: ks, Ys: ev.InvFreqLong, Style: plot.StylePoints, Color: plot.SeriesColors[1], Marker: "diamond"})
	}
	charts := []*plot.Chart{top}
	desc := fmt.Sprintf("Log-scale plot of the %d measured RoPE frequencies, from %s to %s radians per position", n, plot.ValueLabel(ev.InvFreq[0]), plot.ValueLabel(ev.InvFreq[n-1]))
	caption := "Frequencies read from the angles the graph computes (points)"
	if plain != nil {
		ratio := func(m []float64) []float64 {
			out := make([]float64, n)
			for i := range out {
				out[i] = plain[i] / m[i]
			}
			return out
		}
		r := ratio(ev.InvFreq)
		rlo, rhi := math.Inf(1), math.Inf(-1)
		for _, v := range r {
			rlo, rhi = math.Min(rlo, v), math.Max(rhi, v)
		}
		bottom := &plot.Chart{
			Title: "Scaling per rotary pair", XLabel: "rotary pair k", YLabel: "plain ÷ measured",
			X: xsc,
		}
		bottom.Series = append(bottom.Series, plot.Series{Name: strings.TrimPrefix(measured, "measured, "), Xs: ks, Ys: r, Style: plot.StylePoints, Color: plot.SeriesColors[0]})
		if ev.InvFreqLong != nil {
			rl := ratio(ev.InvFreqLong)
			for _, v := range rl {
				rlo, rhi = math.Min(rlo, v), math.Max(rhi, v)
			}
			bottom.Series = append(bottom.Series, plot.Series{Name: "beyond the original length", Xs: ks, Ys: rl, Style: plot.StylePoints, Color: plot.SeriesColors[1], Marker: "diamond"})
		} else {
			bottom.Series[0].Name = ""
		}
		bottom.Hlines = append(bottom.Hlines, plot.RefLine{V: 1, Label: "1 (unscaled)"})
		if p.Factor != nil && *p.Factor != 1 && *p.Factor > 0 {
			bottom.Hlines = append(bottom.Hlines, plot.RefLine{V: *p.Factor, Label: "factor " + plot.ValueLabel(*p.Factor)})
			rlo, rhi = math.Min(rlo, *p.Factor), math.Max(rhi, *p.Factor)
		}
		if rhi/rlo < 1.5 {
			rlo, rhi = rlo/1.5, rhi*1.5
		}
		bottom.Y = plot.LogScaleOf(rlo, rhi, 2)
		charts = append(charts, bottom)
		desc += fmt.Sprintf("; the plain-base curve of base %s; and the ratio plain ÷ measured per pair, from %s to %s.", plot.ValueLabel(base), plot.ValueLabel(rlo), plot.ValueLabel(rhi))
		caption += fmt.Sprintf(" against the frequencies of the plain base %s (dashed); below, their ratio per pair: 1 where a frequency is kept, the factor where it is divided.", plot.ValueLabel(base))
		if p.Scaling != nil {
			caption += " Scaling rule: " + *p.Scaling + "."
		}
	} else {
		desc += "."
		caption += "; no base fits them, so there is no plain-base curve."
	}
	return plot.StackFigure(ids, "rope_frequencies", "RoPE frequencies", desc, caption, charts...)
}

// ropePlots are the plots of a RoPE finding: its cos and sin, its
// frequencies against the base's, and the split of its pairs between
// streams or axes (M-RoPE, 2-D RoPE).
func Plots(ids *plot.IDs, fd *passes.Finding) []*plot.Figure {
	ev, ok := fd.Evidence.(*Evidence)
	if !ok {
		return nil
	}
	p, _ := fd.Params.(*Params)
	return []*plot.Figure{cosSinPlot(ids, ev, p), frequencyPlot(ids, ev, p), splitPlot(ids, ev, p)}
}

// ropeSplit plots the frequency of every rotary pair coloured by the
// position stream (M-RoPE) or grid axis (2-D RoPE) turning it.
func splitPlot(ids *plot.IDs, ev *Evidence, p *Params) *plot.Figure {
	if p == nil || len(ev.InvFreq) == 0 || ev.Synthetic {
		return nil
	}
	var owner []int
	var names []string
	kind, title, what := "", "", ""
	switch {
	case p.MultimodalSections != nil:
		for st, n := range p.MultimodalSections {
			for k := 0; k < n; k++ {
				owner = append(owner, st)
			}
		}
		names = []string{"temporal", "height", "width"}
		kind, title, what = "rope_sections", "M-RoPE sections", "position stream"
	case p.Axes == 2 && len(ev.PairAxis) == len(ev.InvFreq):
		owner = ev.PairAxis
		names = []string{"column", "row"}
		kind, title, what = "rope_axes", "2-D RoPE axes", "grid axis"
	default:
		return nil
	}
	if len(owner) != len(ev.InvFreq) {
		return nil
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, w := range ev.InvFreq {
		lo, hi = math.Min(lo, w), math.Max(hi, w)
	}
	c := &plot.Chart{Title: "Frequency of every rotary pair, by the " + what + " turning it", XLabel: "rotary pair", YLabel: "radians per position (log scale)",
		X: plot.LinScale(0, float64(len(owner)-1), true).Padded(0.04), Y: plot.LogScaleOf(lo, hi, 10)}
	groups := map[int]*plot.Series{}
	var order []int
	for k, o := range owner {
		sr, ok := groups[o]
		if !ok {
			name := fmt.Sprint(o)
			if o < len(names) {
				name = names[o]
			}
			sr = &plot.Series{Name: name, Style: plot.StylePoints, Color: plot.SeriesColors[o%len(plot.SeriesColors)]}
			groups[o] = sr
			order = append(order, o)
		}
		sr.Xs = append(sr.Xs, float64(k))
		sr.Ys = append(sr.Ys, ev.InvFreq[k])
	}
	for _, o := range order {
		c.Series = append(c.Series, *groups[o])
	}
	caption := fmt.Sprintf("The measured frequency of each of the %d rotary pairs, coloured by the %s whose position turns it.", len(owner), what)
	if p.MultimodalSections != nil {
		caption += fmt.Sprintf(" Sections %v: each stream of the [%d, batch, sequence] position ids turns its own run of frequencies.", p.MultimodalSections, len(p.MultimodalSections))
	} else if len(p.Grid) == 2 {
		caption += fmt.Sprintf(" A %d×%d patch grid: token t (after %d unrotated) is at row t / %d, column t mod %d.", p.Grid[0], p.Grid[1], ev.GridOffset, p.Grid[1], p.Grid[1])
	} else if p.Axes == 2 {
		caption += fmt.Sprintf(" The patch grid follows the image's size: token t (after %d unrotated) is at row t / cols, column t mod cols.", ev.GridOffset)
	}
	desc := fmt.Sprintf("Scatter plot of %d rotary pair frequencies on a log scale, from %s to %s, in %d groups.", len(owner), plot.ValueLabel(lo), plot.ValueLabel(hi), len(order))
	return plot.StackFigure(ids, kind, title, desc, caption, c)
}
