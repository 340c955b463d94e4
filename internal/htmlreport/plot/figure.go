package plot

import (
	"math"
	"strings"
)

// figure is one plot of the report: an SVG image and its caption.
type Figure struct {
	// Kind names what it shows (layer_map, rope_cos_sin, ...): tests and
	// the page's anchors use it.
	Kind    string
	Caption string
	SVG     string
}

const figW = 680.0

// heatmapFigure draws heat maps side by side with one colour bar.
func HeatmapFigure(ids *IDs, kind, title, desc, caption string, cb Colorbar, panels ...*Heatmap) *Figure {
	return HeatmapFigureW(ids, figW, kind, title, desc, caption, cb, panels...)
}

// heatmapFigureW is heatmapFigure at width w.
func HeatmapFigureW(ids *IDs, w float64, kind, title, desc, caption string, cb Colorbar, panels ...*Heatmap) *Figure {
	nr := len(panels[0].Rows)
	ph := math.Max(120, math.Min(300, float64(nr)*6))
	h := marginT + ph + marginB
	s := NewSVG(ids, w, h, title, desc)
	cbW := 96.0
	pw := (w - cbW) / float64(len(panels))
	for i, hm := range panels {
		hm.render(s, cb, float64(i)*pw, 0, pw, h)
	}
	cb.render(s, w-cbW, 0, h)
	return &Figure{Kind: kind, Caption: caption, SVG: s.String()}
}

// stackFigure draws charts one above the other.
func StackFigure(ids *IDs, kind, title, desc, caption string, charts ...*Chart) *Figure {
	const ph = 190.0
	h := 0.0
	for _, c := range charts {
		h += c.height(ph, figW)
	}
	s := NewSVG(ids, figW, h, title, desc)
	y := 0.0
	for _, c := range charts {
		ch := c.height(ph, figW)
		c.render(s, 0, y, figW, ch)
		y += ch
	}
	return &Figure{Kind: kind, Caption: caption, SVG: s.String()}
}

func JoinValues(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = ValueLabel(x)
	}
	return strings.Join(parts, ", ")
}

// relAxis is the x axis of relative positions key − query.
func RelAxis(maxRel int) Scale {
	return Scale{Kind: symlog, Min: float64(-maxRel), Max: float64(maxRel), Integer: true}
}

const MaxHeadLines = 8
