package htmlreport

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/schemes"
)

// layerMap draws one cell per attention block, coloured by the scheme that
// reaches it: labelled cells in balanced rows of up to 20, or, for more than
// 120 layers, small cells in rows of 50 labelled by their first layer.
func layerMap(ids *plot.IDs, r *passes.Report) *plot.Figure {
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
	s := plot.NewSVG(ids, w, h, "Scheme per attention layer", desc)
	s.Text(8, 18, "start", "ptitle", "Scheme per attention layer (blocks in topological order)")
	for i, l := range r.Layers {
		x := x0 + float64(i%cols)*(cell+gap)
		y := y0 + float64(i/cols)*(cell+gap)
		c := schemeColor(l.Scheme)
		if !labels && i%cols == 0 {
			s.Text(x0-6, y+cell-2, "end", "tl", fmt.Sprint(l.Index))
		}
		s.Raw(`<g class="layer"><title>layer %d: %s</title><rect x="%s" y="%s" width="%s" height="%s" rx="2" fill="%s"/>`,
			l.Index, plot.Esc(l.Scheme), plot.F(x), plot.F(y), plot.F(cell), plot.F(cell), c)
		if labels {
			s.Text(x+cell/2, y+cell/2+4, "middle", "cell "+textClass(c), fmt.Sprint(l.Index))
		}
		s.Raw(`</g>`)
	}
	lx, ly := x0, y0+float64(rows)*(cell+gap)+16
	for _, sc := range schemes {
		s.Raw(`<rect x="%s" y="%s" width="12" height="12" rx="2" fill="%s"/>`, plot.F(lx), plot.F(ly-10), schemeColor(sc))
		s.Text(lx+17, ly, "start", "legend", plot.Esc(sc))
		lx += 34 + 7*float64(len(sc))
	}
	return &plot.Figure{Kind: "layer_map", Caption: desc, SVG: s.String()}
}

// textClass picks dark or light text for a background colour.
func textClass(bg string) string {
	c := plot.HexColor(bg)
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
func findingFigures(ids *plot.IDs, fd *passes.Finding) []*plot.Figure {
	var out []*plot.Figure
	add := func(fg *plot.Figure) {
		if fg != nil {
			out = append(out, fg)
		}
	}
	if sc := schemes.Lookup(fd.Scheme); sc != nil && sc.Plots != nil {
		for _, fg := range sc.Plots(ids, fd) {
			add(fg)
		}
	}
	return out
}
