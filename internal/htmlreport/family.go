package htmlreport

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/scheme/complexorder"
	"github.com/onnxpe/onnxpe/passes/scheme/disentangled"
	"github.com/onnxpe/onnxpe/passes/scheme/floater"
	"github.com/onnxpe/onnxpe/passes/scheme/relsin"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
)

// Plots of the rest of the family (issue 14): the relative sinusoid
// table, DeBERTa's bucket map, M-RoPE's sections and 2-D RoPE's axes, the
// complex-order frequencies and FLOATER's states.

// relsinPlots: the relative sinusoid table and its distances.
func relsinPlots(ids *idGen, fd *passes.Finding) []*figure {
	ev, ok := fd.Evidence.(*relsin.Evidence)
	if !ok {
		return nil
	}
	p, _ := fd.Params.(*relsin.Params)
	return []*figure{relativeTable(ids, ev), relativeDistances(ids, ev, p)}
}

// disentangledPlots: the relative position of every q - k.
func disentangledPlots(ids *idGen, fd *passes.Finding) []*figure {
	ev, ok := fd.Evidence.(*disentangled.Evidence)
	if !ok {
		return nil
	}
	p, _ := fd.Params.(*disentangled.Params)
	return []*figure{disentangledBuckets(ids, ev, p)}
}

// complexorderPlots: the frequencies of the first words.
func complexorderPlots(ids *idGen, fd *passes.Finding) []*figure {
	ev, ok := fd.Evidence.(*complexorder.Evidence)
	if !ok {
		return nil
	}
	return []*figure{complexFrequencies(ids, ev)}
}

// floaterPlots: the states of the integration.
func floaterPlots(ids *idGen, fd *passes.Finding) []*figure {
	ev, ok := fd.Evidence.(*floater.Evidence)
	if !ok {
		return nil
	}
	p, _ := fd.Params.(*floater.Params)
	return []*figure{floaterStates(ids, ev, p)}
}

func relativeTable(ids *idGen, ev *relsin.Evidence) *figure {
	if len(ev.Sample) == 0 || len(ev.Sample[0]) == 0 {
		return nil
	}
	cb := symmetricBar("value", ev.Sample)
	hm := &heatmap{title: "relative sinusoid", xLabel: "column (sin | cos of each frequency)", yLabel: "table row", rows: ev.Sample}
	desc := fmt.Sprintf("Heat map of the sinusoid of relative distances the position scores project, %d rows by %d columns at query and key length %d, values from %s to %s.",
		len(ev.Sample), len(ev.Sample[0]), ev.S, numLabel(cb.vmin), numLabel(cb.vmax))
	caption := fmt.Sprintf("The relative sinusoid table (%s) the graph computes for queries and keys %d long: one row per relative distance (the next plot gives each row's distance), sin and cos of distance·frequency in its columns.", ev.Table, ev.S)
	return heatmapFigure(ids, "relative_table", "Relative sinusoid table", desc, caption, cb, hm)
}

func relativeDistances(ids *idGen, ev *relsin.Evidence, p *relsin.Params) *figure {
	if len(ev.Distances) == 0 {
		return nil
	}
	xs, ys := make([]float64, len(ev.Distances)), make([]float64, len(ev.Distances))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, d := range ev.Distances {
		xs[i], ys[i] = float64(i), d
		lo, hi = math.Min(lo, d), math.Max(hi, d)
	}
	c := &chart{title: "Relative distance of every table row", xLabel: "table row", yLabel: "distance",
		x: linScale(0, float64(len(xs)-1), true).padded(0.02), y: linScale(lo, hi, true).padded(0.04)}
	c.series = []series{{xs: xs, ys: ys, style: stylePoints, color: relsin.Color}}
	caption := fmt.Sprintf("The distance each row of the sinusoid encodes, for queries and keys %d long.", ev.S)
	if p != nil {
		switch p.Variant {
		case "transfo_xl":
			caption += " Transformer-XL's klen−1 down to 0."
		case "xlnet":
			caption += " XLNet's klen down to −qlen+1."
		}
		if p.ClampLen != nil {
			c.hlines = []refLine{{v: float64(*p.ClampLen), label: fmt.Sprintf("clamp_len %d", *p.ClampLen)}}
			caption += fmt.Sprintf(" Distances beyond %d are clamped.", *p.ClampLen)
		}
	}
	desc := fmt.Sprintf("Plot of the relative distance against the table row, %d rows, distances from %d to %d.", len(xs), int(lo), int(hi))
	return stackFigure(ids, "relative_distances", "Relative distances", desc, caption, c)
}

func disentangledBuckets(ids *idGen, ev *disentangled.Evidence, p *disentangled.Params) *figure {
	if len(ev.Buckets) == 0 {
		return nil
	}
	xs, ys := make([]float64, len(ev.Buckets)), make([]float64, len(ev.Buckets))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, b := range ev.Buckets {
		xs[i], ys[i] = float64(i-ev.MaxDist), float64(b)
		lo, hi = math.Min(lo, ys[i]), math.Max(hi, ys[i])
	}
	c := &chart{title: "Relative position per distance q − k", xLabel: "distance query − key (symmetric log scale)", yLabel: "relative position", x: relAxis(ev.MaxDist),
		y: linScale(lo, hi, true).padded(0.04)}
	c.series = []series{{xs: xs, ys: ys, style: styleStep, color: disentangled.Color}}
	c.hlines = []refLine{{v: float64(ev.Span - 1), label: fmt.Sprintf("table edge ±%d", ev.Span)}, {v: float64(-ev.Span)}}
	caption := fmt.Sprintf("The relative position the graph computes for every distance from −%d to %d, before its clamp to the %d rows of the position table.", ev.MaxDist, ev.MaxDist, 2*ev.Span)
	if p != nil && p.PositionBuckets != nil && p.MaxRelativePositions != nil {
		mid := *p.PositionBuckets / 2
		c.vlines = []refLine{{v: float64(mid), label: fmt.Sprintf("exact up to %d", mid)}, {v: float64(-mid)},
			{v: float64(*p.MaxRelativePositions), label: fmt.Sprintf("max_relative_positions %d", *p.MaxRelativePositions)}}
		caption += fmt.Sprintf(" Exact within ±%d, then logarithmic buckets reaching the table's edge at max_relative_positions %d.", mid, *p.MaxRelativePositions)
	} else if p != nil && p.MaxRelativePositions != nil {
		caption += fmt.Sprintf(" Not bucketed: clamped at ±%d.", *p.MaxRelativePositions)
	}
	desc := fmt.Sprintf("Step plot of DeBERTa's relative position against the distance query minus key, from %d to %d, values %d to %d.", -ev.MaxDist, ev.MaxDist, int(lo), int(hi))
	return stackFigure(ids, "disentangled_buckets", "Disentangled attention bucket map", desc, caption, c)
}

// ropeSplit plots the frequency of every rotary pair coloured by the
// position stream (M-RoPE) or grid axis (2-D RoPE) turning it.
func ropeSplit(ids *idGen, ev *rope.Evidence, p *rope.Params) *figure {
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
	c := &chart{title: "Frequency of every rotary pair, by the " + what + " turning it", xLabel: "rotary pair", yLabel: "radians per position (log scale)",
		x: linScale(0, float64(len(owner)-1), true).padded(0.04), y: logScaleOf(lo, hi, 10)}
	groups := map[int]*series{}
	var order []int
	for k, o := range owner {
		sr, ok := groups[o]
		if !ok {
			name := fmt.Sprint(o)
			if o < len(names) {
				name = names[o]
			}
			sr = &series{name: name, style: stylePoints, color: seriesColors[o%len(seriesColors)]}
			groups[o] = sr
			order = append(order, o)
		}
		sr.xs = append(sr.xs, float64(k))
		sr.ys = append(sr.ys, ev.InvFreq[k])
	}
	for _, o := range order {
		c.series = append(c.series, *groups[o])
	}
	caption := fmt.Sprintf("The measured frequency of each of the %d rotary pairs, coloured by the %s whose position turns it.", len(owner), what)
	if p.MultimodalSections != nil {
		caption += fmt.Sprintf(" Sections %v: each stream of the [%d, batch, sequence] position ids turns its own run of frequencies.", p.MultimodalSections, len(p.MultimodalSections))
	} else if len(p.Grid) == 2 {
		caption += fmt.Sprintf(" A %d×%d patch grid: token t (after %d unrotated) is at row t / %d, column t mod %d.", p.Grid[0], p.Grid[1], ev.GridOffset, p.Grid[1], p.Grid[1])
	} else if p.Axes == 2 {
		caption += fmt.Sprintf(" The patch grid follows the image's size: token t (after %d unrotated) is at row t / cols, column t mod cols.", ev.GridOffset)
	}
	desc := fmt.Sprintf("Scatter plot of %d rotary pair frequencies on a log scale, from %s to %s, in %d groups.", len(owner), valueLabel(lo), valueLabel(hi), len(order))
	return stackFigure(ids, kind, title, desc, caption, c)
}

func complexFrequencies(ids *idGen, ev *complexorder.Evidence) *figure {
	if len(ev.Omega) == 0 || len(ev.Omega[0]) == 0 {
		return nil
	}
	cb := symmetricBar("frequency", ev.Omega)
	hm := &heatmap{title: "per-word frequencies", xLabel: "dimension", yLabel: "word id", rows: ev.Omega}
	desc := fmt.Sprintf("Heat map of the per-word frequencies of the first %d words by %d dimensions, values from %s to %s.", len(ev.Omega), len(ev.Omega[0]), numLabel(cb.vmin), numLabel(cb.vmax))
	caption := fmt.Sprintf("The frequencies ω(w) of the first %d words (table %s): word w at position pos turns dimension j by ω(w)_j·pos.", len(ev.Omega), ev.FreqTable)
	if len(ev.Pos) > 1 && ev.Pos[0] > ev.Pos[1] {
		caption += " Positions count down: the last token is at 0."
	}
	return heatmapFigure(ids, "complex_frequencies", "Complex-order frequencies", desc, caption, cb, hm)
}

func floaterStates(ids *idGen, ev *floater.Evidence, p *floater.Params) *figure {
	if len(ev.Sample) == 0 || len(ev.Sample[0]) == 0 {
		return nil
	}
	cb := symmetricBar("value", ev.Sample)
	hm := &heatmap{title: "integrated states", xLabel: "state component (first 64)", yLabel: "position", rows: ev.Sample}
	desc := fmt.Sprintf("Heat map of FLOATER's states at positions 0 to %d, first %d components, values from %s to %s.", len(ev.Sample)-1, len(ev.Sample[0]), numLabel(cb.vmin), numLabel(cb.vmax))
	caption := fmt.Sprintf("The position biases the layers read (table %s, %d positions): the solution of the learned dynamics at every position's time.", ev.Table, ev.Rows)
	if p != nil && p.Solver != nil && p.Step != nil {
		caption += fmt.Sprintf(" Integrated by %s steps of %s (%d evaluations of the dynamics per step, weights %s).", *p.Solver, valueLabel(*p.Step), ev.Stages, joinValues(ev.B))
	} else if p != nil && p.Form == "table" {
		caption += " The states are stored: the integration is not in the graph."
	}
	return heatmapFigure(ids, "floater_states", "FLOATER states", desc, caption, cb, hm)
}
