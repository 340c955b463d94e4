package schemetest

import (
	"math"
	"math/rand/v2"

	"github.com/onnxpe/onnxpe/graph"
)

// Form is one attention block written in a form the PyTorch exporter
// of the corpus does not produce, so that detectors are held to the math
// and not to the corpus.
type Form struct {
	Name      string
	Heads     int
	HD        int
	Positions string // range | input | cumsum | nonzero
	Rope      string // "" | computed | cache_input | cache_table
	Rotate    string // slice | split | gather_pairs
	Partial   int    // rotary dim when < hd
	Base      float64
	Linear    float64 // linear scaling factor (0: none)
	Scores    string  // matmul | fusedmatmul | einsum
	Alibi     bool
	Symmetric bool
}

// BuildForm makes a one-block model: tokens, projections, the block's
// positional encoding in the spec's form, softmax attention, output.
func BuildForm(s Form) *graph.Model {
	opsets := []graph.Opset{{Domain: "", Version: 17}, {Domain: "com.microsoft", Version: 1}}
	m := graph.NewModel(8, "onnxpe-forms-test", opsets...)
	b := &Builder{G: m.Graph, Rng: rand.New(rand.NewPCG(11, 13))}
	g := b.G
	bs := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	ids := g.AddInput("input_ids", graph.TensorType(graph.Int64, bs))
	mask := g.AddInput("attention_mask", graph.TensorType(graph.Int64, bs))
	D := s.Heads * s.HD
	const V = 50
	x := b.Op("Gather", nil, b.Weight(V, D), ids)
	shapeX := b.Op("Shape", nil, ids)
	seq := b.Op("Gather", []*graph.Attr{graph.IntAttr("axis", 0)}, shapeX, b.Int0(1))

	// Positions [S] (int64).
	var pos *graph.Value
	switch s.Positions {
	case "range":
		pos = b.Op("Range", nil, b.Int0(0), seq, b.Int0(1))
	case "input":
		pin := g.AddInput("position_ids", graph.TensorType(graph.Int64, bs))
		pos = b.Op("Squeeze", nil, b.Op("Slice", nil, pin, b.Ints(0), b.Ints(1), b.Ints(0)), b.Ints(0))
	case "cumsum":
		cs := b.Op("CumSum", nil, mask, b.Int0(1))
		row := b.Op("Squeeze", nil, b.Op("Slice", nil, cs, b.Ints(0), b.Ints(1), b.Ints(0)), b.Ints(0))
		pos = b.Op("Sub", nil, row, b.Int0(1))
	case "nonzero":
		ones := b.Op("ConstantOfShape", []*graph.Attr{graph.TensorAttr("value", MustTensor(graph.Int64, []int64{1}, []int64{1}))}, b.Op("Unsqueeze", nil, seq, b.Ints(0)))
		pos = b.Op("Squeeze", nil, b.Op("NonZero", nil, ones), b.Ints(0))
	}
	proj := func() *graph.Value {
		p := b.Op("MatMul", nil, x, b.Weight(D, D))
		r := b.Op("Reshape", nil, p, b.Ints(0, 0, int64(s.Heads), int64(s.HD)))
		return b.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, r)
	}
	q, k, v := proj(), proj(), proj()
	if s.Rope != "" {
		rd := s.HD
		if s.Partial > 0 {
			rd = s.Partial
		}
		cos, sin := b.CosSin(s, pos, rd)
		q = b.Rotate(s, q, cos, sin, rd)
		k = b.Rotate(s, k, cos, sin, rd)
	}
	var scores *graph.Value
	switch s.Scores {
	case "fusedmatmul":
		n := g.NewNode("FusedMatMul", "com.microsoft", []*graph.Value{q, k}, 1, graph.IntAttr("transB", 1), graph.FloatAttr("alpha", float32(1/math.Sqrt(float64(s.HD)))))
		g.Append(n)
		scores = n.Output(0)
	case "einsum":
		scores = b.Op("Einsum", []*graph.Attr{graph.StringAttr("equation", "bhqd,bhkd->bhqk")}, q, k)
	default:
		scores = b.Op("MatMul", nil, q, b.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 1, 3, 2)}, k))
	}
	if s.Alibi {
		scores = b.Op("Add", nil, scores, b.AlibiBias(s, pos))
	}
	w := b.Op("Softmax", []*graph.Attr{graph.IntAttr("axis", -1)}, scores)
	a := b.Op("MatMul", nil, w, v)
	o := b.Op("Reshape", nil, b.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, a), b.Ints(0, 0, int64(D)))
	out := b.Op("MatMul", nil, o, b.Weight(D, V))
	out.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: V, Known: true}})
	g.AddOutput(out)
	return m
}

// CosSin makes cos and sin [S, rd] (in the layout's order).
func (b *Builder) CosSin(s Form, pos *graph.Value, rd int) (*graph.Value, *graph.Value) {
	inv := make([]float32, rd/2)
	for i := range inv {
		f := math.Pow(s.Base, -2*float64(i)/float64(rd))
		if s.Linear > 0 {
			f /= s.Linear
		}
		inv[i] = float32(f)
	}
	const maxPos = 64
	// expand per-pair frequencies to the rd columns of the layout.
	expand := func(vals []float32) []float32 {
		out := make([]float32, rd)
		for i, f := range vals {
			if s.Rotate == "gather_pairs" {
				out[2*i], out[2*i+1] = f, f
			} else {
				out[i], out[i+rd/2] = f, f
			}
		}
		return out
	}
	switch s.Rope {
	case "cache_input", "cache_table":
		var cosC, sinC *graph.Value
		if s.Rope == "cache_input" {
			cosC = b.G.AddInput("cos_cache", graph.TensorType(graph.Float, graph.Dims(maxPos, int64(rd))))
			sinC = b.G.AddInput("sin_cache", graph.TensorType(graph.Float, graph.Dims(maxPos, int64(rd))))
		} else {
			cv, sv := make([]float32, maxPos*rd), make([]float32, maxPos*rd)
			cols := expand(inv)
			for p := 0; p < maxPos; p++ {
				for c, f := range cols {
					cv[p*rd+c] = float32(math.Cos(float64(p) * float64(f)))
					sv[p*rd+c] = float32(math.Sin(float64(p) * float64(f)))
				}
			}
			cosC, sinC = b.Floats([]int64{maxPos, int64(rd)}, cv), b.Floats([]int64{maxPos, int64(rd)}, sv)
		}
		return b.Op("Gather", nil, cosC, pos), b.Op("Gather", nil, sinC, pos)
	}
	pf := b.Op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Float))}, pos)
	ang := b.Op("Mul", nil, b.Op("Unsqueeze", nil, pf, b.Ints(1)), b.Floats([]int64{1, int64(rd)}, expand(inv)))
	return b.Op("Cos", nil, ang), b.Op("Sin", nil, ang)
}

// Rotate applies x·cos + rot(x)·sin on the first rd dims of x [B,H,S,hd].
func (b *Builder) Rotate(s Form, x, cos, sin *graph.Value, rd int) *graph.Value {
	hd := s.HD
	var xr, pass *graph.Value
	switch {
	case rd == hd:
		xr = x
	case s.Rotate == "split":
		outs := b.G.Op("Split", []*graph.Value{x, b.Ints(int64(rd), int64(hd-rd))}, 2, graph.IntAttr("axis", -1))
		xr, pass = outs[0], outs[1]
	default:
		xr = b.Op("Slice", nil, x, b.Ints(0), b.Ints(int64(rd)), b.Ints(-1))
		pass = b.Op("Slice", nil, x, b.Ints(int64(rd)), b.Ints(math.MaxInt64), b.Ints(-1))
	}
	var rot *graph.Value
	switch s.Rotate {
	case "split":
		h := b.G.Op("Split", []*graph.Value{xr, b.Ints(int64(rd/2), int64(rd/2))}, 2, graph.IntAttr("axis", -1))
		rot = b.Op("Concat", []*graph.Attr{graph.IntAttr("axis", -1)}, b.Op("Neg", nil, h[1]), h[0])
	case "gather_pairs":
		var ev, od []int64
		for i := 0; i < rd/2; i++ {
			ev, od = append(ev, int64(2*i)), append(od, int64(2*i+1))
		}
		e := b.Op("Gather", []*graph.Attr{graph.IntAttr("axis", -1)}, xr, b.Ints(ev...))
		o := b.Op("Gather", []*graph.Attr{graph.IntAttr("axis", -1)}, xr, b.Ints(od...))
		st := b.Op("Concat", []*graph.Attr{graph.IntAttr("axis", -1)}, b.Op("Unsqueeze", nil, b.Op("Neg", nil, o), b.Ints(-1)), b.Op("Unsqueeze", nil, e, b.Ints(-1)))
		rot = b.Op("Reshape", nil, st, b.Ints(0, 0, 0, int64(rd)))
	default:
		a := b.Op("Slice", nil, xr, b.Ints(0), b.Ints(int64(rd/2)), b.Ints(-1))
		c := b.Op("Slice", nil, xr, b.Ints(int64(rd/2)), b.Ints(int64(rd)), b.Ints(-1))
		rot = b.Op("Concat", []*graph.Attr{graph.IntAttr("axis", -1)}, b.Op("Neg", nil, c), a)
	}
	y := b.Op("Add", nil, b.Op("Mul", nil, xr, cos), b.Op("Mul", nil, sin, rot))
	if pass != nil {
		y = b.Op("Concat", []*graph.Attr{graph.IntAttr("axis", -1)}, y, pass)
	}
	return y
}

// AlibiBias makes slope_h·(j - i) (causal rows) or -slope_h·|i - j|.
func (b *Builder) AlibiBias(s Form, pos *graph.Value) *graph.Value {
	slopes := make([]float32, s.Heads)
	for h := range slopes {
		slopes[h] = float32(math.Pow(2, -8*float64(h+1)/float64(s.Heads)))
	}
	pf := b.Op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Float))}, pos)
	rel := b.Op("Sub", nil, b.Op("Unsqueeze", nil, pf, b.Ints(0)), b.Op("Unsqueeze", nil, pf, b.Ints(1))) // j - i
	if s.Symmetric {
		rel = b.Op("Neg", nil, b.Op("Abs", nil, rel))
	}
	return b.Op("Mul", nil, b.Floats([]int64{int64(s.Heads), 1, 1}, slopes), rel)
}
