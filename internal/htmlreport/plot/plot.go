package plot

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
	Linear scaleKind = iota
	LogScale
	// symlog is sign(v)·log2(1+|v|): linear near 0, logarithmic far off,
	// for relative positions.
	symlog
)

// scale is one axis: its kind, its domain and (at render time) the pixel
// range it maps the domain to.
type Scale struct {
	Kind     scaleKind
	Base     float64 // of a log scale: 10 or 2 (tick labels)
	Min, Max float64
	Integer  bool // ticks at integers only
	Lo, Hi   float64
	// nticks is about how many ticks a linear scale gets (0: 7).
	nticks int
}

func (s Scale) tr(v float64) float64 {
	switch s.Kind {
	case LogScale:
		return math.Log(v) / math.Log(s.Base)
	case symlog:
		if v < 0 {
			return -math.Log2(1 - v)
		}
		return math.Log2(1 + v)
	}
	return v
}

func (s Scale) Px(v float64) float64 {
	a, b := s.tr(s.Min), s.tr(s.Max)
	if b == a {
		return (s.Lo + s.Hi) / 2
	}
	return s.Lo + (s.tr(v)-a)/(b-a)*(s.Hi-s.Lo)
}

type Tick struct {
	v     float64
	Label string
}

// linScale is a linear scale over the values, widened to nice ticks.
func LinScale(lo, hi float64, integer bool) Scale {
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) {
		lo, hi = 0, 1
	}
	if hi == lo {
		d := math.Max(1, math.Abs(lo)*0.1)
		lo, hi = lo-d, hi+d
	}
	step := niceStep((hi-lo)/7, integer)
	return Scale{Kind: Linear, Min: math.Floor(lo/step+1e-9) * step, Max: math.Ceil(hi/step-1e-9) * step, Integer: integer}
}

// logScaleOf is a log scale over the positive values, widened to whole
// powers of base.
func LogScaleOf(lo, hi, base float64) Scale {
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
	return Scale{Kind: LogScale, Base: base, Min: math.Pow(base, a-pad), Max: math.Pow(base, b+pad)}
}

// padded widens a linear scale by a fraction of its span on both sides.
func (s Scale) Padded(frac float64) Scale {
	d := (s.Max - s.Min) * frac
	s.Min, s.Max = s.Min-d, s.Max+d
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

func (s Scale) Ticks() []Tick {
	var out []Tick
	switch s.Kind {
	case Linear:
		n := s.nticks
		if n == 0 {
			n = 7
		}
		step := niceStep((s.Max-s.Min)/float64(n), s.Integer)
		for v := math.Ceil(s.Min/step-1e-9) * step; v <= s.Max+step*1e-9; v += step {
			if math.Abs(v) < step*1e-9 {
				v = 0
			}
			out = append(out, Tick{v, NumLabel(v)})
		}
	case LogScale:
		a := int(math.Ceil(math.Log(s.Min)/math.Log(s.Base) - 1e-9))
		b := int(math.Floor(math.Log(s.Max)/math.Log(s.Base) + 1e-9))
		every := 1
		for (b-a)/every > 9 {
			every++
		}
		for e := a; e <= b; e++ {
			if (e-a)%every == 0 {
				out = append(out, Tick{math.Pow(s.Base, float64(e)), powLabel(s.Base, e)})
			}
		}
	case symlog:
		m := math.Max(math.Abs(s.Min), math.Abs(s.Max))
		var pows []float64
		for p := 1.0; p <= m; p *= 2 {
			pows = append(pows, p)
		}
		every := 1
		for len(pows)/every > 5 {
			every++
		}
		out = append(out, Tick{0, "0"})
		for i, p := range pows {
			if i%every != 0 && i != len(pows)-1 {
				continue
			}
			if -p >= s.Min {
				out = append(out, Tick{-p, NumLabel(-p)})
			}
			if p <= s.Max {
				out = append(out, Tick{p, NumLabel(p)})
			}
		}
	}
	return out
}

var superscripts = strings.NewReplacer("-", "⁻", "0", "⁰", "1", "¹", "2", "²", "3", "³", "4", "⁴", "5", "⁵", "6", "⁶", "7", "⁷", "8", "⁸", "9", "⁹")

func powLabel(base float64, e int) string {
	if base == 10 && e >= 0 && e <= 4 {
		return NumLabel(math.Pow(10, float64(e)))
	}
	if base == 2 && e >= 0 && e <= 6 {
		return NumLabel(math.Pow(2, float64(e)))
	}
	if base == 2 && e < 0 && e >= -10 {
		return "1/" + strconv.Itoa(1<<-e)
	}
	return strconv.Itoa(int(base)) + superscripts.Replace(strconv.Itoa(e))
}

// numLabel prints a tick value briefly.
func NumLabel(v float64) string {
	var s string
	if v == math.Trunc(v) && math.Abs(v) < 1e7 {
		s = strconv.FormatInt(int64(v), 10)
	} else {
		s = strconv.FormatFloat(v, 'g', 4, 64)
	}
	return strings.Replace(s, "-", "−", 1)
}

// valueLabel prints a value for a caption (6 significant digits).
func ValueLabel(v float64) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

// Series styles.
const (
	styleLine     = "line"
	StyleDashed   = "dashed"
	StylePoints   = "points"
	StyleStep     = "step"
	StyleLollipop = "lollipop"
)

type Series struct {
	Name   string
	Xs, Ys []float64
	Style  string
	Color  string
	Marker string // circle (default), diamond or square
}

// refLine is a horizontal or vertical reference at a value.
type RefLine struct {
	V     float64
	Label string
}

// chart is an x-y plot with axes, grid, series, reference lines and a
// legend below it.
type Chart struct {
	Title, XLabel, YLabel string
	X, Y                  Scale
	Series                []Series
	Hlines, Vlines        []RefLine
	// xTicks, when set, replace the x scale's ticks.
	xTicks []Tick
	// ph is the plot area's height (0: the figure's default); bare
	// leaves out the x tick labels and the x label (a panel above
	// another with the same x axis).
	Ph   float64
	Bare bool
}

// margins are the chart's top and bottom margins.
func (c *Chart) margins() (top, bottom float64) {
	top, bottom = marginT, marginB
	if c.Title == "" {
		top = 8
	}
	if c.Bare {
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
func (c *Chart) legendRows(w float64) int {
	named := 0
	width := 0.0
	rows := 0
	for _, s := range c.Series {
		if s.Name == "" {
			continue
		}
		named++
		iw := 34 + 6.5*float64(len([]rune(s.Name)))
		if rows == 0 || width+iw > w-marginL-marginR {
			rows++
			width = 0
		}
		width += iw
	}
	return rows
}

// height of the chart area for a plot area of ph pixels.
func (c *Chart) height(ph, w float64) float64 {
	if c.Ph > 0 {
		ph = c.Ph
	}
	top, bottom := c.margins()
	return top + ph + bottom + legendH*float64(c.legendRows(w))
}

// render draws the chart in the box (x0, y0, w, h) of s.
func (c *Chart) render(s *svg, x0, y0, w, h float64) {
	leg := float64(c.legendRows(w))
	px0, px1 := x0+marginL, x0+w-marginR
	top, bottom := c.margins()
	py0, py1 := y0+top, y0+h-bottom-legendH*leg
	c.X.Lo, c.X.Hi = px0, px1
	c.Y.Lo, c.Y.Hi = py1, py0
	if py1-py0 < 100 {
		c.Y.nticks = 3
	}
	if c.Title != "" {
		s.Text(x0+8, y0+18, "start", "ptitle", Esc(c.Title))
	}
	// Grid and ticks.
	s.Raw(`<g class="axes">`)
	yt := c.Y.Ticks()
	for _, t := range yt {
		y := c.Y.Px(t.v)
		s.line(px0, y, px1, y, "grid")
		s.line(px0-5, y, px0, y, "tick")
		s.Text(px0-8, y+4, "end", "tl", Esc(t.Label))
	}
	xt := c.xTicks
	if xt == nil {
		xt = c.X.Ticks()
	}
	for _, t := range xt {
		x := c.X.Px(t.v)
		if x < px0-0.5 || x > px1+0.5 {
			continue
		}
		s.line(x, py0, x, py1, "grid")
		if !c.Bare {
			s.line(x, py1, x, py1+5, "tick")
			s.Text(x, py1+18, "middle", "tl", Esc(t.Label))
		}
	}
	s.Raw(`<rect class="frame" x="%s" y="%s" width="%s" height="%s"/>`, F(px0), F(py0), F(px1-px0), F(py1-py0))
	if !c.Bare {
		s.Text((px0+px1)/2, py1+36, "middle", "al", Esc(c.XLabel))
	}
	s.textV(x0+16, (py0+py1)/2, "al", Esc(c.YLabel))
	s.Raw(`</g>`)
	// Reference lines.
	clip := s.ids.next("c")
	s.Raw(`<clipPath id="%s"><rect x="%s" y="%s" width="%s" height="%s"/></clipPath>`, clip, F(px0-4), F(py0-4), F(px1-px0+8), F(py1-py0+8))
	s.Raw(`<g clip-path="url(#%s)">`, clip)
	for _, r := range c.Hlines {
		y := c.Y.Px(r.V)
		s.line(px0, y, px1, y, "ref")
		if r.Label != "" {
			c.placeLabel(s, r.Label, []labelSpot{{px1 - 4, y - 6, "end"}, {px0 + 4, y - 6, "start"}, {px1 - 4, y + 15, "end"}, {px0 + 4, y + 15, "start"}})
		}
	}
	for _, r := range c.Vlines {
		x := c.X.Px(r.V)
		s.line(x, py0, x, py1, "ref")
		if r.Label != "" {
			c.placeLabel(s, r.Label, []labelSpot{{x + 4, py0 + 13, "start"}, {x - 4, py0 + 13, "end"}, {x + 4, py1 - 5, "start"}, {x - 4, py1 - 5, "end"}})
		}
	}
	for i, sr := range c.Series {
		if sr.Color == "" {
			sr.Color = SeriesColors[i%len(SeriesColors)]
		}
		c.drawSeries(s, sr, py1)
	}
	s.Raw(`</g>`)
	// Legend, below the axis label.
	lx, ly := px0, py1+bottom+6
	for i, sr := range c.Series {
		if sr.Name == "" {
			continue
		}
		if sr.Color == "" {
			sr.Color = SeriesColors[i%len(SeriesColors)]
		}
		iw := 34 + 6.5*float64(len([]rune(sr.Name)))
		if lx+iw > px1 && lx > px0 {
			lx, ly = px0, ly+legendH
		}
		c.swatch(s, sr, lx+12, ly+5)
		s.Text(lx+28, ly+9, "start", "legend", Esc(sr.Name))
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
func (c *Chart) placeLabel(s *svg, label string, spots []labelSpot) {
	w := 6.5*float64(len([]rune(label))) + 4
	px0, px1 := c.X.Lo, c.X.Hi
	py0, py1 := c.Y.Hi, c.Y.Lo
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
		for _, sr := range c.Series {
			for i := range sr.Xs {
				if math.IsNaN(sr.Xs[i]) || math.IsNaN(sr.Ys[i]) || (c.Y.Kind == LogScale && sr.Ys[i] <= 0) || (c.X.Kind == LogScale && sr.Xs[i] <= 0) {
					continue
				}
				x, y := c.X.Px(sr.Xs[i]), c.Y.Px(sr.Ys[i])
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
	s.Text(best.x, best.y, best.anchor, "reflabel", Esc(label))
}

func (c *Chart) swatch(s *svg, sr Series, x, y float64) {
	switch sr.Style {
	case styleLine, StyleStep:
		s.Raw(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"/>`, F(x-10), F(y), F(x+10), F(y), sr.Color)
	case StyleDashed:
		s.Raw(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2" stroke-dasharray="5 3"/>`, F(x-10), F(y), F(x+10), F(y), sr.Color)
	default:
		marker(s, sr.Marker, x, y, sr.Color)
	}
}

func marker(s *svg, kind string, x, y float64, color string) {
	switch kind {
	case "diamond":
		s.Raw(`<path d="M%s %sl4.5 4.5l-4.5 4.5l-4.5 -4.5z" fill="%s" stroke="#fff" stroke-width="0.8"/>`, F(x), F(y-4.5), color)
	case "square":
		s.Raw(`<rect x="%s" y="%s" width="7" height="7" fill="%s" stroke="#fff" stroke-width="0.8"/>`, F(x-3.5), F(y-3.5), color)
	default:
		s.Raw(`<circle cx="%s" cy="%s" r="3.6" fill="%s" stroke="#fff" stroke-width="0.8"/>`, F(x), F(y), color)
	}
}

func (c *Chart) drawSeries(s *svg, sr Series, base float64) {
	ok := func(i int) bool {
		x, y := sr.Xs[i], sr.Ys[i]
		if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
			return false
		}
		return (c.X.Kind != LogScale || x > 0) && (c.Y.Kind != LogScale || y > 0)
	}
	switch sr.Style {
	case styleLine, StyleDashed, StyleStep:
		var d strings.Builder
		pen := false
		for i := range sr.Xs {
			if !ok(i) {
				pen = false
				continue
			}
			x, y := c.X.Px(sr.Xs[i]), c.Y.Px(sr.Ys[i])
			switch {
			case !pen:
				fmt.Fprintf(&d, "M%s %s", F(x), F(y))
			case sr.Style == StyleStep:
				// A step holds its value until the next point.
				fmt.Fprintf(&d, "H%sV%s", F(x), F(y))
			default:
				fmt.Fprintf(&d, "L%s %s", F(x), F(y))
			}
			pen = true
		}
		dash := ""
		if sr.Style == StyleDashed {
			dash = ` stroke-dasharray="6 4"`
		}
		s.Raw(`<path class="series" d="%s" fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s/>`, d.String(), sr.Color, dash)
	case StyleLollipop:
		// Stems from 0 where the axis has it.
		if c.Y.Kind == Linear && c.Y.Min <= 0 && c.Y.Max >= 0 {
			base = c.Y.Px(0)
		}
		for i := range sr.Xs {
			if ok(i) {
				x, y := c.X.Px(sr.Xs[i]), c.Y.Px(sr.Ys[i])
				s.Raw(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="2"/>`, F(x), F(base), F(x), F(y), sr.Color)
				marker(s, sr.Marker, x, y, sr.Color)
			}
		}
	default:
		s.Raw(`<g class="series">`)
		for i := range sr.Xs {
			if ok(i) {
				marker(s, sr.Marker, c.X.Px(sr.Xs[i]), c.Y.Px(sr.Ys[i]), sr.Color)
			}
		}
		s.Raw(`</g>`)
	}
}

// heatmap is a matrix drawn as coloured cells, row 0 at the top.
type Heatmap struct {
	Title, XLabel, YLabel string
	Rows                  [][]float64 // [row][column]
	Row0, col0            int         // the labels of the first row and column
}

// colorbar maps values to colours for one or more heat maps.
type Colorbar struct {
	Label      string
	Vmin, Vmax float64
	Cmap       colormap
}

func (cb Colorbar) color(v float64) (r, g, b, a uint8) {
	c := cb.Cmap.at((v - cb.Vmin) / (cb.Vmax - cb.Vmin))
	return c.R, c.G, c.B, 255
}

// image makes the cells as a picture, each cell k×k pixels so that it
// stays sharp when the browser scales it.
func (h *Heatmap) image(cb Colorbar, pw, ph float64) image.Image {
	nr, nc := len(h.Rows), len(h.Rows[0])
	kx := max(1, min(int(math.Ceil(pw/float64(nc))), 2048/nc))
	ky := max(1, min(int(math.Ceil(ph/float64(nr))), 2048/nr))
	img := image.NewRGBA(image.Rect(0, 0, nc*kx, nr*ky))
	for i, row := range h.Rows {
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
func (h *Heatmap) render(s *svg, cb Colorbar, x0, y0, w, hgt float64) {
	px0, px1 := x0+marginL, x0+w-8
	py0, py1 := y0+marginT, y0+hgt-marginB
	nr, nc := len(h.Rows), len(h.Rows[0])
	s.Text(x0+8, y0+18, "start", "ptitle", Esc(h.Title))
	s.Raw(`<image class="cells" x="%s" y="%s" width="%s" height="%s" preserveAspectRatio="none" href="%s"/>`,
		F(px0), F(py0), F(px1-px0), F(py1-py0), pngHref(h.image(cb, px1-px0, py1-py0)))
	s.Raw(`<rect class="frame" x="%s" y="%s" width="%s" height="%s"/>`, F(px0), F(py0), F(px1-px0), F(py1-py0))
	cw, ch := (px1-px0)/float64(nc), (py1-py0)/float64(nr)
	for _, v := range intTicks(nc, h.col0, max(2, int((px1-px0)/40))) {
		x := px0 + (float64(v-h.col0)+0.5)*cw
		s.line(x, py1, x, py1+5, "tick")
		s.Text(x, py1+18, "middle", "tl", strconv.Itoa(v))
	}
	for _, v := range intTicks(nr, h.Row0, max(2, int((py1-py0)/28))) {
		y := py0 + (float64(v-h.Row0)+0.5)*ch
		s.line(px0-5, y, px0, y, "tick")
		s.Text(px0-8, y+4, "end", "tl", strconv.Itoa(v))
	}
	s.Text((px0+px1)/2, py1+36, "middle", "al", Esc(h.XLabel))
	s.textV(x0+16, (py0+py1)/2, "al", Esc(h.YLabel))
}

// render draws the colour bar in the box (x0, y0, w, h): a vertical
// gradient with ticks and the label beside it.
func (cb Colorbar) render(s *svg, x0, y0, hgt float64) {
	bx, bw := x0+8, 14.0
	by0, by1 := y0+marginT, y0+hgt-marginB
	id := s.ids.next("g")
	s.Raw(`<defs><linearGradient id="%s" x1="0" y1="1" x2="0" y2="0">`, id)
	for i := 0; i <= 20; i++ {
		t := float64(i) / 20
		s.Raw(`<stop offset="%s" stop-color="%s"/>`, F(t), cssColor(cb.Cmap.at(t)))
	}
	s.Raw(`</linearGradient></defs>`)
	s.Raw(`<rect class="colorbar" x="%s" y="%s" width="%s" height="%s" fill="url(#%s)"/>`, F(bx), F(by0), F(bw), F(by1-by0), id)
	sc := Scale{Kind: Linear, Min: cb.Vmin, Max: cb.Vmax, Lo: by1, Hi: by0}
	step := niceStep((cb.Vmax-cb.Vmin)/6, false)
	for v := math.Ceil(cb.Vmin/step-1e-9) * step; v <= cb.Vmax+step*1e-9; v += step {
		if math.Abs(v) < step*1e-9 {
			v = 0
		}
		y := sc.Px(v)
		s.line(bx+bw, y, bx+bw+4, y, "tick")
		s.Text(bx+bw+7, y+4, "start", "tl", Esc(NumLabel(v)))
	}
	s.textV(bx+bw+58, (by0+by1)/2, "al", Esc(cb.Label))
}

// symmetricBar is a diverging colour bar centred on 0 over the values.
func SymmetricBar(label string, rows ...[][]float64) Colorbar {
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
	return Colorbar{Label: label, Vmin: -m, Vmax: m, Cmap: Diverging}
}
