package alibi

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/scorebias"
)

// alibiData is what the alibi templates read.
type alibiData struct {
	Doc    []string
	Heads  int
	Slopes *emit.Table
	From   string
	// Positions: key_index (slope·j), key_offset_from_end (slope·(j -
	// (kLen-1))), relative (slope·(j - i)) or symmetric (-slope·|i - j|),
	// with query i at position kLen-qLen+i.
	Positions string
	// Type is the element type the slopes, positions and products are
	// rounded to (the model's bias is cast to float32 afterwards).
	Type         string
	MaxPositions int
	G            []*scorebias.BiasCase
}

func EmitALiBi(g *emit.Gen, f *passes.Finding, suffix string) (*emit.Part, error) {
	ev, _ := f.Evidence.(*Evidence)
	p, _ := f.Params.(*Params)
	if ev == nil || p == nil || ev.Bias == "" {
		return nil, emit.Skip("no ALiBi evidence")
	}
	d := &alibiData{Heads: p.NumHeads, Type: "float32"}
	switch {
	case p.Symmetric:
		d.Positions = "symmetric"
	case p.Positions == "key_offset_from_end" || p.Positions == "relative":
		d.Positions = p.Positions
	case p.Positions == "key_index" || p.Positions == "attention_mask_cumsum":
		d.Positions = "key_index"
	default:
		return nil, emit.Skip("ALiBi positions %q", p.Positions)
	}
	d.From = "measured from the bias " + ev.Bias
	if ev.SlopesConst != "" {
		d.From = "the constant " + ev.SlopesConst
	}
	d.Slopes = &emit.Table{Name: "ALiBiSlopes" + suffix, Type: "float64", Vals: p.Slopes, From: d.From}
	if p.MaxPositions != nil {
		d.MaxPositions = *p.MaxPositions
	}
	_, dt, err := probe.BoundShape(g.Ctx, ev.Bias, 4)
	if err == nil && dt != graph.Float {
		return nil, emit.Skip("the bias is %v", dt)
	}
	n := g.Opts.MaxPositions
	if d.MaxPositions > 0 {
		n = d.MaxPositions
	}
	if f := g.FixedLen(ev.Bias, 1); f > 0 {
		n = min(n, f)
	}
	small := min(n, 16)
	c1, err := scorebias.BiasGolden(g, ev.Bias, small, small, d.Heads, fmt.Sprintf("goldenALiBi%s_%d", suffix, small))
	if err != nil {
		return nil, fmt.Errorf("golden vectors: %w", err)
	}
	d.G = append(d.G, c1)
	if n > small {
		got, err := emit.Longest(n, small, func(n int) error {
			c, err := scorebias.BiasGolden(g, ev.Bias, n, 2, d.Heads, fmt.Sprintf("goldenALiBi%s_%d", suffix, n))
			if err == nil {
				d.G = append(d.G, c)
			}
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("golden vectors: %w", err)
		}
		n = got
	}
	// The arithmetic: slope times position, rounded to the type the model
	// multiplies in (float32, or a half type cast up afterwards), the one
	// that gives the model's values.
	d.Type = ""
	for _, t := range []graph.DataType{graph.Float, graph.Float16, graph.BFloat16} {
		if alibiReproduces(d, t) {
			d.Type = emit.TypeName(t)
			break
		}
	}
	if d.Type == "" {
		return nil, emit.Skip("the bias is not the slopes times the positions in float32, float16 or bfloat16 (the model computes it otherwise)")
	}
	pt := &emit.Part{Tmpl: "alibi", Data: d, Half: d.Type == "float16", BHalf: d.Type == "bfloat16"}
	golden := 0
	for _, c := range d.G {
		golden += len(c.Want.Vals)
	}
	d.Doc = []string{fmt.Sprintf("ALiBi of layers %s: %d heads, slopes from %s, bias %s.", emit.LayerList(f.Layers), d.Heads, d.From, alibiForm(d.Positions))}
	pt.Emitted = emit.Emitted{Functions: []string{"ALiBiBias" + suffix}, Form: "computed", Positions: n, MaxPositions: d.MaxPositions, Golden: golden}
	return pt, nil
}

// alibiReproduces reports whether the golden vectors are the slopes times
// the positions rounded to t (both factors too): the arithmetic the
// templates write.
func alibiReproduces(d *alibiData, t graph.DataType) bool {
	for _, c := range d.G {
		w := 0
		for h := 0; h < d.Heads; h++ {
			m := emit.RoundTo(t, d.Slopes.Vals[h])
			for i := 0; i < c.Q; i++ {
				qi := c.K - c.Q + i
				for _, j := range c.Keys {
					want := c.Want.Vals[w]
					w++
					if math.IsNaN(want) {
						continue
					}
					var pos float64
					switch d.Positions {
					case "key_index":
						pos = float64(j)
					case "key_offset_from_end":
						pos = float64(j - (c.K - 1))
					case "relative":
						pos = float64(j - qi)
					default:
						pos = -math.Abs(float64(qi - j))
					}
					got := emit.RoundTo(graph.Float, emit.RoundTo(t, m*emit.RoundTo(t, pos)))
					if math.Abs(got-want) > 1e-6*math.Max(1, math.Abs(want)) {
						return false
					}
				}
			}
		}
	}
	return true
}

func alibiForm(pos string) string {
	switch pos {
	case "key_index":
		return "slope·j for key j (the model counts key positions from its attention mask: no padding here)"
	case "key_offset_from_end":
		return "slope·(j - (kLen-1)) for key j (0 at the last key)"
	case "relative":
		return "slope·(j - i) for query i and key j"
	}
	return "-slope·|i - j| for query i and key j"
}
