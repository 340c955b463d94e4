package rope

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
)

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
