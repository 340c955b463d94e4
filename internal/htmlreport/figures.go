package htmlreport

import (
	"fmt"
	"math"
	"strings"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/scheme/alibi"
	"github.com/onnxpe/onnxpe/passes/scheme/complexorder"
	"github.com/onnxpe/onnxpe/passes/scheme/disentangled"
	"github.com/onnxpe/onnxpe/passes/scheme/floater"
	"github.com/onnxpe/onnxpe/passes/scheme/learned"
	"github.com/onnxpe/onnxpe/passes/scheme/relsin"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/passes/scheme/shaw"
	"github.com/onnxpe/onnxpe/passes/scheme/sinusoidal"
	"github.com/onnxpe/onnxpe/passes/scheme/t5"
)

// figure is one plot of the report: an SVG image and its caption.
type figure struct {
	// Kind names what it shows (layer_map, rope_cos_sin, ...): tests and
	// the page's anchors use it.
	Kind    string
	Caption string
	SVG     string
}

const figW = 680.0

// layerMap draws one cell per attention block, coloured by the scheme that
// reaches it: labelled cells in balanced rows of up to 20, or, for more than
// 120 layers, small cells in rows of 50 labelled by their first layer.
func layerMap(ids *idGen, r *passes.Report) *figure {
	n := len(r.Layers)
	if n == 0 {
		return nil
	}
	cell, gap, maxCols, labels := 28.0, 4.0, 20, true
	if n > 120 {
		cell, gap, maxCols, labels = 11, 2, 50, false
	}
	rows := (n + maxCols - 1) / maxCols
	cols := (n + rows - 1) / rows
	var schemes []string
	for _, l := range r.Layers {
		if !contains(schemes, l.Scheme) {
			schemes = append(schemes, l.Scheme)
		}
	}
	x0, y0 := 16.0, 34.0
	if !labels {
		x0 = 52
	}
	h := y0 + float64(rows)*(cell+gap) + 40
	legendW := 0.0
	for _, sc := range schemes {
		legendW += 34 + 7*float64(len(sc))
	}
	w := math.Max(math.Max(x0+16+float64(cols)*(cell+gap), legendW+2*x0), 420)
	desc := fmt.Sprintf("One cell per attention layer, coloured by the scheme that reaches it: %s.", layerRuns(r.Layers))
	s := newSVG(ids, w, h, "Scheme per attention layer", desc)
	s.text(8, 18, "start", "ptitle", "Scheme per attention layer (blocks in topological order)")
	for i, l := range r.Layers {
		x := x0 + float64(i%cols)*(cell+gap)
		y := y0 + float64(i/cols)*(cell+gap)
		c := schemeColor(l.Scheme)
		if !labels && i%cols == 0 {
			s.text(x0-6, y+cell-2, "end", "tl", fmt.Sprint(l.Index))
		}
		s.raw(`<g class="layer"><title>layer %d: %s</title><rect x="%s" y="%s" width="%s" height="%s" rx="2" fill="%s"/>`,
			l.Index, esc(l.Scheme), f(x), f(y), f(cell), f(cell), c)
		if labels {
			s.text(x+cell/2, y+cell/2+4, "middle", "cell "+textClass(c), fmt.Sprint(l.Index))
		}
		s.raw(`</g>`)
	}
	lx, ly := x0, y0+float64(rows)*(cell+gap)+16
	for _, sc := range schemes {
		s.raw(`<rect x="%s" y="%s" width="12" height="12" rx="2" fill="%s"/>`, f(lx), f(ly-10), schemeColor(sc))
		s.text(lx+17, ly, "start", "legend", esc(sc))
		lx += 34 + 7*float64(len(sc))
	}
	return &figure{Kind: "layer_map", Caption: desc, SVG: s.String()}
}

// textClass picks dark or light text for a background colour.
func textClass(bg string) string {
	c := hexColor(bg)
	lum := 0.2126*float64(c.R) + 0.7152*float64(c.G) + 0.0722*float64(c.B)
	if lum > 150 {
		return "dark"
	}
	return "light"
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// findingFigures are the plots of one finding, from its evidence.
func findingFigures(ids *idGen, fd *passes.Finding) []*figure {
	var out []*figure
	add := func(fg *figure) {
		if fg != nil {
			out = append(out, fg)
		}
	}
	plots := map[string]func(*idGen, *passes.Finding) []*figure{rope.Name: ropePlots, sinusoidal.Name: sinusoidalPlots, learned.Name: learnedPlots,
		alibi.Name: alibiPlots, t5.Name: t5Plots, shaw.Name: shawPlots, relsin.Name: relsinPlots, disentangled.Name: disentangledPlots,
		complexorder.Name: complexorderPlots, floater.Name: floaterPlots}
	if fn := plots[fd.Scheme]; fn != nil {
		for _, fg := range fn(ids, fd) {
			add(fg)
		}
	}
	return out
}

// heatmapFigure draws heat maps side by side with one colour bar.
func heatmapFigure(ids *idGen, kind, title, desc, caption string, cb colorbar, panels ...*heatmap) *figure {
	return heatmapFigureW(ids, figW, kind, title, desc, caption, cb, panels...)
}

// heatmapFigureW is heatmapFigure at width w.
func heatmapFigureW(ids *idGen, w float64, kind, title, desc, caption string, cb colorbar, panels ...*heatmap) *figure {
	nr := len(panels[0].rows)
	ph := math.Max(120, math.Min(300, float64(nr)*6))
	h := marginT + ph + marginB
	s := newSVG(ids, w, h, title, desc)
	cbW := 96.0
	pw := (w - cbW) / float64(len(panels))
	for i, hm := range panels {
		hm.render(s, cb, float64(i)*pw, 0, pw, h)
	}
	cb.render(s, w-cbW, 0, h)
	return &figure{Kind: kind, Caption: caption, SVG: s.String()}
}

func ropeCosSin(ids *idGen, ev *rope.Evidence, p *rope.Params) *figure {
	if len(ev.Cos) == 0 || len(ev.Cos[0]) == 0 || ev.Synthetic {
		return nil
	}
	ylabel, row0 := "position", ev.Start
	if ev.Start < 0 {
		ylabel, row0 = "probe row", 0
	}
	cb := symmetricBar("value", ev.Cos, ev.Sin)
	cos := &heatmap{title: "cos", xLabel: "rotary pair (frequency order)", yLabel: ylabel, rows: ev.Cos, row0: row0}
	sin := &heatmap{title: "sin", xLabel: "rotary pair (frequency order)", yLabel: ylabel, rows: ev.Sin, row0: row0}
	first, last := row0, row0+len(ev.Cos)-1
	desc := fmt.Sprintf("Heat maps of the cos and sin that the rotation applies to each of %d rotary pairs at %s %d to %d, measured by evaluating the graph; values from %s to %s.",
		len(ev.Pairs), ylabel, first, last, numLabel(cb.vmin), numLabel(cb.vmax))
	caption := fmt.Sprintf("The cos and sin the model applies at %ss %d–%d, as onnxpe's kernels evaluated the graph (one column per rotary pair, fastest frequency first).", ylabel, first, last)
	if math.Abs(ev.Amplitude-1) > 1e-5 {
		caption += fmt.Sprintf(" They are scaled by %s (the attention factor).", valueLabel(ev.Amplitude))
	}
	if p != nil && p.RotaryDim > 0 && p.RotaryDim < p.HeadDim {
		caption += fmt.Sprintf(" Only %d of the head's %d dimensions are rotated; the others pass unchanged.", p.RotaryDim, p.HeadDim)
	}
	return heatmapFigure(ids, "rope_cos_sin", "RoPE cos and sin per position", desc, caption, cb, cos, sin)
}

// ropeFrequencies plots the measured frequencies against those of the
// plain base, and their ratio (the scaling rule's factor per frequency).
func ropeFrequencies(ids *idGen, ev *rope.Evidence, p *rope.Params) *figure {
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
	xsc := linScale(0, float64(max(n-1, 1)), true)
	xsc.min, xsc.max = -0.5, float64(n)-0.5
	measured := "measured"
	if ev.InvFreqLong != nil {
		measured = "measured, up to the original length"
	}
	top := &chart{
		title: "Frequency per rotary pair", xLabel: "rotary pair k", yLabel: "radians per position",
		x: xsc, y: logScaleOf(lo, hi, 10),
	}
	if plain != nil {
		top.series = append(top.series, series{name: fmt.Sprintf("plain base %s: base^(−2k/%d)", valueLabel(base), p.RotaryDim), xs: ks, ys: plain, style: styleDashed, color: "#777777"})
	}
	top.series = append(top.series, series{name: measured, xs: ks, ys: ev.InvFreq, style: stylePoints, color: seriesColors[0]})
	if ev.InvFreqLong != nil {
		top.series = append(top.series, series{name: "measured, beyond the original length", xs: ks, ys: ev.InvFreqLong, style: stylePoints, color: seriesColors[1], marker: "diamond"})
	}
	charts := []*chart{top}
	desc := fmt.Sprintf("Log-scale plot of the %d measured RoPE frequencies, from %s to %s radians per position", n, valueLabel(ev.InvFreq[0]), valueLabel(ev.InvFreq[n-1]))
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
		bottom := &chart{
			title: "Scaling per rotary pair", xLabel: "rotary pair k", yLabel: "plain ÷ measured",
			x: xsc,
		}
		bottom.series = append(bottom.series, series{name: strings.TrimPrefix(measured, "measured, "), xs: ks, ys: r, style: stylePoints, color: seriesColors[0]})
		if ev.InvFreqLong != nil {
			rl := ratio(ev.InvFreqLong)
			for _, v := range rl {
				rlo, rhi = math.Min(rlo, v), math.Max(rhi, v)
			}
			bottom.series = append(bottom.series, series{name: "beyond the original length", xs: ks, ys: rl, style: stylePoints, color: seriesColors[1], marker: "diamond"})
		} else {
			bottom.series[0].name = ""
		}
		bottom.hlines = append(bottom.hlines, refLine{v: 1, label: "1 (unscaled)"})
		if p.Factor != nil && *p.Factor != 1 && *p.Factor > 0 {
			bottom.hlines = append(bottom.hlines, refLine{v: *p.Factor, label: "factor " + valueLabel(*p.Factor)})
			rlo, rhi = math.Min(rlo, *p.Factor), math.Max(rhi, *p.Factor)
		}
		if rhi/rlo < 1.5 {
			rlo, rhi = rlo/1.5, rhi*1.5
		}
		bottom.y = logScaleOf(rlo, rhi, 2)
		charts = append(charts, bottom)
		desc += fmt.Sprintf("; the plain-base curve of base %s; and the ratio plain ÷ measured per pair, from %s to %s.", valueLabel(base), valueLabel(rlo), valueLabel(rhi))
		caption += fmt.Sprintf(" against the frequencies of the plain base %s (dashed); below, their ratio per pair: 1 where a frequency is kept, the factor where it is divided.", valueLabel(base))
		if p.Scaling != nil {
			caption += " Scaling rule: " + *p.Scaling + "."
		}
	} else {
		desc += "."
		caption += "; no base fits them, so there is no plain-base curve."
	}
	return stackFigure(ids, "rope_frequencies", "RoPE frequencies", desc, caption, charts...)
}

// stackFigure draws charts one above the other.
func stackFigure(ids *idGen, kind, title, desc, caption string, charts ...*chart) *figure {
	const ph = 190.0
	h := 0.0
	for _, c := range charts {
		h += c.height(ph, figW)
	}
	s := newSVG(ids, figW, h, title, desc)
	y := 0.0
	for _, c := range charts {
		ch := c.height(ph, figW)
		c.render(s, 0, y, figW, ch)
		y += ch
	}
	return &figure{Kind: kind, Caption: caption, SVG: s.String()}
}

func tableHeatmap(ids *idGen, name string, ev *absolute.TableEvidence) *figure {
	rows := ev.Sample
	if len(rows) == 0 {
		rows = ev.Rows0
	}
	if len(rows) == 0 || len(rows[0]) == 0 {
		return nil
	}
	cb := symmetricBar("value", rows)
	hm := &heatmap{title: name + " per position", xLabel: "dimension", yLabel: "position (token index)", rows: rows}
	desc := fmt.Sprintf("Heat map of the position encoding added to the token embeddings, %d positions by %d dimensions, values from %s to %s.",
		len(rows), len(rows[0]), numLabel(cb.vmin), numLabel(cb.vmax))
	caption := fmt.Sprintf("What the model adds to the embeddings at positions 0–%d (the first %d tokens), as onnxpe's kernels evaluated it.", len(rows)-1, len(rows))
	if ev.Table != "" {
		caption += fmt.Sprintf(" Read from the stored table %s (%d rows).", ev.Table, ev.Rows)
	}
	return heatmapFigure(ids, "table_heatmap", name, desc, caption, cb, hm)
}

func sinusoidalFrequencies(ids *idGen, ev *absolute.TableEvidence, p *sinusoidal.Params) *figure {
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
	xsc := linScale(0, float64(max(n-1, 1)), true)
	xsc.min, xsc.max = -0.5, float64(n)-0.5
	c := &chart{title: "Frequency per sin/cos pair", xLabel: "pair k", yLabel: "radians per position", x: xsc}
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
		c.series = append(c.series, series{name: fmt.Sprintf("base %s: base^(−k/(%s))", valueLabel(*p.Base), denName), xs: ks, ys: plain, style: styleDashed, color: "#777777"})
		caption += fmt.Sprintf(" against base^(−k/(%s)) for the fitted base %s (dashed).", denName, valueLabel(*p.Base))
	} else {
		caption += "."
	}
	c.series = append(c.series, series{name: "measured", xs: ks, ys: ev.Omega, style: stylePoints, color: sinusoidal.Color})
	c.y = logScaleOf(lo, hi, 10)
	desc := fmt.Sprintf("Log-scale plot of the %d frequencies of the sinusoidal encoding, from %s to %s radians per position.", n, valueLabel(ev.Omega[0]), valueLabel(ev.Omega[n-1]))
	return stackFigure(ids, "sinusoidal_frequencies", "Sinusoidal frequencies", desc, caption, c)
}

func alibiSlopes(ids *idGen, ev *alibi.Evidence) *figure {
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
	xsc := linScale(0, float64(max(n-1, 1)), true)
	xsc.min, xsc.max = -0.5, float64(n)-0.5
	c := &chart{title: "ALiBi slope per head", xLabel: "head", yLabel: "bias per position of distance", x: xsc}
	if positive {
		c.y = logScaleOf(lo, hi, 2)
		c.y.min /= 2
	} else {
		c.y = linScale(math.Min(0, lo), math.Max(0, hi), false).padded(0.06)
		c.hlines = []refLine{{v: 0}}
	}
	c.series = []series{{xs: hs, ys: ev.Slopes, style: styleLollipop, color: alibi.Color}}
	desc := fmt.Sprintf("Slopes of the %d heads, measured from the bias the graph adds to the scores: %s.", n, joinValues(ev.Slopes))
	caption := "The slope of each head, read from the bias the graph adds to the attention scores (log scale, base 2)."
	if !positive {
		caption = "The slope of each head, read from the bias the graph adds to the attention scores."
	}
	return stackFigure(ids, "alibi_slopes", "ALiBi slopes", desc, caption, c)
}

func joinValues(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = valueLabel(x)
	}
	return strings.Join(parts, ", ")
}

// relAxis is the x axis of relative positions key − query.
func relAxis(maxRel int) scale {
	return scale{kind: symlog, min: float64(-maxRel), max: float64(maxRel), integer: true}
}

func t5BucketMap(ids *idGen, ev *t5.Evidence, p *t5.Params) *figure {
	if len(ev.BucketMap) == 0 {
		return nil
	}
	xs, ys := make([]float64, len(ev.BucketMap)), make([]float64, len(ev.BucketMap))
	hi := 0.0
	for i, b := range ev.BucketMap {
		xs[i], ys[i] = float64(i-ev.MaxRel), float64(b)
		hi = math.Max(hi, float64(b))
	}
	c := &chart{title: "T5 bucket per relative position", xLabel: "relative position key − query (symmetric log scale)", yLabel: "bucket", x: relAxis(ev.MaxRel),
		y: scale{kind: linear, min: -1, max: hi + 1, integer: true}}
	c.series = []series{{xs: xs, ys: ys, style: styleStep, color: t5.Color}}
	caption := fmt.Sprintf("The bucket index the graph computes for every relative position from −%d to %d.", ev.MaxRel, ev.MaxRel)
	if p != nil && p.MaxDistance != nil {
		md := float64(*p.MaxDistance)
		c.vlines = append(c.vlines, refLine{v: md, label: fmt.Sprintf("max_distance %d", *p.MaxDistance)})
		if p.Bidirectional {
			c.vlines = append(c.vlines, refLine{v: -md})
		} else {
			c.vlines[0].v = -md
		}
		caption += " Beyond max_distance every distance shares the last bucket."
	}
	desc := fmt.Sprintf("Step plot of the T5 bucket index against the relative position key minus query, from %d to %d, buckets 0 to %d.", -ev.MaxRel, ev.MaxRel, int(hi))
	return stackFigure(ids, "t5_bucket_map", "T5 bucket map", desc, caption, c)
}

const maxHeadLines = 8

func t5BiasPerHead(ids *idGen, ev *t5.Evidence) *figure {
	if len(ev.BucketMap) == 0 || len(ev.Weights) == 0 {
		return nil
	}
	heads := len(ev.Weights[0])
	shown := min(heads, maxHeadLines)
	lo, hi := math.Inf(1), math.Inf(-1)
	var charts []*chart
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
		c := &chart{yLabel: fmt.Sprintf("head %d", h), x: relAxis(ev.MaxRel), ph: 62, bare: h < shown-1,
			series: []series{{xs: xs, ys: ys, style: styleStep, color: seriesColors[h%len(seriesColors)]}}}
		c.hlines = []refLine{{v: 0}}
		if h == 0 {
			c.title = "T5 bias per relative position, one panel per head"
		}
		if h == shown-1 {
			c.xLabel = "relative position key − query (symmetric log scale)"
		}
		charts = append(charts, c)
	}
	ysc := linScale(lo, hi, false)
	for _, c := range charts {
		c.y = ysc
	}
	caption := "The bias each head adds to the scores for each relative position (the bias table's value at the position's bucket), on one y range."
	if shown < heads {
		caption += fmt.Sprintf(" The first %d of %d heads; the table below shows all.", shown, heads)
	}
	desc := fmt.Sprintf("Step plots of the T5 bias of %d heads against the relative position, from %s to %s.", shown, valueLabel(lo), valueLabel(hi))
	return stackFigure(ids, "t5_bias", "T5 bias per head", desc, caption, charts...)
}

func t5Table(ids *idGen, ev *t5.Evidence) *figure {
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
	cb := symmetricBar("bias", rows)
	hm := &heatmap{title: "T5 bias table", xLabel: "bucket", yLabel: "head", rows: rows}
	desc := fmt.Sprintf("Heat map of the T5 relative-attention bias table, %d heads by %d buckets, values from %s to %s.", heads, nb, numLabel(cb.vmin), numLabel(cb.vmax))
	caption := fmt.Sprintf("The stored bias table %s: one row per head, one column per bucket.", ev.Table)
	return heatmapFigure(ids, "t5_table", "T5 bias table", desc, caption, cb, hm)
}

func shawClipping(ids *idGen, ev *shaw.Evidence, p *shaw.Params) *figure {
	if len(ev.IndexMap) == 0 {
		return nil
	}
	xs, ys := make([]float64, len(ev.IndexMap)), make([]float64, len(ev.IndexMap))
	hi := 0.0
	for i, v := range ev.IndexMap {
		xs[i], ys[i] = float64(i-ev.MaxRel), float64(v)
		hi = math.Max(hi, float64(v))
	}
	xsc := scale{kind: linear, min: float64(-ev.MaxRel) - 0.5, max: float64(ev.MaxRel) + 0.5, integer: true}
	c := &chart{title: "Relative embedding row per relative position", xLabel: "relative position key − query", yLabel: "table row", x: xsc, y: linScale(0, hi, true).padded(0.04)}
	c.series = []series{{xs: xs, ys: ys, style: stylePoints, color: shaw.Color}}
	caption := fmt.Sprintf("The row of the relative embedding table the graph reads for each relative position from −%d to %d.", ev.MaxRel, ev.MaxRel)
	if p != nil {
		k := float64(p.MaxRelativePosition)
		if p.Clipped {
			c.vlines = []refLine{{v: -k, label: fmt.Sprintf("−%d", p.MaxRelativePosition)}, {v: k, label: fmt.Sprintf("%d", p.MaxRelativePosition)}}
			caption += fmt.Sprintf(" Distances beyond ±%d are clipped to the first and last rows.", p.MaxRelativePosition)
		} else {
			caption += " The index did not saturate in this range."
		}
	}
	desc := fmt.Sprintf("Plot of the table row against the relative position, from %d to %d, rows 0 to %d.", -ev.MaxRel, ev.MaxRel, int(hi))
	return stackFigure(ids, "shaw_clipping", "Shaw clipping", desc, caption, c)
}

// positionSimilarity draws the cosine similarity of the encodings of every
// two positions: trained tables show how position information is shared
// between neighbours.
func positionSimilarity(ids *idGen, ev *absolute.TableEvidence) *figure {
	rows := ev.Sample
	if len(rows) == 0 {
		rows = ev.Rows0
	}
	n := len(rows)
	if n < 2 {
		return nil
	}
	norm := make([]float64, n)
	for i, r := range rows {
		for _, x := range r {
			norm[i] += x * x
		}
		norm[i] = math.Sqrt(norm[i])
	}
	sim := make([][]float64, n)
	for i := range sim {
		sim[i] = make([]float64, n)
		for j := range sim[i] {
			var dot float64
			for k := range rows[i] {
				dot += rows[i][k] * rows[j][k]
			}
			sim[i][j] = math.NaN()
			if norm[i] > 0 && norm[j] > 0 {
				sim[i][j] = dot / (norm[i] * norm[j])
			}
		}
	}
	cb := colorbar{label: "cosine similarity", vmin: -1, vmax: 1, cmap: diverging}
	hm := &heatmap{title: "Similarity between positions", xLabel: "position", yLabel: "position", rows: sim}
	desc := fmt.Sprintf("Heat map of the cosine similarity between the encodings of every two of the first %d positions.", n)
	caption := fmt.Sprintf("Cosine similarity between the encodings of positions 0–%d, from the same values: a trained table shows a band along the diagonal when neighbouring positions get similar vectors.", n-1)
	return heatmapFigureW(ids, 70+300+8+96, "position_similarity", "Position similarity", desc, caption, cb, hm)
}

// ropePlots are the plots of a RoPE finding: its cos and sin, its
// frequencies against the base's, and the split of its pairs between
// streams or axes (M-RoPE, 2-D RoPE).
func ropePlots(ids *idGen, fd *passes.Finding) []*figure {
	ev, ok := fd.Evidence.(*rope.Evidence)
	if !ok {
		return nil
	}
	p, _ := fd.Params.(*rope.Params)
	return []*figure{ropeCosSin(ids, ev, p), ropeFrequencies(ids, ev, p), ropeSplit(ids, ev, p)}
}

// sinusoidalPlots: the encoding per position and its frequencies.
func sinusoidalPlots(ids *idGen, fd *passes.Finding) []*figure {
	ev, ok := fd.Evidence.(*absolute.TableEvidence)
	p, ok2 := fd.Params.(*sinusoidal.Params)
	if !ok || !ok2 {
		return nil
	}
	return []*figure{tableHeatmap(ids, "Sinusoidal encoding", ev), sinusoidalFrequencies(ids, ev, p)}
}

// learnedPlots: the table per position and the similarity of positions.
func learnedPlots(ids *idGen, fd *passes.Finding) []*figure {
	ev, ok := fd.Evidence.(*absolute.TableEvidence)
	if !ok {
		return nil
	}
	return []*figure{tableHeatmap(ids, "Learned position table", ev), positionSimilarity(ids, ev)}
}

// alibiPlots: the slopes per head.
func alibiPlots(ids *idGen, fd *passes.Finding) []*figure {
	ev, ok := fd.Evidence.(*alibi.Evidence)
	if !ok {
		return nil
	}
	return []*figure{alibiSlopes(ids, ev)}
}

// t5Plots: the bucket map, the bias per head and the learned table.
func t5Plots(ids *idGen, fd *passes.Finding) []*figure {
	ev, ok := fd.Evidence.(*t5.Evidence)
	if !ok {
		return nil
	}
	p, _ := fd.Params.(*t5.Params)
	return []*figure{t5BucketMap(ids, ev, p), t5BiasPerHead(ids, ev), t5Table(ids, ev)}
}

// shawPlots: the clipping of the distances.
func shawPlots(ids *idGen, fd *passes.Finding) []*figure {
	ev, ok := fd.Evidence.(*shaw.Evidence)
	if !ok {
		return nil
	}
	p, _ := fd.Params.(*shaw.Params)
	return []*figure{shawClipping(ids, ev, p)}
}
