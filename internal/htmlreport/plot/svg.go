package plot

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/png"
	"math"
	"strconv"
	"strings"
)

// svg accumulates the markup of one SVG image. Every text it is given is
// escaped; numbers are printed with two decimals at most.
type svg struct {
	b    strings.Builder
	w, h float64
	ids  *IDs
}

// idGen hands out ids unique within a page (titles, gradients).
// idGen numbers the ids of a page's elements; prefix (the model's) keeps
// the ids of sections drawn apart distinct.
type IDs struct {
	Prefix string
	n      int
}

func (g *IDs) next(prefix string) string {
	g.n++
	return fmt.Sprintf("%s%s%d", g.Prefix, prefix, g.n)
}

func NewSVG(ids *IDs, w, h float64, title, desc string) *svg {
	s := &svg{w: w, h: h, ids: ids}
	tid, did := ids.next("t"), ids.next("d")
	fmt.Fprintf(&s.b, `<svg xmlns="http://www.w3.org/2000/svg" class="plot" viewBox="0 0 %s %s" width="%s" height="%s" style="max-width:%spx" role="img" aria-labelledby="%s %s">`,
		F(w), F(h), F(w), F(h), F(w), tid, did)
	fmt.Fprintf(&s.b, `<title id="%s">%s</title><desc id="%s">%s</desc>`, tid, Esc(title), did, Esc(desc))
	fmt.Fprintf(&s.b, `<rect class="bg" x="0" y="0" width="%s" height="%s"/>`, F(w), F(h))
	return s
}

func (s *svg) String() string { return s.b.String() + "</svg>" }

func (s *svg) Raw(format string, args ...any) { fmt.Fprintf(&s.b, format, args...) }

// f prints a coordinate.
func F(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "0"
	}
	return strconv.FormatFloat(math.Round(x*100)/100, 'f', -1, 64)
}

func Esc(s string) string { return html.EscapeString(s) }

func (s *svg) line(x1, y1, x2, y2 float64, class string) {
	s.Raw(`<line class="%s" x1="%s" y1="%s" x2="%s" y2="%s"/>`, class, F(x1), F(y1), F(x2), F(y2))
}

// text draws a label; anchor is start, middle or end.
func (s *svg) Text(x, y float64, anchor, class, body string) {
	s.Raw(`<text class="%s" x="%s" y="%s" text-anchor="%s">%s</text>`, class, F(x), F(y), anchor, body)
}

// textV draws a label rotated to read bottom to top, centred on (x, y).
func (s *svg) textV(x, y float64, class, body string) {
	s.Raw(`<text class="%s" transform="translate(%s %s) rotate(-90)" text-anchor="middle">%s</text>`, class, F(x), F(y), body)
}

// pngHref encodes an RGBA image as a data: URL.
func pngHref(img image.Image) string {
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic("htmlreport: png: " + err.Error())
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(buf.Bytes())
}

// colormap maps [0, 1] to colours by linear interpolation between stops.
type colormap []color.RGBA

func HexColor(h string) color.RGBA {
	v, _ := strconv.ParseUint(strings.TrimPrefix(h, "#"), 16, 32)
	return color.RGBA{uint8(v >> 16), uint8(v >> 8), uint8(v), 255}
}

func newColormap(hex ...string) colormap {
	c := make(colormap, len(hex))
	for i, h := range hex {
		c[i] = HexColor(h)
	}
	return c
}

// diverging is ColorBrewer's RdBu, blue for negative values and red for
// positive ones, white at the middle.
var Diverging = newColormap("#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7",
	"#fddbc7", "#f4a582", "#d6604d", "#b2182b", "#67001f")

func (c colormap) at(t float64) color.RGBA {
	if math.IsNaN(t) {
		return color.RGBA{200, 200, 200, 255}
	}
	t = math.Max(0, math.Min(1, t))
	x := t * float64(len(c)-1)
	i := int(math.Floor(x))
	if i >= len(c)-1 {
		return c[len(c)-1]
	}
	u := x - float64(i)
	a, b := c[i], c[i+1]
	mix := func(p, q uint8) uint8 { return uint8(math.Round(float64(p) + u*(float64(q)-float64(p)))) }
	return color.RGBA{mix(a.R, b.R), mix(a.G, b.G), mix(a.B, b.B), 255}
}

func cssColor(c color.RGBA) string { return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B) }

// seriesColors draw the lines of one chart (Okabe and Ito's, then Tol's).
var SeriesColors = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#332288", "#882255"}
