package htmlreport

import (
	"fmt"
	"image"
	"math"
	"strconv"
	"strings"
)

// scaleKind is how an axis maps values to positions.
type scaleKind int

const (
	linear scaleKind = iota
	logScale
	// symlog is sign(v)·log2(1+|v|): linear near 0, logarithmic far off,
	// for relative positions.
	symlog
)

// scale is one axis: its kind, its domain and (at render time) the pixel
// range it maps the domain to.
type scale struct {
	kind     scaleKind
	base     float64 // of a log scale: 10 or 2 (tick labels)
	min, max float64
	integer  bool // ticks at integers only
	lo, hi   float64
	// nticks is about how many ticks a linear scale gets (0: 7).
	nticks int
}

func (s scale) tr(v float64) float64 {
	switch s.kind {
	case logScale:
		return math.Log(v) / math.Log(s.base)
	case symlog:
		if v < 0 {
			return -math.Log2(1 - v)
		}
		return math.Log2(1 + v)
	}
	return v
}

func (s scale) px(v float64) float64 {
	a, b := s.tr(s.min), s.tr(s.max)
	if b == a {
		return (s.lo + s.hi) / 2
	}
	return s.lo + (s.tr(v)-a)/(b-a)*(s.hi-s.lo)
}

type tick struct {
	v     float64
	label string
}

// linScale is a linear scale over the values, widened to nice ticks.
func linScale(lo, hi float64, integer bool) scale {
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		lo, hi = 0, 1
	}
	if hi == lo {
		d := math.Max(1, math.Abs(lo)*0.1)
		lo, hi = lo-d, hi+d
	}
	step := niceStep((hi-lo)/7, integer)
	return scale{kind: linear, min: math.Floor(lo/step+1e-9) * step, max: math.Ceil(hi/step-1e-9) * step, integer: integer}
}

// logScaleOf is a log scale over the positive values, widened to whole
// powers of base.
func logScaleOf(lo, hi, base float64) scale {
	if !(lo > 0) || !(hi > 0) {
		lo, hi = 1, base
	}
	a := math.Floor(math.Log(lo)/math.Log(base) + 1e-9)
	b := math.Ceil(math.Log(hi)/math.Log(base) - 1e-9)
	if b == a {
		b++
	}
	// A little room so that points on a whole power stay off the frame.
	pad := 0.04 * (b - a)
	return scale{kind: logScale, base: base, min: math.Pow(base, a-pad), max: math.Pow(base, b+pad)}
}

// padded widens a linear scale by a fraction of its span on both sides.
func (s scale) padded(frac float64) scale {
	d := (s.max - s.min) * frac
	s.min, s.max = s.min-d, s.max+d
	return s
}

func niceStep(raw float64, integer bool) float64 {
	if raw <= 0 || math.IsNaN(raw) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	var step float64
	switch m := raw / p; {
	case m <= 1:
		step = p
	case m <= 2:
		step = 2 * p
	case m <= 2.5 && !integer:
		step = 2.5 * p
	case m <= 5:
		step = 5 * p
	default:
		step = 10 * p
	}
	if integer && step < 1 {
		step = 1
	}
	return step
}

func (s scale) ticks() []tick {
	var out []tick
	switch s.kind {
	case linear:
		n := s.nticks
		if n == 0 {
			n = 7
		}
		step := niceStep((s.max-s.min)/float64(n), s.integer)
		for v := math.Ceil(s.min/step-1e-9) * step; v <= s.max+step*1e-9; v += step {
			if math.Abs(v) < step*1e-9 {
				v = 0
			}
			out = append(out, tick{v, numLabel(v)})
		}
	case logScale:
		a := int(math.Ceil(math.Log(s.min)/math.Log(s.base) - 1e-9))
		b := int(math.Floor(math.Log(s.max)/math.Log(s.base) + 1e-9))
		every := 1
		for (b-a)/every > 9 {
			every++
		}
		for e := a; e <= b; e++ {
			if (e-a)%every == 0 {
				out = append(out, tick{math.Pow(s.base, float64(e)), powLabel(s.base, e)})
			}
		}
	case symlog:
		m := math.Max(math.Abs(s.min), math.Abs(s.max))
		var pows []float64
		for p := 1.0; p <= m; p *= 2 {
			pows = append(pows, p)
		}
		every := 1
		for len(pows)/every > 5 {
			every++
		}
		out = append(out, tick{0, "0"})
		for i, p := range pows {
			if i%every != 0 && i != len(pows)-1 {
				continue
			}
			if -p >= s.min {
				out = append(out, tick{-p, numLabel(-p)})
			}
			if p <= s.max {
				out = append(out, tick{p, numLabel(p)})
			}
		}
	}
	return out
}

var superscripts = strings.NewReplacer("-", "⁻", "0", "⁰", "1", "¹", "2", "²", "3", "³", "4", "⁴", "5", "⁵", "6", "⁶", "7", "⁷", "8", "⁸", "9", "⁹")

func powLabel(base float64, e int) string {
	if base == 10 && e >= 0 && e <= 4 {
		return numLabel(math.Pow(10, float64(e)))
	}
	if base == 2 && e >= 0 && e <= 6 {
		return numLabel(math.Pow(2, float64(e)))
	}
	if base == 2 && e < 0 && e >= -10 {
		return "1/" + strconv.Itoa(1<<-e)
	}
	return strconv.Itoa(int(base)) + superscripts.Replace(strconv.Itoa(e))
}

// numLabel prints a tick value briefly.
func numLabel(v float64) string {
	var s string
	if v == math.Trunc(v) && math.Abs(v) < 1e7 {
		s = strconv.FormatInt(int64(v), 10)
	} else {
		s = strconv.FormatFloat(v, 'g', 4, 64)
	}
	return strings.Replace(s, "-", "−", 1)
}

// valueLabel prints a value for a caption (6 significant digits).
func valueLabel(v float64) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// Series styles.
const (
	styleLine     = "line"
	styleDashed   = "dashed"
	stylePoints   = "points"
	styleStep     = "step"
	styleLollipop = "lollipop"
)

type series struct {
	name   string
	xs, ys []float64
	style  string
	color  string
	marker string // circle (default), diamond or square
}

// refLine is a horizontal or vertical reference at a value.
type refLine struct {
	v     float64
	label string
}

// chart is an x-y plot with axes, grid, series, reference lines and a
// legend below it.
type chart struct {
	title, xLabel, yLabel string
	x, y                  scale
	series                []series
	hlines, vlines        []refLine
	// xTicks, when set, replace the x scale's ticks.
	xTicks []tick
	// ph is the plot area's height (0: the figure's default); bare
	// leaves out the x tick labels and the x label (a panel above
	// another with the same x axis).
	ph   float64
	bare bool
}

// margins are the chart's top and bottom margins.
func (c *chart) margins() (top, bottom float64) {
	top, bottom = marginT, marginB
	if c.title == "" {
		top = 8
	}
	if c.bare {
		bottom = 6
	}
	return top, bottom
}

const (
	marginL = 70
	marginR = 18
	marginT = 30
	marginB = 46
	legendH = 20
)

// legendRows is how many legend rows the chart needs at width w.
func (c *chart) legendRows(w float64) int {
	named := 0
	width := 0.0
	rows := 0
	for _, s := range c.series {
		if s.name == "" {
			continue
		}
		named++
		iw := 34 + 6.5*float64(len([]rune(s.name)))
		if rows == 0 || width+iw > w-marginL-marginR {
			rows++
			width = 0
		}
		width += iw
	}
	return rows
}

// height of the chart area for a plot area of ph pixels.
func (c *chart) height(ph, w float64) float64 {
	if c.ph > 0 {
		ph = c.ph
	}
	top, bottom := c.margins()
	return top + ph + bottom + legendH*float64(c.legendRows(w))
}

// render draws the chart in the box (x0, y0, w, h) of s.
func (c *chart) render(s *svg, x0, y0, w, h float64) {
	leg := float64(c.legendRows(w))
	px0, px1 := x0+marginL, x0+w-marginR
	top, bottom := c.margins()
	py0, py1 := y0+top, y0+h-bottom-legendH*leg
	c.x.lo, c.x.hi = px0, px1
	c.y.lo, c.y.hi = py1, py0
	if py1-py0 < 100 {
		c.y.nticks = 3
	}
	if c.title != "" {
		s.text(x0+8, y0+18, "start", "ptitle", esc(c.title))
	}
	// Grid and ticks.
	s.raw(`<g class="axes">`)
	yt := c.y.ticks()
	for _, t := range yt {
		y := c.y.px(t.v)
		s.line(px0, y, px1, y, "grid")
		s.line(px0-5, y, px0, y, "tick")
		s.text(px0-8, y+4, "end", "tl", esc(t.label))
	}
	xt := c.xTicks
	if xt == nil {
		xt = c.x.ticks()
	}
	for _, t := range xt {
		x := c.x.px(t.v)
		if x < px0-0.5 || x > px1+0.5 {
			continue
		}
		s.line(x, py0, x, py1, "grid")
		if !c.bare {
			s.line(x, py1, x, py1+5, "tick")
			s.text(x, py1+18, "middle", "tl", esc(t.label))
		}
	}
	s.raw(`<rect class="frame" x="%s" y="%s" width="%s" height="%s"/>`, f(px0), f(py0), f(px1-px0), f(py1-py0))
	if !c.bare {
		s.text((px0+px1)/2, py1+36, "middle", "al", esc(c.xLabel))
	}
	s.textV(x0+16, (py0+py1)/2, "al", esc(c.yLabel))
	s.raw(`</g>`)
	// Reference lines.
	clip := s.ids.next("c")
	s.raw(`<clipPath id="%s"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath>`, clip, f(px0-4), f(py0-4), f(px1-px0+8), f(py1-py0+8))
	s.raw(`<g clip-path="url(#%s)">`, clip)
	for _, r := range c.hlines {
		y := c.y.px(r.v)
		s.line(px0, y, px1, y, "ref")
		if r.label != "" {
			c.placeLabel(s, r.label, []labelSpot{{px1 - 4, y - 6, "end"}, {px0 + 4, y - 6, "start"}, {px1 - 4, y + 15, "end"}, {px0 + 4, y + 15, "start"}})
		}
	}
	for _, r := range c.vlines {
		x := c.x.px(r.v)
		s.line(x, py0, x, py1, "ref")
		if r.label != "" {
			c.placeLabel(s, r.label, []labelSpot{{x + 4, py0 + 13, "start"}, {x - 4, py0 + 13, "end"}, {x + 4, py1 - 5, "start"}, {x - 4, py1 - 5, "end"}})
		}
	}
	for i, sr := range c.series {
		if sr.color == "" {
			sr.color = seriesColors[i%len(seriesColors)]
		}
		c.drawSeries(s, sr, py1)
	}
	s.raw(`</g>`)
	// Legend, below the axis label.
	lx, ly := px0, py1+bottom+6
	for i, sr := range c.series {
		if sr.name == "" {
			continue
		}
		if sr.color == "" {
			sr.color = seriesColors[i%len(seriesColors)]
		}
		iw := 34 + 6.5*float64(len([]rune(sr.name)))
		if lx+iw > px1 && lx > px0 {
			lx, ly = px0, ly+legendH
		}
		c.swatch(s, sr, lx+12, ly+5)
		s.text(lx+28, ly+9, "start", "legend", esc(sr.name))
		lx += iw
	}
}

// labelSpot is a place for a label: its anchor point and text-anchor.
type labelSpot struct {
	x, y   float64
	anchor string
}

// placeLabel writes a label at the first of the spots that lies inside
// the plot area and covers the fewest data points.
func (c *chart) placeLabel(s *svg, label string, spots []labelSpot) {
	w := 6.5*float64(len([]rune(label))) + 4
	px0, px1 := c.x.lo, c.x.hi
	py0, py1 := c.y.hi, c.y.lo
	best, bestHits := spots[0], -1
	for _, sp := range spots {
		x0 := sp.x
		switch sp.anchor {
		case "end":
			x0 = sp.x - w
		case "middle":
			x0 = sp.x - w/2
		}
		if x0 < px0-1 || x0+w > px1+1 || sp.y-11 < py0-1 || sp.y+2 > py1+1 {
			continue
		}
		hits := 0
		for _, sr := range c.series {
			for i := range sr.xs {
				if math.IsNaN(sr.xs[i]) || math.IsNaN(sr.ys[i]) || (c.y.kind == logScale && sr.ys[i] <= 0) || (c.x.kind == logScale && sr.xs[i] <= 0) {
					continue
				}
				x, y := c.x.px(sr.xs[i]), c.y.px(sr.ys[i])
				// The text spans sp.y-11 to sp.y+2; a marker 4 pixels round.
				if x > x0-4 && x < x0+w+4 && y > sp.y-15 && y < sp.y+6 {
					hits++
				}
			}
		}
		if bestHits < 0 || hits < bestHits {
			best, bestHits = sp, hits
		}
	}
	s.text(best.x, best.y, best.anchor, "reflabel", esc(label))
}

func (c *chart) swatch(s *svg, sr series, x, y float64) {
	switch sr.style {
	case styleLine, styleStep:
		s.raw(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"/>`, f(x-10), f(y), f(x+10), f(y), sr.color)
	case styleDashed:
		s.raw(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2" stroke-dasharray="5 3"/>`, f(x-10), f(y), f(x+10), f(y), sr.color)
	default:
		marker(s, sr.marker, x, y, sr.color)
	}
}

func marker(s *svg, kind string, x, y float64, color string) {
	switch kind {
	case "diamond":
		s.raw(`<path d="M%s %sl4.5 4.5l-4.5 4.5l-4.5 -4.5z" fill="%s" stroke="#fff" stroke-width="0.8"/>`, f(x), f(y-4.5), color)
	case "square":
		s.raw(`<rect x="%s" y="%s" width="7" height="7" fill="%s" stroke="#fff" stroke-width="0.8"/>`, f(x-3.5), f(y-3.5), color)
	default:
		s.raw(`<circle cx="%s" cy="%s" r="3.6" fill="%s" stroke="#fff" stroke-width="0.8"/>`, f(x), f(y), color)
	}
}

func (c *chart) drawSeries(s *svg, sr series, base float64) {
	ok := func(i int) bool {
		x, y := sr.xs[i], sr.ys[i]
		if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
			return false
		}
		return (c.x.kind != logScale || x > 0) && (c.y.kind != logScale || y > 0)
	}
	switch sr.style {
	case styleLine, styleDashed, styleStep:
		var d strings.Builder
		pen := false
		for i := range sr.xs {
			if !ok(i) {
				pen = false
				continue
			}
			x, y := c.x.px(sr.xs[i]), c.y.px(sr.ys[i])
			switch {
			case !pen:
				fmt.Fprintf(&d, "M%s %s", f(x), f(y))
			case sr.style == styleStep:
				// A step holds its value until the next point.
				fmt.Fprintf(&d, "H%sV%s", f(x), f(y))
			default:
				fmt.Fprintf(&d, "L%s %s", f(x), f(y))
			}
			pen = true
		}
		dash := ""
		if sr.style == styleDashed {
			dash = ` stroke-dasharray="6 4"`
		}
		s.raw(`<path class="series" d="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s/>`, d.String(), sr.color, dash)
	case styleLollipop:
		// Stems from 0 where the axis has it.
		if c.y.kind == linear && c.y.min <= 0 && c.y.max >= 0 {
			base = c.y.px(0)
		}
		for i := range sr.xs {
			if ok(i) {
				x, y := c.x.px(sr.xs[i]), c.y.px(sr.ys[i])
				s.raw(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"/>`, f(x), f(base), f(x), f(y), sr.color)
				marker(s, sr.marker, x, y, sr.color)
			}
		}
	default:
		s.raw(`<g class="series">`)
		for i := range sr.xs {
			if ok(i) {
				marker(s, sr.marker, c.x.px(sr.xs[i]), c.y.px(sr.ys[i]), sr.color)
			}
		}
		s.raw(`</g>`)
	}
}

// heatmap is a matrix drawn as coloured cells, row 0 at the top.
type heatmap struct {
	title, xLabel, yLabel string
	rows                  [][]float64 // [row][column]
	row0, col0            int         // the labels of the first row and column
}

// colorbar maps values to colours for one or more heat maps.
type colorbar struct {
	label      string
	vmin, vmax float64
	cmap       colormap
}

func (cb colorbar) color(v float64) (r, g, b, a uint8) {
	c := cb.cmap.at((v - cb.vmin) / (cb.vmax - cb.vmin))
	return c.R, c.G, c.B, 255
}

// image makes the cells as a picture, each cell k×k pixels so that it
// stays sharp when the browser scales it.
func (h *heatmap) image(cb colorbar, pw, ph float64) image.Image {
	nr, nc := len(h.rows), len(h.rows[0])
	kx := max(1, min(int(math.Ceil(pw/float64(nc))), 2048/nc))
	ky := max(1, min(int(math.Ceil(ph/float64(nr))), 2048/nr))
	img := image.NewRGBA(image.Rect(0, 0, nc*kx, nr*ky))
	for i, row := range h.rows {
		for j, v := range row {
			r, g, b, a := cb.color(v)
			for y := i * ky; y < (i+1)*ky; y++ {
				for x := j * kx; x < (j+1)*kx; x++ {
					o := img.PixOffset(x, y)
					img.Pix[o], img.Pix[o+1], img.Pix[o+2], img.Pix[o+3] = r, g, b, a
				}
			}
		}
	}
	return img
}

// intTicks are ticks at cell centres for n cells labelled from first.
func intTicks(n, first int, maxTicks int) []int {
	step := int(niceStep(float64(n)/float64(maxTicks), true))
	var out []int
	for v := (first + step - 1) / step * step; v < first+n; v += step {
		out = append(out, v)
	}
	return out
}

// render draws the heat map's cells and axes in the box (x0, y0, w, h).
func (h *heatmap) render(s *svg, cb colorbar, x0, y0, w, hgt float64) {
	px0, px1 := x0+marginL, x0+w-8
	py0, py1 := y0+marginT, y0+hgt-marginB
	nr, nc := len(h.rows), len(h.rows[0])
	s.text(x0+8, y0+18, "start", "ptitle", esc(h.title))
	s.raw(`<image class="cells" x="%s" y="%s" width="%s" height="%s" preserveAspectRatio="none" href="%s"/>`,
		f(px0), f(py0), f(px1-px0), f(py1-py0), pngHref(h.image(cb, px1-px0, py1-py0)))
	s.raw(`<rect class="frame" x="%s" y="%s" width="%s" height="%s"/>`, f(px0), f(py0), f(px1-px0), f(py1-py0))
	cw, ch := (px1-px0)/float64(nc), (py1-py0)/float64(nr)
	for _, v := range intTicks(nc, h.col0, max(2, int((px1-px0)/40))) {
		x := px0 + (float64(v-h.col0)+0.5)*cw
		s.line(x, py1, x, py1+5, "tick")
		s.text(x, py1+18, "middle", "tl", strconv.Itoa(v))
	}
	for _, v := range intTicks(nr, h.row0, max(2, int((py1-py0)/28))) {
		y := py0 + (float64(v-h.row0)+0.5)*ch
		s.line(px0-5, y, px0, y, "tick")
		s.text(px0-8, y+4, "end", "tl", strconv.Itoa(v))
	}
	s.text((px0+px1)/2, py1+36, "middle", "al", esc(h.xLabel))
	s.textV(x0+16, (py0+py1)/2, "al", esc(h.yLabel))
}

// render draws the colour bar in the box (x0, y0, w, h): a vertical
// gradient with ticks and the label beside it.
func (cb colorbar) render(s *svg, x0, y0, hgt float64) {
	bx, bw := x0+8, 14.0
	by0, by1 := y0+marginT, y0+hgt-marginB
	id := s.ids.next("g")
	s.raw(`<defs><linearGradient id="%s" x1="0" y1="1" x2="0" y2="0">`, id)
	for i := 0; i <= 20; i++ {
		t := float64(i) / 20
		s.raw(`<stop offset="%s" stop-color="%s"/>`, f(t), cssColor(cb.cmap.at(t)))
	}
	s.raw(`</linearGradient></defs>`)
	s.raw(`<rect class="colorbar" x="%s" y="%s" width="%s" height="%s" fill="url(#%s)"/>`, f(bx), f(by0), f(bw), f(by1-by0), id)
	sc := scale{kind: linear, min: cb.vmin, max: cb.vmax, lo: by1, hi: by0}
	step := niceStep((cb.vmax-cb.vmin)/6, false)
	for v := math.Ceil(cb.vmin/step-1e-9) * step; v <= cb.vmax+step*1e-9; v += step {
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		y := sc.px(v)
		s.line(bx+bw, y, bx+bw+4, y, "tick")
		s.text(bx+bw+7, y+4, "start", "tl", esc(numLabel(v)))
	}
	s.textV(bx+bw+58, (by0+by1)/2, "al", esc(cb.label))
}

// symmetricBar is a diverging colour bar centred on 0 over the values.
func symmetricBar(label string, rows ...[][]float64) colorbar {
	m := 0.0
	for _, rs := range rows {
		for _, r := range rs {
			for _, v := range r {
				if !math.IsNaN(v) && !math.IsInf(v, 0) {
					m = math.Max(m, math.Abs(v))
				}
			}
		}
	}
	if m == 0 {
		m = 1
	}
	// Widen to a round bound so the ticks end at the bar's ends.
	step := niceStep(m/2.5, false)
	m = math.Ceil(m/step-1e-9) * step
	return colorbar{label: label, vmin: -m, vmax: m, cmap: diverging}
}
