package schemetest

import (
	"math"
	"math/rand/v2"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/x448/float16"
)

// Env is what a variant's builder sees of the block it writes into.
type Env struct {
	*Builder
	Opset     int
	Heads, HD int
	D         int
	IDs, Mask *graph.Value
	Seq       *graph.Value // scalar int64: this call's sequence length
	PastKey   *graph.Value // past keys [batch, heads, past, hd], made on demand
	PastVal   *graph.Value
}

// F32 is a constant float vector.
func (e *Env) F32(v ...float32) *graph.Value {
	return e.Floats([]int64{int64(len(v))}, v)
}

// F0 is a constant float scalar.
func (e *Env) F0(v float32) *graph.Value {
	return e.Floats(nil, []float32{v})
}

// ToFloat casts v to float.
func (e *Env) ToFloat(v *graph.Value) *graph.Value {
	return e.Op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Float))}, v)
}

// ToInt casts v to int64.
func (e *Env) ToInt(v *graph.Value) *graph.Value {
	return e.Op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Int64))}, v)
}

// Axis is the attribute axis = a.
func (e *Env) Axis(a int64) []*graph.Attr { return []*graph.Attr{graph.IntAttr("axis", a)} }

// PastLen is the length of the KV cache read from the past keys' shape
// (Shape -> Gather, a scalar), the way exporters write past_key_values_length.
func (e *Env) PastLen() *graph.Value {
	if e.PastKey == nil {
		dims := []graph.Dim{{Param: "batch"}, {Value: int64(e.Heads), Known: true}, {Param: "past"}, {Value: int64(e.HD), Known: true}}
		e.PastKey = e.G.AddInput("past_key", graph.TensorType(graph.Float, dims))
		e.PastVal = e.G.AddInput("past_value", graph.TensorType(graph.Float, dims))
	}
	return e.Op("Gather", e.Axis(0), e.Op("Shape", nil, e.PastKey), e.Int0(2))
}

// RangeS is Range(0, S) as int64.
func (e *Env) RangeS() *graph.Value { return e.Op("Range", nil, e.Int0(0), e.Seq, e.Int0(1)) }

// ExporterForm is one variant: the pieces it writes, the scheme and params
// the math gives.
type ExporterForm struct {
	Name  string
	Opset int // 0: 17
	Heads int
	HD    int
	// KVHeads: key/value heads (GQA, repeated with Expand after the
	// rotation); 0 means heads.
	KVHeads int
	// Abs returns x [B,S,D] with an absolute encoding added.
	Abs func(e *Env, x *graph.Value) *graph.Value
	// Rope rotates q and k [B,H,S,hd].
	Rope func(e *Env, q, k *graph.Value) (*graph.Value, *graph.Value)
	// Bias turns scores [B,H,S,T] into the Softmax's input.
	Bias func(e *Env, scores *graph.Value) *graph.Value
	// Cache: the block reads a KV Cache (past keys and values before the
	// new ones) though its rope does not ask for the Cache's length.
	Cache  bool
	Scheme string
	Want   map[string]any
}

// BuildExporterForm makes the one-block model of a variant.
func BuildExporterForm(f ExporterForm) *graph.Model {
	opset := f.Opset
	if opset == 0 {
		opset = 17
	}
	m := graph.NewModel(8, "onnxpe-exporter-forms-test", graph.Opset{Domain: "", Version: int64(opset)})
	e := &Env{Builder: &Builder{G: m.Graph, Rng: rand.New(rand.NewPCG(5, 7))}, Opset: opset, Heads: f.Heads, HD: f.HD, D: f.Heads * f.HD}
	g := e.G
	bs := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	e.IDs = g.AddInput("input_ids", graph.TensorType(graph.Int64, bs))
	e.Mask = g.AddInput("attention_mask", graph.TensorType(graph.Int64, bs))
	const V = 50
	x := e.Op("Gather", nil, e.Weight(V, e.D), e.IDs)
	e.Seq = e.Op("Gather", e.Axis(0), e.Op("Shape", nil, e.IDs), e.Int0(1))
	if f.Abs != nil {
		x = f.Abs(e, x)
	}
	kvh := f.KVHeads
	if kvh == 0 {
		kvh = f.Heads
	}
	proj := func(h int) *graph.Value {
		p := e.Op("MatMul", nil, x, e.Weight(e.D, h*e.HD))
		r := e.Op("Reshape", nil, p, e.Ints(0, 0, int64(h), int64(e.HD)))
		return e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, r)
	}
	q, k, v := proj(e.Heads), proj(kvh), proj(kvh)
	if f.Rope != nil {
		q, k = f.Rope(e, q, k)
	}
	if f.Cache {
		e.PastLen()
	}
	if e.PastKey != nil {
		k = e.Op("Concat", e.Axis(2), e.PastKey, k)
		v = e.Op("Concat", e.Axis(2), e.PastVal, v)
	}
	if kvh != e.Heads {
		// repeat_kv: [B,kv,1,T,d] expanded to [B,kv,rep,T,d], reshaped.
		rep := func(x *graph.Value) *graph.Value {
			ex := e.Op("Expand", nil, e.Op("Unsqueeze", nil, x, e.Ints(2)), e.Ints(1, 1, int64(e.Heads/kvh), 1, 1))
			return e.Op("Reshape", nil, ex, e.Ints(0, int64(e.Heads), -1, int64(e.HD)))
		}
		k, v = rep(k), rep(v)
	}
	scores := e.Op("MatMul", nil, q, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 1, 3, 2)}, k))
	scores = e.Op("Mul", nil, scores, e.F0(float32(1/math.Sqrt(float64(e.HD)))))
	if f.Bias != nil {
		scores = f.Bias(e, scores)
	}
	w := e.Op("Softmax", e.Axis(-1), scores)
	a := e.Op("MatMul", nil, w, v)
	o := e.Op("Reshape", nil, e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, a), e.Ints(0, 0, int64(e.D)))
	out := e.Op("MatMul", nil, o, e.Weight(e.D, V))
	out.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: V, Known: true}})
	g.AddOutput(out)
	return m
}

// InvFreq is base^(-2i/rd), i < rd/2.
func InvFreq(base float64, rd int) []float32 {
	inv := make([]float32, rd/2)
	for i := range inv {
		inv[i] = float32(math.Pow(base, -2*float64(i)/float64(rd)))
	}
	return inv
}

// PosHFPadding is HF's position_ids for left padding:
// (cumsum(mask, -1) - 1).masked_fill(mask == 0, 1), [B, S].
func PosHFPadding(e *Env) *graph.Value {
	p := e.Op("Sub", nil, e.Op("CumSum", nil, e.Mask, e.Int0(-1)), e.Int0(1))
	pad := e.Op("Equal", nil, e.Mask, e.Int0(0))
	return e.Op("Where", nil, pad, e.Int0(1), p)
}

// PosPastRange is Range(past, past + S).
func PosPastRange(e *Env) *graph.Value {
	pl := e.PastLen()
	return e.Op("Range", nil, pl, e.Op("Add", nil, pl, e.Seq), e.Int0(1))
}

// PosNonZero is NonZero(ones(S)) squeezed: torch.nonzero-based arange.
func PosNonZero(e *Env) *graph.Value {
	ones := e.Op("ConstantOfShape", []*graph.Attr{graph.TensorAttr("value", MustTensor(graph.Int64, []int64{1}, []int64{1}))}, e.Op("Unsqueeze", nil, e.Seq, e.Ints(0)))
	return e.Op("Squeeze", nil, e.Op("NonZero", nil, ones), e.Ints(0))
}

// FreqsMatMul is positions [S] as [S,1] times inv_freq [1, rd/2] by MatMul,
// inv_freq computed in the graph by how: "reciprocal" 1/base^(arange(0,rd,2)/rd)
// via Reciprocal, "div" via Div(1, ·), "table" a stored [1, rd/2].
func FreqsMatMul(e *Env, pos *graph.Value, base float64, rd int, how string) *graph.Value {
	var inv *graph.Value
	switch how {
	case "table":
		inv = e.Floats([]int64{1, int64(rd / 2)}, InvFreq(base, rd))
	default:
		ar := e.ToFloat(e.Op("Range", nil, e.Int0(0), e.Int0(int64(rd)), e.Int0(2)))
		p := e.Op("Pow", nil, e.F0(float32(base)), e.Op("Div", nil, ar, e.F0(float32(rd))))
		if how == "reciprocal" {
			inv = e.Op("Reciprocal", nil, p)
		} else {
			inv = e.Op("Div", nil, e.F0(1), p)
		}
		inv = e.Op("Unsqueeze", nil, inv, e.Ints(0))
	}
	pf := e.Op("Unsqueeze", nil, e.ToFloat(pos), e.Ints(-1))
	return e.Op("MatMul", nil, pf, inv)
}

// HalfCosSin is cos, sin of Concat(freqs, freqs) (rotate_half layout).
func HalfCosSin(e *Env, freqs *graph.Value) (*graph.Value, *graph.Value) {
	emb := e.Op("Concat", e.Axis(-1), freqs, freqs)
	return e.Op("Cos", nil, emb), e.Op("Sin", nil, emb)
}

// RotSplit13SignMul is rotate_half as Split (opset 13: sizes as an input),
// Concat(x2, x1) times a sign vector [-1.., +1..] (the Neg folded into a
// constant, as constant folding of torch's cat((-x2, x1)) can leave it).
func RotSplit13SignMul(e *Env, x *graph.Value, rd int) *graph.Value {
	h := e.G.Op("Split", []*graph.Value{x, e.Ints(int64(rd/2), int64(rd/2))}, 2, e.Axis(-1)...)
	sign := make([]float32, rd)
	for i := range sign {
		sign[i] = 1
		if i < rd/2 {
			sign[i] = -1
		}
	}
	return e.Op("Mul", nil, e.Op("Concat", e.Axis(-1), h[1], h[0]), e.F32(sign...))
}

// RotSplit18 is rotate_half as Split with num_outputs (opset 18).
func RotSplit18(e *Env, x *graph.Value) *graph.Value {
	h := e.G.Op("Split", []*graph.Value{x}, 2, graph.IntAttr("axis", -1), graph.IntAttr("num_outputs", 2))
	return e.Op("Concat", e.Axis(-1), e.Op("Neg", nil, h[1]), h[0])
}

// RotNegThenSlice is rotate_half as Concat(Neg(x2), x1) where the Neg is taken
// of the whole second half before slicing it out (x -> Neg -> Slice).
func RotNegThenSlice(e *Env, x *graph.Value, rd int) *graph.Value {
	nx := e.Op("Neg", nil, x)
	x2n := e.Op("Slice", nil, nx, e.Ints(int64(rd/2)), e.Ints(math.MaxInt64), e.Ints(3))
	x1 := e.Op("Slice", nil, x, e.Ints(0), e.Ints(int64(rd/2)), e.Ints(3))
	return e.Op("Concat", e.Axis(3), x2n, x1)
}

// RotPairsReshapeGather is rotate_every_two as Reshape [.., rd/2, 2],
// Gather of index 0 and 1 on the last axis, Neg, Unsqueeze, Concat, Reshape.
func RotPairsReshapeGather(e *Env, x *graph.Value, rd int) *graph.Value {
	p := e.Op("Reshape", nil, x, e.Ints(0, 0, 0, int64(rd/2), 2))
	x1 := e.Op("Gather", e.Axis(-1), p, e.Int0(0))
	x2 := e.Op("Gather", e.Axis(-1), p, e.Int0(1))
	st := e.Op("Concat", e.Axis(-1), e.Op("Unsqueeze", nil, e.Op("Neg", nil, x2), e.Ints(-1)), e.Op("Unsqueeze", nil, x1, e.Ints(-1)))
	return e.Op("Reshape", nil, st, e.Ints(0, 0, 0, int64(rd)))
}

// RotPairsSliceKeep is rotate_every_two as Reshape [.., rd/2, 2], Slice of
// [0:1] and [1:2] on the last axis (keeping it), Neg, Concat, Reshape.
func RotPairsSliceKeep(e *Env, x *graph.Value, rd int) *graph.Value {
	p := e.Op("Reshape", nil, x, e.Ints(0, 0, 0, int64(rd/2), 2))
	x1 := e.Op("Slice", nil, p, e.Ints(0), e.Ints(1), e.Ints(-1))
	x2 := e.Op("Slice", nil, p, e.Ints(1), e.Ints(2), e.Ints(-1))
	st := e.Op("Concat", e.Axis(-1), e.Op("Neg", nil, x2), x1)
	return e.Op("Reshape", nil, st, e.Ints(0, 0, 0, int64(rd)))
}

// InterleavedCosSin repeats each frequency twice (repeat_interleave as
// Unsqueeze, Expand, Reshape) and takes cos and sin.
func InterleavedCosSin(e *Env, freqs *graph.Value, rd int) (*graph.Value, *graph.Value) {
	u := e.Op("Unsqueeze", nil, freqs, e.Ints(-1))
	ex := e.Op("Expand", nil, u, e.Ints(1, 1, 2))
	r := e.Op("Reshape", nil, ex, e.Ints(0, int64(rd)))
	return e.Op("Cos", nil, r), e.Op("Sin", nil, r)
}

// ApplyRope returns both rotations by a per-form combine.
func ApplyRope(q, k *graph.Value, one func(x *graph.Value) *graph.Value) (*graph.Value, *graph.Value) {
	return one(q), one(k)
}

// SinTableInterleaved is the keras tutorial's table: sin on even columns,
// cos on odd, angle pos / 10000^(2(i//2)/d).
func SinTableInterleaved(n, d int) []float32 {
	t := make([]float32, n*d)
	for p := 0; p < n; p++ {
		for i := 0; i < d; i++ {
			a := float64(p) / math.Pow(10000, float64(2*(i/2))/float64(d))
			if i%2 == 0 {
				t[p*d+i] = float32(math.Sin(a))
			} else {
				t[p*d+i] = float32(math.Cos(a))
			}
		}
	}
	return t
}

// RuntimeSlopes computes BLOOM's slopes in the graph from the head count:
// 2^(-8/c · k), k = 1..c for the closest power of two c <= n, then the
// extra ones 2^(-4/c · k), k = 1, 3, .. (2(n-c)-1); shape [n, 1, 1].
func RuntimeSlopes(e *Env, n int) *graph.Value {
	c := 1
	for c*2 <= n {
		c *= 2
	}
	k := e.ToFloat(e.Op("Range", nil, e.Int0(1), e.Int0(int64(c+1)), e.Int0(1)))
	s := e.Op("Pow", nil, e.F0(2), e.Op("Mul", nil, e.F0(float32(-8.0/float64(c))), k))
	if c < n {
		k2 := e.ToFloat(e.Op("Range", nil, e.Int0(1), e.Int0(int64(2*(n-c))), e.Int0(2)))
		extra := e.Op("Pow", nil, e.F0(float32(math.Pow(2, -8.0/float64(2*c)))), k2)
		s = e.Op("Concat", e.Axis(0), s, extra)
	}
	return e.Op("Unsqueeze", nil, s, e.Ints(1, 2))
}

// BloomSlopes are BLOOM's ALiBi slopes for n heads, as a report prints them.
func BloomSlopes(n int) []any {
	c := 1
	for c*2 <= n {
		c *= 2
	}
	var out []any
	for k := 1; k <= c; k++ {
		out = append(out, math.Pow(2, -8*float64(k)/float64(c)))
	}
	for k := 1; k < 2*(n-c); k += 2 {
		out = append(out, math.Pow(2, -8*float64(k)/float64(2*c)))
	}
	return out
}

// CausalWhere masks scores [.., S, S] with Where(j <= i, scores, -inf).
func CausalWhere(e *Env, scores *graph.Value) *graph.Value {
	r := e.RangeS()
	keep := e.Op("LessOrEqual", nil, e.Op("Unsqueeze", nil, r, e.Ints(0)), e.Op("Unsqueeze", nil, r, e.Ints(1)))
	return e.Op("Where", nil, keep, scores, e.F0(float32(math.Inf(-1))))
}

// T5Bucket writes the bucket of rel = j - i [S,S] in another order than
// HF's: Where(GreaterOrEqual(n, exact), large, n), Min(nb-1, large), the
// log branch as Cast(Log(n/exact) / Log(maxd/exact) * (nb - exact)).
func T5Bucket(e *Env, rel *graph.Value, buckets, maxd int, bidirectional bool) *graph.Value {
	nb := int64(buckets)
	var n, ret *graph.Value
	if bidirectional {
		nb /= 2
		ret = e.Op("Mul", nil, e.ToInt(e.Op("Greater", nil, rel, e.Int0(0))), e.Int0(nb))
		n = e.Op("Abs", nil, rel)
	} else {
		n = e.Op("Relu", nil, e.Op("Neg", nil, rel)) // -min(rel, 0)
	}
	exact := nb / 2
	lf := e.Op("Log", nil, e.Op("Div", nil, e.ToFloat(n), e.F0(float32(exact))))
	lf = e.Op("Div", nil, lf, e.Op("Log", nil, e.F0(float32(maxd)/float32(exact))))
	large := e.Op("Add", nil, e.ToInt(e.Op("Mul", nil, lf, e.F0(float32(nb-exact)))), e.Int0(exact))
	large = e.Op("Min", nil, e.Int0(nb-1), large)
	b := e.Op("Where", nil, e.Op("GreaterOrEqual", nil, n, e.Int0(exact)), large, n)
	if ret != nil {
		b = e.Op("Add", nil, ret, b)
	}
	return b
}

// T5Bias adds T5's bias to scores: a [buckets, heads] table gathered at
// T5Bucket of j - i.
func T5Bias(e *Env, scores *graph.Value, buckets, maxd int, bidirectional bool) *graph.Value {
	r := e.RangeS()
	rel := e.Op("Sub", nil, e.Op("Unsqueeze", nil, r, e.Ints(0)), e.Op("Unsqueeze", nil, r, e.Ints(1))) // j - i
	bk := T5Bucket(e, rel, buckets, maxd, bidirectional)
	emb := e.Op("Gather", nil, e.Weight(buckets, e.Heads), bk)                     // [S,S,H]
	bias := e.Op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 2, 0, 1)}, emb) // [H,S,S]
	return e.Op("Add", nil, e.Op("Unsqueeze", nil, bias, e.Ints(0)), scores)       // bias + scores
}

// RotExplicitHalf is the opset-23 RotaryEmbedding function body (and ORT
// GenAI's unfused builder): half-width cos/sin, x1·cos - x2·sin and
// x2·cos + x1·sin concatenated; no rotate_half.
func RotExplicitHalf(e *Env, x, cos, sin *graph.Value, rd int) *graph.Value {
	x1 := e.Op("Slice", nil, x, e.Ints(0), e.Ints(int64(rd/2)), e.Ints(-1))
	x2 := e.Op("Slice", nil, x, e.Ints(int64(rd/2)), e.Ints(int64(rd)), e.Ints(-1))
	r1 := e.Op("Sub", nil, e.Op("Mul", nil, x1, cos), e.Op("Mul", nil, x2, sin))
	r2 := e.Op("Add", nil, e.Op("Mul", nil, sin, x1), e.Op("Mul", nil, cos, x2))
	return e.Op("Concat", e.Axis(-1), r1, r2)
}

// RotExplicitPairs is the interleaved body: x as [.., rd/2, 2], even·cos -
// odd·sin and odd·cos + even·sin stacked back on the pair axis.
func RotExplicitPairs(e *Env, x, cos, sin *graph.Value, rd int) *graph.Value {
	p := e.Op("Reshape", nil, x, e.Ints(0, 0, 0, int64(rd/2), 2))
	ev := e.Op("Gather", e.Axis(-1), p, e.Int0(0))
	od := e.Op("Gather", e.Axis(-1), p, e.Int0(1))
	r1 := e.Op("Sub", nil, e.Op("Mul", nil, ev, cos), e.Op("Mul", nil, od, sin))
	r2 := e.Op("Add", nil, e.Op("Mul", nil, od, cos), e.Op("Mul", nil, ev, sin))
	st := e.Op("Concat", e.Axis(-1), e.Op("Unsqueeze", nil, r1, e.Ints(-1)), e.Op("Unsqueeze", nil, r2, e.Ints(-1)))
	return e.Op("Reshape", nil, st, e.Ints(0, 0, 0, int64(rd)))
}

// HalfWidthCaches are stored cos/sin caches [n, rd/2] (ORT GenAI's).
func HalfWidthCaches(e *Env, base float64, n, rd int) (*graph.Value, *graph.Value) {
	inv := InvFreq(base, rd)
	cv, sv := make([]float32, n*rd/2), make([]float32, n*rd/2)
	for p := 0; p < n; p++ {
		for i, f := range inv {
			cv[p*rd/2+i] = float32(math.Cos(float64(p) * float64(f)))
			sv[p*rd/2+i] = float32(math.Sin(float64(p) * float64(f)))
		}
	}
	return e.Floats([]int64{int64(n), int64(rd / 2)}, cv), e.Floats([]int64{int64(n), int64(rd / 2)}, sv)
}

// RopeFP16CachePastRange rotates q and k by float16 cos/sin caches
// [128, 16] (half_split, base 10000) gathered at Range(past, past+S) and
// cast to float32 at use; tamper, when set, edits the caches first.
func RopeFP16CachePastRange(tamper func(cos, sin []float16.Float16)) func(e *Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
	return func(e *Env, q, k *graph.Value) (*graph.Value, *graph.Value) {
		const maxPos, rd = 128, 16
		inv := InvFreq(10000, rd)
		cv, sv := make([]float16.Float16, maxPos*rd), make([]float16.Float16, maxPos*rd)
		for p := 0; p < maxPos; p++ {
			for c := 0; c < rd; c++ {
				a := float64(p) * float64(inv[c%(rd/2)])
				cv[p*rd+c], sv[p*rd+c] = float16.Fromfloat32(float32(math.Cos(a))), float16.Fromfloat32(float32(math.Sin(a)))
			}
		}
		if tamper != nil {
			tamper(cv, sv)
		}
		ct, _ := graph.NewTensor("cos_cached", graph.Float16, []int64{maxPos, rd}, cv)
		st, _ := graph.NewTensor("sin_cached", graph.Float16, []int64{maxPos, rd}, sv)
		pos := PosPastRange(e)
		cos := e.ToFloat(e.Op("Gather", nil, e.G.AddInitializer(ct), pos))
		sin := e.ToFloat(e.Op("Gather", nil, e.G.AddInitializer(st), pos))
		return ApplyRope(q, k, func(x *graph.Value) *graph.Value {
			return e.Op("Add", nil, e.Op("Mul", nil, cos, x), e.Op("Mul", nil, sin, RotSplit18(e, x)))
		})
	}
}
