package audit_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
)

// formSpec is one attention block written in a form the PyTorch exporter
// of the corpus does not produce, so that detectors are held to the math
// and not to the corpus.
type formSpec struct {
	name      string
	heads     int
	hd        int
	positions string // range | input | cumsum | nonzero
	rope      string // "" | computed | cache_input | cache_table
	rotate    string // slice | split | gather_pairs
	partial   int    // rotary dim when < hd
	base      float64
	linear    float64 // linear scaling factor (0: none)
	scores    string  // matmul | fusedmatmul | einsum
	alibi     bool
	symmetric bool
}

type fb struct {
	g   *graph.Graph
	rng *rand.Rand
}

func (b *fb) op(op string, attrs []*graph.Attr, in ...*graph.Value) *graph.Value {
	return b.g.Op(op, in, 1, attrs...)[0]
}

func (b *fb) ints(v ...int64) *graph.Value {
	t, _ := graph.NewTensor("i", graph.Int64, []int64{int64(len(v))}, v)
	return b.g.AddInitializer(t)
}

func (b *fb) int0(v int64) *graph.Value {
	t, _ := graph.NewTensor("s", graph.Int64, nil, []int64{v})
	return b.g.AddInitializer(t)
}

func (b *fb) floats(dims []int64, v []float32) *graph.Value {
	t, err := graph.NewTensor("f", graph.Float, dims, v)
	if err != nil {
		panic(err)
	}
	return b.g.AddInitializer(t)
}

func (b *fb) weight(r, c int) *graph.Value {
	v := make([]float32, r*c)
	for i := range v {
		v[i] = float32(b.rng.NormFloat64() / math.Sqrt(float64(r)))
	}
	return b.floats([]int64{int64(r), int64(c)}, v)
}

// buildForm makes a one-block model: tokens, projections, the block's
// positional encoding in the spec's form, softmax attention, output.
func buildForm(s formSpec) *graph.Model {
	opsets := []graph.Opset{{Domain: "", Version: 17}, {Domain: "com.microsoft", Version: 1}}
	m := graph.NewModel(8, "onnxpe-forms-test", opsets...)
	b := &fb{g: m.Graph, rng: rand.New(rand.NewPCG(11, 13))}
	g := b.g
	bs := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	ids := g.AddInput("input_ids", graph.TensorType(graph.Int64, bs))
	mask := g.AddInput("attention_mask", graph.TensorType(graph.Int64, bs))
	D := s.heads * s.hd
	const V = 50
	x := b.op("Gather", nil, b.weight(V, D), ids)
	shapeX := b.op("Shape", nil, ids)
	seq := b.op("Gather", []*graph.Attr{graph.IntAttr("axis", 0)}, shapeX, b.int0(1))

	// Positions [S] (int64).
	var pos *graph.Value
	switch s.positions {
	case "range":
		pos = b.op("Range", nil, b.int0(0), seq, b.int0(1))
	case "input":
		pin := g.AddInput("position_ids", graph.TensorType(graph.Int64, bs))
		pos = b.op("Squeeze", nil, b.op("Slice", nil, pin, b.ints(0), b.ints(1), b.ints(0)), b.ints(0))
	case "cumsum":
		cs := b.op("CumSum", nil, mask, b.int0(1))
		row := b.op("Squeeze", nil, b.op("Slice", nil, cs, b.ints(0), b.ints(1), b.ints(0)), b.ints(0))
		pos = b.op("Sub", nil, row, b.int0(1))
	case "nonzero":
		ones := b.op("ConstantOfShape", []*graph.Attr{graph.TensorAttr("value", mustTensor(graph.Int64, []int64{1}, []int64{1}))}, b.op("Unsqueeze", nil, seq, b.ints(0)))
		pos = b.op("Squeeze", nil, b.op("NonZero", nil, ones), b.ints(0))
	}
	proj := func() *graph.Value {
		p := b.op("MatMul", nil, x, b.weight(D, D))
		r := b.op("Reshape", nil, p, b.ints(0, 0, int64(s.heads), int64(s.hd)))
		return b.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, r)
	}
	q, k, v := proj(), proj(), proj()
	if s.rope != "" {
		rd := s.hd
		if s.partial > 0 {
			rd = s.partial
		}
		cos, sin := b.cosSin(s, pos, rd)
		q = b.rotate(s, q, cos, sin, rd)
		k = b.rotate(s, k, cos, sin, rd)
	}
	var scores *graph.Value
	switch s.scores {
	case "fusedmatmul":
		n := g.NewNode("FusedMatMul", "com.microsoft", []*graph.Value{q, k}, 1, graph.IntAttr("transB", 1), graph.FloatAttr("alpha", float32(1/math.Sqrt(float64(s.hd)))))
		g.Append(n)
		scores = n.Output(0)
	case "einsum":
		scores = b.op("Einsum", []*graph.Attr{graph.StringAttr("equation", "bhqd,bhkd->bhqk")}, q, k)
	default:
		scores = b.op("MatMul", nil, q, b.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 1, 3, 2)}, k))
	}
	if s.alibi {
		scores = b.op("Add", nil, scores, b.alibiBias(s, pos))
	}
	w := b.op("Softmax", []*graph.Attr{graph.IntAttr("axis", -1)}, scores)
	a := b.op("MatMul", nil, w, v)
	o := b.op("Reshape", nil, b.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, a), b.ints(0, 0, int64(D)))
	out := b.op("MatMul", nil, o, b.weight(D, V))
	out.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: V, Known: true}})
	g.AddOutput(out)
	return m
}

func mustTensor(dt graph.DataType, dims []int64, v any) *graph.Tensor {
	t, err := graph.NewTensor("t", dt, dims, v)
	if err != nil {
		panic(err)
	}
	return t
}

// cosSin makes cos and sin [S, rd] (in the layout's order).
func (b *fb) cosSin(s formSpec, pos *graph.Value, rd int) (*graph.Value, *graph.Value) {
	inv := make([]float32, rd/2)
	for i := range inv {
		f := math.Pow(s.base, -2*float64(i)/float64(rd))
		if s.linear > 0 {
			f /= s.linear
		}
		inv[i] = float32(f)
	}
	const maxPos = 64
	// expand per-pair frequencies to the rd columns of the layout.
	expand := func(vals []float32) []float32 {
		out := make([]float32, rd)
		for i, f := range vals {
			if s.rotate == "gather_pairs" {
				out[2*i], out[2*i+1] = f, f
			} else {
				out[i], out[i+rd/2] = f, f
			}
		}
		return out
	}
	switch s.rope {
	case "cache_input", "cache_table":
		var cosC, sinC *graph.Value
		if s.rope == "cache_input" {
			cosC = b.g.AddInput("cos_cache", graph.TensorType(graph.Float, graph.Dims(maxPos, int64(rd))))
			sinC = b.g.AddInput("sin_cache", graph.TensorType(graph.Float, graph.Dims(maxPos, int64(rd))))
		} else {
			cv, sv := make([]float32, maxPos*rd), make([]float32, maxPos*rd)
			cols := expand(inv)
			for p := 0; p < maxPos; p++ {
				for c, f := range cols {
					cv[p*rd+c] = float32(math.Cos(float64(p) * float64(f)))
					sv[p*rd+c] = float32(math.Sin(float64(p) * float64(f)))
				}
			}
			cosC, sinC = b.floats([]int64{maxPos, int64(rd)}, cv), b.floats([]int64{maxPos, int64(rd)}, sv)
		}
		return b.op("Gather", nil, cosC, pos), b.op("Gather", nil, sinC, pos)
	}
	pf := b.op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Float))}, pos)
	ang := b.op("Mul", nil, b.op("Unsqueeze", nil, pf, b.ints(1)), b.floats([]int64{1, int64(rd)}, expand(inv)))
	return b.op("Cos", nil, ang), b.op("Sin", nil, ang)
}

// rotate applies x·cos + rot(x)·sin on the first rd dims of x [B,H,S,hd].
func (b *fb) rotate(s formSpec, x, cos, sin *graph.Value, rd int) *graph.Value {
	hd := s.hd
	var xr, pass *graph.Value
	switch {
	case rd == hd:
		xr = x
	case s.rotate == "split":
		outs := b.g.Op("Split", []*graph.Value{x, b.ints(int64(rd), int64(hd-rd))}, 2, graph.IntAttr("axis", -1))
		xr, pass = outs[0], outs[1]
	default:
		xr = b.op("Slice", nil, x, b.ints(0), b.ints(int64(rd)), b.ints(-1))
		pass = b.op("Slice", nil, x, b.ints(int64(rd)), b.ints(math.MaxInt64), b.ints(-1))
	}
	var rot *graph.Value
	switch s.rotate {
	case "split":
		h := b.g.Op("Split", []*graph.Value{xr, b.ints(int64(rd/2), int64(rd/2))}, 2, graph.IntAttr("axis", -1))
		rot = b.op("Concat", []*graph.Attr{graph.IntAttr("axis", -1)}, b.op("Neg", nil, h[1]), h[0])
	case "gather_pairs":
		var ev, od []int64
		for i := 0; i < rd/2; i++ {
			ev, od = append(ev, int64(2*i)), append(od, int64(2*i+1))
		}
		e := b.op("Gather", []*graph.Attr{graph.IntAttr("axis", -1)}, xr, b.ints(ev...))
		o := b.op("Gather", []*graph.Attr{graph.IntAttr("axis", -1)}, xr, b.ints(od...))
		st := b.op("Concat", []*graph.Attr{graph.IntAttr("axis", -1)}, b.op("Unsqueeze", nil, b.op("Neg", nil, o), b.ints(-1)), b.op("Unsqueeze", nil, e, b.ints(-1)))
		rot = b.op("Reshape", nil, st, b.ints(0, 0, 0, int64(rd)))
	default:
		a := b.op("Slice", nil, xr, b.ints(0), b.ints(int64(rd/2)), b.ints(-1))
		c := b.op("Slice", nil, xr, b.ints(int64(rd/2)), b.ints(int64(rd)), b.ints(-1))
		rot = b.op("Concat", []*graph.Attr{graph.IntAttr("axis", -1)}, b.op("Neg", nil, c), a)
	}
	y := b.op("Add", nil, b.op("Mul", nil, xr, cos), b.op("Mul", nil, sin, rot))
	if pass != nil {
		y = b.op("Concat", []*graph.Attr{graph.IntAttr("axis", -1)}, y, pass)
	}
	return y
}

// alibiBias makes slope_h·(j - i) (causal rows) or -slope_h·|i - j|.
func (b *fb) alibiBias(s formSpec, pos *graph.Value) *graph.Value {
	slopes := make([]float32, s.heads)
	for h := range slopes {
		slopes[h] = float32(math.Pow(2, -8*float64(h+1)/float64(s.heads)))
	}
	pf := b.op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Float))}, pos)
	rel := b.op("Sub", nil, b.op("Unsqueeze", nil, pf, b.ints(0)), b.op("Unsqueeze", nil, pf, b.ints(1))) // j - i
	if s.symmetric {
		rel = b.op("Neg", nil, b.op("Abs", nil, rel))
	}
	return b.op("Mul", nil, b.floats([]int64{int64(s.heads), 1, 1}, slopes), rel)
}

func TestDetectorsOnGoBuiltForms(t *testing.T) {
	rope := func(name, positions, form, rotate, scores string, partial int) formSpec {
		return formSpec{name: name, heads: 2, hd: 16, positions: positions, rope: form, rotate: rotate, scores: scores, partial: partial, base: 10000}
	}
	cases := []struct {
		spec formSpec
		want map[string]any // rope or alibi params that must match
	}{
		{rope("split_range_fused", "range", "computed", "split", "fusedmatmul", 0), map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 16, "head_dim": 16, "scaling": "none", "num_heads": 2}},
		{rope("split_partial_einsum", "range", "computed", "split", "einsum", 8), map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 8, "head_dim": 16}},
		{rope("pairs_by_gather_nonzero", "nonzero", "computed", "gather_pairs", "matmul", 0), map[string]any{"layout": "interleaved", "base": 10000.0, "rotary_dim": 16}},
		{rope("slice_cumsum_table", "cumsum", "cache_table", "slice", "matmul", 0), map[string]any{"layout": "half_split", "base": 10000.0, "max_positions": 64}},
		{rope("caches_as_inputs", "input", "cache_input", "slice", "matmul", 0), map[string]any{"layout": "half_split", "base": nil, "scaling": nil, "max_positions": 64}},
		{func() formSpec {
			s := rope("linear_base_5e5", "input", "computed", "slice", "einsum", 0)
			s.base, s.linear = 500000, 4
			return s
		}(), map[string]any{"base": 500000.0, "scaling": "linear", "factor": 4.0}},
		{formSpec{name: "alibi_cumsum", heads: 4, hd: 8, positions: "cumsum", scores: "matmul", alibi: true}, map[string]any{"num_heads": 4, "slopes": []any{0.25, 0.0625, 0.015625, 0.00390625}, "symmetric": false, "positions": "attention_mask_cumsum"}},
		{formSpec{name: "alibi_symmetric_einsum", heads: 4, hd: 8, positions: "range", scores: "einsum", alibi: true, symmetric: true}, map[string]any{"num_heads": 4, "symmetric": true, "positions": "relative"}},
		{formSpec{name: "nope_fusedmatmul", heads: 2, hd: 8, positions: "range", scores: "fusedmatmul"}, nil},
	}
	s := schema(t)
	for _, c := range cases {
		t.Run(c.spec.name, func(t *testing.T) {
			m := buildForm(c.spec)
			r, ctx, err := audit.AuditModel(m, c.spec.name, passes.Options{Trace: true})
			if err != nil {
				t.Fatal(err)
			}
			validate(t, s, r)
			want := "nope"
			switch {
			case c.spec.rope != "":
				want = "rope"
			case c.spec.alibi:
				want = "alibi"
			}
			if len(r.Schemes) != 1 || r.Schemes[0] != want || len(r.Layers) != 1 {
				t.Fatalf("schemes %v, layers %v; want one %s layer (trace %v)", r.Schemes, r.Layers, want, ctx.Trace())
			}
			got := jsonParams(r.Findings[0])
			for k, w := range c.want {
				if !closeEnough(w, got[k]) && !(w == nil && got[k] == nil) {
					t.Errorf("%s = %v, want %v (params %v)", k, got[k], w, got)
				}
			}
		})
	}
}
