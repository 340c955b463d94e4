package audit_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/x448/float16"
)

// This file holds the forms other people's exporters write positional
// encodings in (ONNX Runtime GenAI's builder, ORT's optimizer, torch.onnx
// TorchScript and dynamo, keras2onnx/tf2onnx, onnxscript): each variant is
// one attention block whose encoding is a plausible export of a known model,
// written differently from the corpus and from formSpec's forms (operand
// orders, opset forms of Split, frequencies by MatMul, Reciprocal or Div,
// float16 caches, run-time ALiBi slopes, another bucket function). The audit
// must report the scheme and the params the math gives.

// xenv is what a variant's builder sees of the block it writes into.
type xenv struct {
	*fb
	opset     int
	heads, hd int
	D         int
	ids, mask *graph.Value
	seq       *graph.Value // scalar int64: this call's sequence length
	pastKey   *graph.Value // past keys [batch, heads, past, hd], made on demand
	pastVal   *graph.Value
}

func (e *xenv) f32(v ...float32) *graph.Value {
	return e.floats([]int64{int64(len(v))}, v)
}

func (e *xenv) f0(v float32) *graph.Value {
	return e.floats(nil, []float32{v})
}

func (e *xenv) toFloat(v *graph.Value) *graph.Value {
	return e.op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Float))}, v)
}

func (e *xenv) toInt(v *graph.Value) *graph.Value {
	return e.op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Int64))}, v)
}

func (e *xenv) axis(a int64) []*graph.Attr { return []*graph.Attr{graph.IntAttr("axis", a)} }

// pastLen is the length of the KV cache read from the past keys' shape
// (Shape -> Gather, a scalar), the way exporters write past_key_values_length.
func (e *xenv) pastLen() *graph.Value {
	if e.pastKey == nil {
		dims := []graph.Dim{{Param: "batch"}, {Value: int64(e.heads), Known: true}, {Param: "past"}, {Value: int64(e.hd), Known: true}}
		e.pastKey = e.g.AddInput("past_key", graph.TensorType(graph.Float, dims))
		e.pastVal = e.g.AddInput("past_value", graph.TensorType(graph.Float, dims))
	}
	return e.op("Gather", e.axis(0), e.op("Shape", nil, e.pastKey), e.int0(2))
}

// rangeS is Range(0, S) as int64.
func (e *xenv) rangeS() *graph.Value { return e.op("Range", nil, e.int0(0), e.seq, e.int0(1)) }

// exporterForm is one variant: the pieces it writes, the scheme and params
// the math gives.
type exporterForm struct {
	name  string
	opset int // 0: 17
	heads int
	hd    int
	// kvHeads: key/value heads (GQA, repeated with Expand after the
	// rotation); 0 means heads.
	kvHeads int
	// abs returns x [B,S,D] with an absolute encoding added.
	abs func(e *xenv, x *graph.Value) *graph.Value
	// rope rotates q and k [B,H,S,hd].
	rope func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value)
	// bias turns scores [B,H,S,T] into the Softmax's input.
	bias func(e *xenv, scores *graph.Value) *graph.Value
	// cache: the block reads a KV cache (past keys and values before the
	// new ones) though its rope does not ask for the cache's length.
	cache  bool
	scheme string
	want   map[string]any
}

// buildExporterForm makes the one-block model of a variant.
func buildExporterForm(f exporterForm) *graph.Model {
	opset := f.opset
	if opset == 0 {
		opset = 17
	}
	m := graph.NewModel(8, "onnxpe-exporter-forms-test", graph.Opset{Domain: "", Version: int64(opset)})
	e := &xenv{fb: &fb{g: m.Graph, rng: rand.New(rand.NewPCG(5, 7))}, opset: opset, heads: f.heads, hd: f.hd, D: f.heads * f.hd}
	g := e.g
	bs := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	e.ids = g.AddInput("input_ids", graph.TensorType(graph.Int64, bs))
	e.mask = g.AddInput("attention_mask", graph.TensorType(graph.Int64, bs))
	const V = 50
	x := e.op("Gather", nil, e.weight(V, e.D), e.ids)
	e.seq = e.op("Gather", e.axis(0), e.op("Shape", nil, e.ids), e.int0(1))
	if f.abs != nil {
		x = f.abs(e, x)
	}
	kvh := f.kvHeads
	if kvh == 0 {
		kvh = f.heads
	}
	proj := func(h int) *graph.Value {
		p := e.op("MatMul", nil, x, e.weight(e.D, h*e.hd))
		r := e.op("Reshape", nil, p, e.ints(0, 0, int64(h), int64(e.hd)))
		return e.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, r)
	}
	q, k, v := proj(e.heads), proj(kvh), proj(kvh)
	if f.rope != nil {
		q, k = f.rope(e, q, k)
	}
	if f.cache {
		e.pastLen()
	}
	if e.pastKey != nil {
		k = e.op("Concat", e.axis(2), e.pastKey, k)
		v = e.op("Concat", e.axis(2), e.pastVal, v)
	}
	if kvh != e.heads {
		// repeat_kv: [B,kv,1,T,d] expanded to [B,kv,rep,T,d], reshaped.
		rep := func(x *graph.Value) *graph.Value {
			ex := e.op("Expand", nil, e.op("Unsqueeze", nil, x, e.ints(2)), e.ints(1, 1, int64(e.heads/kvh), 1, 1))
			return e.op("Reshape", nil, ex, e.ints(0, int64(e.heads), -1, int64(e.hd)))
		}
		k, v = rep(k), rep(v)
	}
	scores := e.op("MatMul", nil, q, e.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 1, 3, 2)}, k))
	scores = e.op("Mul", nil, scores, e.f0(float32(1/math.Sqrt(float64(e.hd)))))
	if f.bias != nil {
		scores = f.bias(e, scores)
	}
	w := e.op("Softmax", e.axis(-1), scores)
	a := e.op("MatMul", nil, w, v)
	o := e.op("Reshape", nil, e.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, a), e.ints(0, 0, int64(e.D)))
	out := e.op("MatMul", nil, o, e.weight(e.D, V))
	out.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: V, Known: true}})
	g.AddOutput(out)
	return m
}

// invFreq is base^(-2i/rd), i < rd/2.
func invFreq(base float64, rd int) []float32 {
	inv := make([]float32, rd/2)
	for i := range inv {
		inv[i] = float32(math.Pow(base, -2*float64(i)/float64(rd)))
	}
	return inv
}

// ---- positions, as exporters compute them ----

// posHFPadding is HF's position_ids for left padding:
// (cumsum(mask, -1) - 1).masked_fill(mask == 0, 1), [B, S].
func posHFPadding(e *xenv) *graph.Value {
	p := e.op("Sub", nil, e.op("CumSum", nil, e.mask, e.int0(-1)), e.int0(1))
	pad := e.op("Equal", nil, e.mask, e.int0(0))
	return e.op("Where", nil, pad, e.int0(1), p)
}

// posPastRange is Range(past, past + S).
func posPastRange(e *xenv) *graph.Value {
	pl := e.pastLen()
	return e.op("Range", nil, pl, e.op("Add", nil, pl, e.seq), e.int0(1))
}

// posNonZero is NonZero(ones(S)) squeezed: torch.nonzero-based arange.
func posNonZero(e *xenv) *graph.Value {
	ones := e.op("ConstantOfShape", []*graph.Attr{graph.TensorAttr("value", mustTensor(graph.Int64, []int64{1}, []int64{1}))}, e.op("Unsqueeze", nil, e.seq, e.ints(0)))
	return e.op("Squeeze", nil, e.op("NonZero", nil, ones), e.ints(0))
}

// ---- cos/sin ----

// freqsMatMul is positions [S] as [S,1] times inv_freq [1, rd/2] by MatMul,
// inv_freq computed in the graph by how: "reciprocal" 1/base^(arange(0,rd,2)/rd)
// via Reciprocal, "div" via Div(1, ·), "table" a stored [1, rd/2].
func freqsMatMul(e *xenv, pos *graph.Value, base float64, rd int, how string) *graph.Value {
	var inv *graph.Value
	switch how {
	case "table":
		inv = e.floats([]int64{1, int64(rd / 2)}, invFreq(base, rd))
	default:
		ar := e.toFloat(e.op("Range", nil, e.int0(0), e.int0(int64(rd)), e.int0(2)))
		p := e.op("Pow", nil, e.f0(float32(base)), e.op("Div", nil, ar, e.f0(float32(rd))))
		if how == "reciprocal" {
			inv = e.op("Reciprocal", nil, p)
		} else {
			inv = e.op("Div", nil, e.f0(1), p)
		}
		inv = e.op("Unsqueeze", nil, inv, e.ints(0))
	}
	pf := e.op("Unsqueeze", nil, e.toFloat(pos), e.ints(-1))
	return e.op("MatMul", nil, pf, inv)
}

// halfCosSin is cos, sin of Concat(freqs, freqs) (rotate_half layout).
func halfCosSin(e *xenv, freqs *graph.Value) (*graph.Value, *graph.Value) {
	emb := e.op("Concat", e.axis(-1), freqs, freqs)
	return e.op("Cos", nil, emb), e.op("Sin", nil, emb)
}

// ---- rotations ----

// rotSplit13SignMul is rotate_half as Split (opset 13: sizes as an input),
// Concat(x2, x1) times a sign vector [-1.., +1..] (the Neg folded into a
// constant, as constant folding of torch's cat((-x2, x1)) can leave it).
func rotSplit13SignMul(e *xenv, x *graph.Value, rd int) *graph.Value {
	h := e.g.Op("Split", []*graph.Value{x, e.ints(int64(rd/2), int64(rd/2))}, 2, e.axis(-1)...)
	sign := make([]float32, rd)
	for i := range sign {
		sign[i] = 1
		if i < rd/2 {
			sign[i] = -1
		}
	}
	return e.op("Mul", nil, e.op("Concat", e.axis(-1), h[1], h[0]), e.f32(sign...))
}

// rotSplit18 is rotate_half as Split with num_outputs (opset 18).
func rotSplit18(e *xenv, x *graph.Value) *graph.Value {
	h := e.g.Op("Split", []*graph.Value{x}, 2, graph.IntAttr("axis", -1), graph.IntAttr("num_outputs", 2))
	return e.op("Concat", e.axis(-1), e.op("Neg", nil, h[1]), h[0])
}

// rotNegFirst is rotate_half as Concat(Neg(x2), x1) where the Neg is taken
// of the whole second half before slicing it out (x -> Neg -> Slice).
func rotNegThenSlice(e *xenv, x *graph.Value, rd int) *graph.Value {
	nx := e.op("Neg", nil, x)
	x2n := e.op("Slice", nil, nx, e.ints(int64(rd/2)), e.ints(math.MaxInt64), e.ints(3))
	x1 := e.op("Slice", nil, x, e.ints(0), e.ints(int64(rd/2)), e.ints(3))
	return e.op("Concat", e.axis(3), x2n, x1)
}

// rotPairsReshapeGather is rotate_every_two as Reshape [.., rd/2, 2],
// Gather of index 0 and 1 on the last axis, Neg, Unsqueeze, Concat, Reshape.
func rotPairsReshapeGather(e *xenv, x *graph.Value, rd int) *graph.Value {
	p := e.op("Reshape", nil, x, e.ints(0, 0, 0, int64(rd/2), 2))
	x1 := e.op("Gather", e.axis(-1), p, e.int0(0))
	x2 := e.op("Gather", e.axis(-1), p, e.int0(1))
	st := e.op("Concat", e.axis(-1), e.op("Unsqueeze", nil, e.op("Neg", nil, x2), e.ints(-1)), e.op("Unsqueeze", nil, x1, e.ints(-1)))
	return e.op("Reshape", nil, st, e.ints(0, 0, 0, int64(rd)))
}

// rotPairsSliceStep is rotate_every_two as Reshape [.., rd/2, 2], Slice of
// [0:1] and [1:2] on the last axis (keeping it), Neg, Concat, Reshape.
func rotPairsSliceKeep(e *xenv, x *graph.Value, rd int) *graph.Value {
	p := e.op("Reshape", nil, x, e.ints(0, 0, 0, int64(rd/2), 2))
	x1 := e.op("Slice", nil, p, e.ints(0), e.ints(1), e.ints(-1))
	x2 := e.op("Slice", nil, p, e.ints(1), e.ints(2), e.ints(-1))
	st := e.op("Concat", e.axis(-1), e.op("Neg", nil, x2), x1)
	return e.op("Reshape", nil, st, e.ints(0, 0, 0, int64(rd)))
}

// interleavedCosSin repeats each frequency twice (repeat_interleave as
// Unsqueeze, Expand, Reshape) and takes cos and sin.
func interleavedCosSin(e *xenv, freqs *graph.Value, rd int) (*graph.Value, *graph.Value) {
	u := e.op("Unsqueeze", nil, freqs, e.ints(-1))
	ex := e.op("Expand", nil, u, e.ints(1, 1, 2))
	r := e.op("Reshape", nil, ex, e.ints(0, int64(rd)))
	return e.op("Cos", nil, r), e.op("Sin", nil, r)
}

// applyRope returns both rotations by a per-form combine.
func applyRope(q, k *graph.Value, one func(x *graph.Value) *graph.Value) (*graph.Value, *graph.Value) {
	return one(q), one(k)
}

// ---- sinusoidal tables ----

// sinTableInterleaved is the keras tutorial's table: sin on even columns,
// cos on odd, angle pos / 10000^(2(i//2)/d).
func sinTableInterleaved(n, d int) []float32 {
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

// ---- ALiBi slopes at run time ----

// runtimeSlopes computes BLOOM's slopes in the graph from the head count:
// 2^(-8/c · k), k = 1..c for the closest power of two c <= n, then the
// extra ones 2^(-4/c · k), k = 1, 3, .. (2(n-c)-1); shape [n, 1, 1].
func runtimeSlopes(e *xenv, n int) *graph.Value {
	c := 1
	for c*2 <= n {
		c *= 2
	}
	k := e.toFloat(e.op("Range", nil, e.int0(1), e.int0(int64(c+1)), e.int0(1)))
	s := e.op("Pow", nil, e.f0(2), e.op("Mul", nil, e.f0(float32(-8.0/float64(c))), k))
	if c < n {
		k2 := e.toFloat(e.op("Range", nil, e.int0(1), e.int0(int64(2*(n-c))), e.int0(2)))
		extra := e.op("Pow", nil, e.f0(float32(math.Pow(2, -8.0/float64(2*c)))), k2)
		s = e.op("Concat", e.axis(0), s, extra)
	}
	return e.op("Unsqueeze", nil, s, e.ints(1, 2))
}

func bloomSlopes(n int) []any {
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

// causalWhere masks scores [.., S, S] with Where(j <= i, scores, -inf).
func causalWhere(e *xenv, scores *graph.Value) *graph.Value {
	r := e.rangeS()
	keep := e.op("LessOrEqual", nil, e.op("Unsqueeze", nil, r, e.ints(0)), e.op("Unsqueeze", nil, r, e.ints(1)))
	return e.op("Where", nil, keep, scores, e.f0(float32(math.Inf(-1))))
}

// ---- T5 buckets ----

// t5Bucket writes the bucket of rel = j - i [S,S] in another order than
// HF's: Where(GreaterOrEqual(n, exact), large, n), Min(nb-1, large), the
// log branch as Cast(Log(n/exact) / Log(maxd/exact) * (nb - exact)).
func t5Bucket(e *xenv, rel *graph.Value, buckets, maxd int, bidirectional bool) *graph.Value {
	nb := int64(buckets)
	var n, ret *graph.Value
	if bidirectional {
		nb /= 2
		ret = e.op("Mul", nil, e.toInt(e.op("Greater", nil, rel, e.int0(0))), e.int0(nb))
		n = e.op("Abs", nil, rel)
	} else {
		n = e.op("Relu", nil, e.op("Neg", nil, rel)) // -min(rel, 0)
	}
	exact := nb / 2
	lf := e.op("Log", nil, e.op("Div", nil, e.toFloat(n), e.f0(float32(exact))))
	lf = e.op("Div", nil, lf, e.op("Log", nil, e.f0(float32(maxd)/float32(exact))))
	large := e.op("Add", nil, e.toInt(e.op("Mul", nil, lf, e.f0(float32(nb-exact)))), e.int0(exact))
	large = e.op("Min", nil, e.int0(nb-1), large)
	b := e.op("Where", nil, e.op("GreaterOrEqual", nil, n, e.int0(exact)), large, n)
	if ret != nil {
		b = e.op("Add", nil, ret, b)
	}
	return b
}

func t5Bias(e *xenv, scores *graph.Value, buckets, maxd int, bidirectional bool) *graph.Value {
	r := e.rangeS()
	rel := e.op("Sub", nil, e.op("Unsqueeze", nil, r, e.ints(0)), e.op("Unsqueeze", nil, r, e.ints(1))) // j - i
	bk := t5Bucket(e, rel, buckets, maxd, bidirectional)
	emb := e.op("Gather", nil, e.weight(buckets, e.heads), bk)                     // [S,S,H]
	bias := e.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 2, 0, 1)}, emb) // [H,S,S]
	return e.op("Add", nil, e.op("Unsqueeze", nil, bias, e.ints(0)), scores)       // bias + scores
}

// rotExplicitHalf is the opset-23 RotaryEmbedding function body (and ORT
// GenAI's unfused builder): half-width cos/sin, x1·cos - x2·sin and
// x2·cos + x1·sin concatenated; no rotate_half.
func rotExplicitHalf(e *xenv, x, cos, sin *graph.Value, rd int) *graph.Value {
	x1 := e.op("Slice", nil, x, e.ints(0), e.ints(int64(rd/2)), e.ints(-1))
	x2 := e.op("Slice", nil, x, e.ints(int64(rd/2)), e.ints(int64(rd)), e.ints(-1))
	r1 := e.op("Sub", nil, e.op("Mul", nil, x1, cos), e.op("Mul", nil, x2, sin))
	r2 := e.op("Add", nil, e.op("Mul", nil, sin, x1), e.op("Mul", nil, cos, x2))
	return e.op("Concat", e.axis(-1), r1, r2)
}

// rotExplicitPairs is the interleaved body: x as [.., rd/2, 2], even·cos -
// odd·sin and odd·cos + even·sin stacked back on the pair axis.
func rotExplicitPairs(e *xenv, x, cos, sin *graph.Value, rd int) *graph.Value {
	p := e.op("Reshape", nil, x, e.ints(0, 0, 0, int64(rd/2), 2))
	ev := e.op("Gather", e.axis(-1), p, e.int0(0))
	od := e.op("Gather", e.axis(-1), p, e.int0(1))
	r1 := e.op("Sub", nil, e.op("Mul", nil, ev, cos), e.op("Mul", nil, od, sin))
	r2 := e.op("Add", nil, e.op("Mul", nil, od, cos), e.op("Mul", nil, ev, sin))
	st := e.op("Concat", e.axis(-1), e.op("Unsqueeze", nil, r1, e.ints(-1)), e.op("Unsqueeze", nil, r2, e.ints(-1)))
	return e.op("Reshape", nil, st, e.ints(0, 0, 0, int64(rd)))
}

// halfWidthCaches are stored cos/sin caches [n, rd/2] (ORT GenAI's).
func halfWidthCaches(e *xenv, base float64, n, rd int) (*graph.Value, *graph.Value) {
	inv := invFreq(base, rd)
	cv, sv := make([]float32, n*rd/2), make([]float32, n*rd/2)
	for p := 0; p < n; p++ {
		for i, f := range inv {
			cv[p*rd/2+i] = float32(math.Cos(float64(p) * float64(f)))
			sv[p*rd/2+i] = float32(math.Sin(float64(p) * float64(f)))
		}
	}
	return e.floats([]int64{int64(n), int64(rd / 2)}, cv), e.floats([]int64{int64(n), int64(rd / 2)}, sv)
}

// ropeFP16CachePastRange rotates q and k by float16 cos/sin caches
// [128, 16] (half_split, base 10000) gathered at Range(past, past+S) and
// cast to float32 at use; tamper, when set, edits the caches first.
func ropeFP16CachePastRange(tamper func(cos, sin []float16.Float16)) func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
	return func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
		const maxPos, rd = 128, 16
		inv := invFreq(10000, rd)
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
		pos := posPastRange(e)
		cos := e.toFloat(e.op("Gather", nil, e.g.AddInitializer(ct), pos))
		sin := e.toFloat(e.op("Gather", nil, e.g.AddInitializer(st), pos))
		return applyRope(q, k, func(x *graph.Value) *graph.Value {
			return e.op("Add", nil, e.op("Mul", nil, cos, x), e.op("Mul", nil, sin, rotSplit18(e, x)))
		})
	}
}

func exporterForms() []exporterForm {
	ropeHalf := func(base float64, hd, heads int) map[string]any {
		return map[string]any{"layout": "half_split", "base": base, "rotary_dim": hd, "head_dim": hd, "num_heads": heads, "scaling": "none"}
	}
	return []exporterForm{
		{
			// HF Llama by TorchScript at opset 13 after constant folding:
			// inv_freq stored, MatMul of positions, rotate_half by Split with
			// sizes as an input and the Neg folded into a sign vector.
			name: "rope_split13_sign_vector", opset: 13, heads: 2, hd: 16,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := halfCosSin(e, freqsMatMul(e, e.rangeS(), 10000, 16, "table"))
				return applyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.op("Add", nil, e.op("Mul", nil, x, cos), e.op("Mul", nil, rotSplit13SignMul(e, x, 16), sin))
				})
			},
			scheme: "rope", want: ropeHalf(10000, 16, 2),
		},
		{
			// dynamo at opset 18: Split by num_outputs, the Muls and the Add
			// commuted (rot·sin first, cos·x second); inv_freq by Reciprocal.
			name: "rope_split18_commuted_reciprocal", opset: 18, heads: 2, hd: 32,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := halfCosSin(e, freqsMatMul(e, e.rangeS(), 500000, 32, "reciprocal"))
				return applyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.op("Add", nil, e.op("Mul", nil, rotSplit18(e, x), sin), e.op("Mul", nil, cos, x))
				})
			},
			scheme: "rope", want: ropeHalf(500000, 32, 2),
		},
		{
			// HF with left padding: positions cumsum(mask)-1 masked_fill,
			// [B,S]; inv_freq via Div(1, base^x); cos/sin [B,1,S,d]; the Neg
			// taken before the half is sliced out.
			name: "rope_hf_padding_div_negfirst", heads: 2, hd: 16,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := halfCosSin(e, freqsMatMul(e, posHFPadding(e), 10000, 16, "div"))
				cos, sin = e.op("Unsqueeze", nil, cos, e.ints(1)), e.op("Unsqueeze", nil, sin, e.ints(1))
				return applyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.op("Add", nil, e.op("Mul", nil, x, cos), e.op("Mul", nil, rotNegThenSlice(e, x, 16), sin))
				})
			},
			scheme: "rope", want: ropeHalf(10000, 16, 2),
		},
		{
			// KV-cache decoder: positions Range(past, past+S); float16 cos/sin
			// caches gathered and cast to float32 at use (ORT GenAI's fp16
			// builds).
			name: "rope_fp16_cache_past_range", heads: 2, hd: 16,
			rope:   ropeFP16CachePastRange(nil),
			opset:  18,
			scheme: "rope", want: map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 16, "max_positions": 128},
		},
		{
			// GPT-J by dynamo: rotate_every_two as Reshape [.., d/2, 2] and
			// Gather of index 0/1; cos/sin by repeat_interleave (Unsqueeze,
			// Expand, Reshape); positions by NonZero.
			name: "rope_pairs_reshape_gather", heads: 2, hd: 16,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := interleavedCosSin(e, freqsMatMul(e, posNonZero(e), 10000, 16, "table"), 16)
				return applyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.op("Add", nil, e.op("Mul", nil, x, cos), e.op("Mul", nil, rotPairsReshapeGather(e, x, 16), sin))
				})
			},
			scheme: "rope", want: map[string]any{"layout": "interleaved", "base": 10000.0, "rotary_dim": 16, "head_dim": 16},
		},
		{
			// rotate_every_two as Reshape [.., d/2, 2] and Slices that keep
			// the pair axis, Concat(-x2, x1); commuted Add.
			name: "rope_pairs_reshape_slice", heads: 2, hd: 16,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := interleavedCosSin(e, freqsMatMul(e, e.rangeS(), 50000, 16, "reciprocal"), 16)
				return applyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.op("Add", nil, e.op("Mul", nil, sin, rotPairsSliceKeep(e, x, 16)), e.op("Mul", nil, x, cos))
				})
			},
			scheme: "rope", want: map[string]any{"layout": "interleaved", "base": 50000.0, "rotary_dim": 16, "head_dim": 16},
		},
		{
			// the opset-23 RotaryEmbedding function body written out (as
			// onnxscript inlines it): half-width stored caches gathered at
			// position_ids given as an input, explicit x1·cos - x2·sin.
			name: "rope_explicit_half_width_caches", heads: 2, hd: 16,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				pin := e.g.AddInput("position_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				cc, sc := halfWidthCaches(e, 10000, 96, 16)
				cos := e.op("Unsqueeze", nil, e.op("Gather", nil, cc, pin), e.ints(1))
				sin := e.op("Unsqueeze", nil, e.op("Gather", nil, sc, pin), e.ints(1))
				return applyRope(q, k, func(x *graph.Value) *graph.Value { return rotExplicitHalf(e, x, cos, sin, 16) })
			},
			scheme: "rope", want: map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 16, "head_dim": 16, "max_positions": 96},
		},
		{
			// the interleaved function body: pairs by Reshape and Gather,
			// half-width frequencies computed, explicit products stacked.
			name: "rope_explicit_pairs_computed", heads: 2, hd: 16,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				fr := freqsMatMul(e, e.rangeS(), 10000, 16, "div")
				cos, sin := e.op("Cos", nil, fr), e.op("Sin", nil, fr)
				return applyRope(q, k, func(x *graph.Value) *graph.Value { return rotExplicitPairs(e, x, cos, sin, 16) })
			},
			scheme: "rope", want: map[string]any{"layout": "interleaved", "base": 10000.0, "rotary_dim": 16, "head_dim": 16},
		},
		{
			// RoPE applied before the heads are transposed ([B,S,H,d], cos
			// [S,1,d]), linear scaling written as positions / 4.
			name: "rope_bshd_linear_by_position_div", heads: 2, hd: 16,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				pos := e.op("Div", nil, e.toFloat(e.rangeS()), e.f0(4))
				cos, sin := halfCosSin(e, freqsMatMul(e, pos, 10000, 16, "table"))
				cos, sin = e.op("Unsqueeze", nil, cos, e.ints(1)), e.op("Unsqueeze", nil, sin, e.ints(1))
				perm := []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}
				return applyRope(q, k, func(x *graph.Value) *graph.Value {
					xt := e.op("Transpose", perm, x) // back to [B,S,H,d]
					y := e.op("Add", nil, e.op("Mul", nil, xt, cos), e.op("Mul", nil, rotSplit13SignMul(e, xt, 16), sin))
					return e.op("Transpose", perm, y)
				})
			},
			scheme: "rope", want: map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 16, "scaling": "linear", "factor": 4.0},
		},
		{
			// tensor2tensor's get_timing_signal_1d computed in the graph:
			// inv_timescales = Exp(-log(1e4)/(d/2-1) · i), concat [sin, cos].
			name: "sinusoidal_t2t_exp_computed", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				n := e.D / 2
				inc := math.Log(10000) / float64(n-1)
				i := e.toFloat(e.op("Range", nil, e.int0(0), e.int0(int64(n)), e.int0(1)))
				inv := e.op("Exp", nil, e.op("Mul", nil, i, e.f0(float32(-inc))))
				st := e.op("Mul", nil, e.op("Unsqueeze", nil, e.toFloat(e.rangeS()), e.ints(1)), e.op("Unsqueeze", nil, inv, e.ints(0)))
				pe := e.op("Concat", e.axis(1), e.op("Sin", nil, st), e.op("Cos", nil, st))
				return e.op("Add", nil, x, e.op("Unsqueeze", nil, pe, e.ints(0)))
			},
			scheme: "sinusoidal", want: map[string]any{"layout": "concat_sin_cos", "base": 10000.0, "dim": 32, "computed": true, "freq_denominator": "d/2-1"},
		},
		{
			// symmetric ALiBi (encoder) with the distance's Abs on integers
			// before the Cast, slopes stored, -slope·|i-j| as Mul by the
			// negated slopes.
			name: "alibi_symmetric_int_abs", heads: 4, hd: 8,
			bias: func(e *xenv, scores *graph.Value) *graph.Value {
				r := e.rangeS()
				d := e.toFloat(e.op("Abs", nil, e.op("Sub", nil, e.op("Unsqueeze", nil, r, e.ints(1)), e.op("Unsqueeze", nil, r, e.ints(0)))))
				neg := []float32{-0.25, -0.0625, -0.015625, -0.00390625}
				return e.op("Add", nil, scores, e.op("Mul", nil, d, e.floats([]int64{4, 1, 1}, neg)))
			},
			scheme: "alibi", want: map[string]any{"num_heads": 4, "slopes": []any{0.25, 0.0625, 0.015625, 0.00390625}, "symmetric": true},
		},
		{
			// HF dynamic NTK written with Max instead of the Python branch:
			// base' = base·(f·max(S, L)/L - (f-1))^(d/(d-2)) at run time, GQA
			// with 4 query heads over 2 key/value heads (repeat_kv by Expand).
			name: "rope_dynamic_ntk_max_gqa", heads: 4, kvHeads: 2, hd: 16,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				const L, fac, d = 32, 2.0, 16
				m := e.op("Max", nil, e.toFloat(e.seq), e.f0(L))
				t := e.op("Sub", nil, e.op("Div", nil, e.op("Mul", nil, m, e.f0(fac)), e.f0(L)), e.f0(fac-1))
				base := e.op("Mul", nil, e.f0(10000), e.op("Pow", nil, t, e.f0(float32(d)/float32(d-2))))
				ar := e.toFloat(e.op("Range", nil, e.int0(0), e.int0(d), e.int0(2)))
				inv := e.op("Reciprocal", nil, e.op("Pow", nil, base, e.op("Div", nil, ar, e.f0(d))))
				fr := e.op("Mul", nil, e.op("Unsqueeze", nil, e.toFloat(e.rangeS()), e.ints(1)), e.op("Unsqueeze", nil, inv, e.ints(0)))
				cos, sin := halfCosSin(e, fr)
				return applyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.op("Add", nil, e.op("Mul", nil, x, cos), e.op("Mul", nil, rotSplit18(e, x), sin))
				})
			},
			opset:  18,
			scheme: "rope", want: map[string]any{"layout": "half_split", "base": 10000.0, "scaling": "ntk", "factor": 2.0, "original_max_positions": 32, "num_heads": 4, "num_kv_heads": 2},
		},
		{
			// tf-style: frequencies by Einsum "i,j->ij" of int32 position_ids
			// cast to float, cos/sin by Tile(freqs, [1, 2]).
			name: "rope_int32_positions_einsum_tile", heads: 2, hd: 16,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				pin := e.g.AddInput("position_ids", graph.TensorType(graph.Int32, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				row := e.op("Squeeze", nil, e.op("Slice", nil, pin, e.ints(0), e.ints(1), e.ints(0)), e.ints(0))
				fr := e.op("Einsum", []*graph.Attr{graph.StringAttr("equation", "i,j->ij")}, e.toFloat(row), e.f32(invFreq(1e6, 16)...))
				emb := e.op("Tile", nil, fr, e.ints(1, 2))
				cos, sin := e.op("Cos", nil, emb), e.op("Sin", nil, emb)
				return applyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.op("Add", nil, e.op("Mul", nil, x, cos), e.op("Mul", nil, rotSplit18(e, x), sin))
				})
			},
			opset:  18,
			scheme: "rope", want: map[string]any{"layout": "half_split", "base": 1e6, "rotary_dim": 16, "head_dim": 16},
		},
		{
			// older HF Llama: cos_cached[:seq_len] by a Slice whose end is
			// the sequence length, then indexed by position_ids.
			name: "rope_cache_sliced_then_gathered", heads: 2, hd: 16,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				pin := e.g.AddInput("position_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				const n, rd = 64, 16
				inv := invFreq(10000, rd)
				cv, sv := make([]float32, n*rd), make([]float32, n*rd)
				for p := 0; p < n; p++ {
					for c := 0; c < rd; c++ {
						a := float64(p) * float64(inv[c%(rd/2)])
						cv[p*rd+c], sv[p*rd+c] = float32(math.Cos(a)), float32(math.Sin(a))
					}
				}
				end := e.op("Unsqueeze", nil, e.seq, e.ints(0))
				cs := e.op("Slice", nil, e.floats([]int64{1, 1, n, rd}, cv), e.ints(0), end, e.ints(2))
				ss := e.op("Slice", nil, e.floats([]int64{1, 1, n, rd}, sv), e.ints(0), end, e.ints(2))
				sq := func(v *graph.Value) *graph.Value { return e.op("Squeeze", nil, v, e.ints(0, 1)) }
				cos := e.op("Unsqueeze", nil, e.op("Gather", nil, sq(cs), pin), e.ints(1))
				sin := e.op("Unsqueeze", nil, e.op("Gather", nil, sq(ss), pin), e.ints(1))
				return applyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.op("Add", nil, e.op("Mul", nil, x, cos), e.op("Mul", nil, rotNegThenSlice(e, x, rd), sin))
				})
			},
			scheme: "rope", want: map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 16, "max_positions": 64},
		},
		{
			// tf.range over floats and an interleaved sinusoid stacked and
			// flattened (Flatten, not Reshape).
			name: "sinusoidal_float_range_stack_flatten", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				pos := e.op("Range", nil, e.f0(0), e.toFloat(e.seq), e.f0(1))
				ang := e.op("Mul", nil, e.op("Unsqueeze", nil, pos, e.ints(1)), e.f32(invFreq(10000, e.D)...))
				st := e.op("Concat", e.axis(2), e.op("Unsqueeze", nil, e.op("Sin", nil, ang), e.ints(2)), e.op("Unsqueeze", nil, e.op("Cos", nil, ang), e.ints(2)))
				pe := e.op("Flatten", []*graph.Attr{graph.IntAttr("axis", 1)}, st)
				return e.op("Add", nil, x, pe)
			},
			scheme: "sinusoidal", want: map[string]any{"layout": "interleaved", "base": 10000.0, "dim": 32, "computed": true, "freq_denominator": "d/2"},
		},
		{
			// BERT's TPU path: positions one-hot encoded and multiplied with
			// the table (OneHot + MatMul instead of Gather).
			name: "learned_onehot_matmul", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				oh := e.op("OneHot", []*graph.Attr{graph.IntAttr("axis", -1)}, e.rangeS(), e.int0(72), e.f32(0, 1))
				return e.op("Add", nil, x, e.op("MatMul", nil, oh, e.weight(72, e.D)))
			},
			scheme: "learned_absolute", want: map[string]any{"max_positions": 72, "dim": 32, "position_offset": 0},
		},
		{
			// T5 by tf2onnx: everything in int32 (TF's default int).
			name: "t5_int32_bucket", heads: 4, hd: 8,
			bias: func(e *xenv, scores *graph.Value) *graph.Value {
				r := e.op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Int32))}, e.rangeS())
				rel := e.op("Sub", nil, e.op("Unsqueeze", nil, r, e.ints(0)), e.op("Unsqueeze", nil, r, e.ints(1)))
				i32 := func(v int64) *graph.Value {
					t, _ := graph.NewTensor("s", graph.Int32, nil, []int32{int32(v)})
					return e.g.AddInitializer(t)
				}
				to32 := func(v *graph.Value) *graph.Value {
					return e.op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Int32))}, v)
				}
				const nb, exact, maxd = 16, 8, 128
				ret := e.op("Mul", nil, to32(e.op("Greater", nil, rel, i32(0))), i32(nb))
				n := e.op("Abs", nil, rel)
				lf := e.op("Div", nil, e.op("Log", nil, e.op("Div", nil, e.toFloat(n), e.f0(exact))), e.f0(float32(math.Log(maxd/exact))))
				large := e.op("Min", nil, e.op("Add", nil, to32(e.op("Mul", nil, lf, e.f0(nb-exact))), i32(exact)), i32(nb-1))
				bk := e.op("Add", nil, e.op("Where", nil, e.op("Less", nil, n, i32(exact)), n, large), ret)
				emb := e.op("Gather", nil, e.weight(32, e.heads), bk)
				bias := e.op("Unsqueeze", nil, e.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 2, 0, 1)}, emb), e.ints(0))
				return e.op("Add", nil, scores, bias)
			},
			scheme: "t5_relative_bias", want: map[string]any{"num_buckets": 32, "max_distance": 128, "bidirectional": true, "num_heads": 4},
		},
		{
			// transformers >= 4.38 Llama: inv_freq[None, :, None] expanded to
			// the batch, MatMul with position_ids[:, None, :] as floats,
			// transposed, Concat(freqs, freqs), cos·attention_scaling (1.0),
			// Cast to the model's dtype.
			name: "rope_hf438_expand_matmul_transpose", heads: 2, hd: 16,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				pin := e.g.AddInput("position_ids", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "seq"}}))
				b := e.op("Slice", nil, e.op("Shape", nil, pin), e.ints(0), e.ints(1), e.ints(0))
				inv := e.floats([]int64{1, 8, 1}, invFreq(10000, 16))
				invE := e.op("Expand", nil, inv, e.op("Concat", e.axis(0), b, e.ints(1, 1)))
				pe := e.toFloat(e.op("Unsqueeze", nil, pin, e.ints(1)))
				fr := e.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1)}, e.op("MatMul", nil, invE, pe))
				emb := e.op("Concat", e.axis(-1), fr, fr)
				cos := e.toFloat(e.op("Mul", nil, e.op("Cos", nil, emb), e.f0(1)))
				sin := e.toFloat(e.op("Mul", nil, e.op("Sin", nil, emb), e.f0(1)))
				cos, sin = e.op("Unsqueeze", nil, cos, e.ints(1)), e.op("Unsqueeze", nil, sin, e.ints(1))
				return applyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.op("Add", nil, e.op("Mul", nil, x, cos), e.op("Mul", nil, rotSplit13SignMul(e, x, 16), sin))
				})
			},
			scheme: "rope", want: ropeHalf(10000, 16, 2),
		},
		{
			// BLOOM as exported: slopes·((cumsum(mask) - 1)·mask) [B·H, 1, T]
			// added by baddbmm to 3-D scores [B·H, S, T], viewed back to
			// [B, H, S, T]; slopes as Exp(-k·(8/n)·ln 2).
			name: "alibi_bloom_baddbmm_3d_exp_slopes", heads: 4, hd: 8,
			bias: func(e *xenv, scores *graph.Value) *graph.Value {
				k := e.toFloat(e.op("Range", nil, e.int0(1), e.int0(5), e.int0(1)))
				sl := e.op("Exp", nil, e.op("Mul", nil, k, e.f0(float32(-2*math.Ln2))))
				m := e.op("Mul", nil, e.op("Sub", nil, e.op("CumSum", nil, e.mask, e.int0(-1)), e.int0(1)), e.mask)
				al := e.op("Mul", nil, e.op("Unsqueeze", nil, sl, e.ints(0, 2)), e.op("Unsqueeze", nil, e.toFloat(m), e.ints(1))) // [B,H,T]
				sh := e.op("Shape", nil, scores)
				st := e.op("Slice", nil, sh, e.ints(2), e.ints(4), e.ints(0)) // [S, T]
				t := e.op("Slice", nil, sh, e.ints(3), e.ints(4), e.ints(0))
				al = e.op("Reshape", nil, al, e.op("Concat", e.axis(0), e.ints(-1, 1), t)) // [B·H,1,T]
				s3 := e.op("Reshape", nil, scores, e.op("Concat", e.axis(0), e.ints(-1), st))
				s3 = e.op("Add", nil, al, s3)
				return causalWhere(e, e.op("Reshape", nil, s3, sh))
			},
			scheme: "alibi", want: map[string]any{"num_heads": 4, "slopes": []any{0.25, 0.0625, 0.015625, 0.00390625}, "symmetric": false},
		},
		{
			// an fp16 export: the learned position table in float16, cast
			// to float32 where it is added.
			name: "learned_fp16_table_cast", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				v := make([]float16.Float16, 40*e.D)
				for i := range v {
					v[i] = float16.Fromfloat32(float32(e.rng.NormFloat64() * 0.02))
				}
				t, _ := graph.NewTensor("wpe", graph.Float16, []int64{40, int64(e.D)}, v)
				return e.op("Add", nil, x, e.toFloat(e.op("Gather", nil, e.g.AddInitializer(t), e.rangeS())))
			},
			scheme: "learned_absolute", want: map[string]any{"max_positions": 40, "dim": 32, "position_offset": 0},
		},
		{
			// a float16 sinusoidal table (concat layout), sliced and cast.
			name: "sinusoidal_fp16_table_cast", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				d := e.D
				v := make([]float16.Float16, 48*d)
				for p := 0; p < 48; p++ {
					for i := 0; i < d/2; i++ {
						a := float64(p) * math.Pow(10000, -float64(i)/float64(d/2))
						v[p*d+i], v[p*d+d/2+i] = float16.Fromfloat32(float32(math.Sin(a))), float16.Fromfloat32(float32(math.Cos(a)))
					}
				}
				t, _ := graph.NewTensor("pe", graph.Float16, []int64{48, int64(d)}, v)
				pe := e.op("Slice", nil, e.g.AddInitializer(t), e.ints(0), e.op("Unsqueeze", nil, e.seq, e.ints(0)), e.ints(0))
				return e.op("Add", nil, x, e.toFloat(pe))
			},
			scheme: "sinusoidal", want: map[string]any{"layout": "concat_sin_cos", "base": 10000.0, "dim": 32, "computed": false, "max_positions": 48, "freq_denominator": "d/2", "position_offset": 0},
		},
		{
			// RoBERTa: positions from the token ids, cumsum(ids != pad)·mask +
			// pad (padding_idx 1), so the first token reads row 2.
			name: "learned_roberta_positions_from_ids", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				m := e.toInt(e.op("Not", nil, e.op("Equal", nil, e.ids, e.int0(1))))
				pos := e.op("Add", nil, e.op("Mul", nil, e.op("CumSum", nil, m, e.int0(1)), m), e.int0(1))
				return e.op("Add", nil, x, e.op("Gather", nil, e.weight(66, e.D), pos))
			},
			scheme: "learned_absolute", want: map[string]any{"max_positions": 66, "dim": 32, "position_offset": 2},
		},
		{
			// MQA: one key/value head for 4 query heads.
			name: "rope_mqa_one_kv_head", heads: 4, kvHeads: 1, hd: 16,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := halfCosSin(e, freqsMatMul(e, e.rangeS(), 10000, 16, "table"))
				return applyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.op("Add", nil, e.op("Mul", nil, x, cos), e.op("Mul", nil, rotSplit18(e, x), sin))
				})
			},
			opset:  18,
			scheme: "rope", want: map[string]any{"layout": "half_split", "base": 10000.0, "num_heads": 4, "num_kv_heads": 1},
		},
		{
			// the original Mesh TensorFlow bucket (as tf2onnx exports T5):
			// n = -(j - i); ret = (n < 0)·nb; n = |n|; Where(n < exact, n,
			// Min(large, nb - 1)).
			name: "t5_mesh_tf_negated", heads: 4, hd: 8,
			bias: func(e *xenv, scores *graph.Value) *graph.Value {
				r := e.rangeS()
				n := e.op("Neg", nil, e.op("Sub", nil, e.op("Unsqueeze", nil, r, e.ints(0)), e.op("Unsqueeze", nil, r, e.ints(1))))
				const nb, exact, maxd = 16, 8, 128
				ret := e.op("Mul", nil, e.toInt(e.op("Less", nil, n, e.int0(0))), e.int0(nb))
				n = e.op("Abs", nil, n)
				lf := e.op("Mul", nil, e.op("Div", nil, e.op("Log", nil, e.op("Div", nil, e.toFloat(n), e.f0(exact))), e.f0(float32(math.Log(maxd/exact)))), e.f0(nb-exact))
				large := e.op("Min", nil, e.op("Add", nil, e.int0(exact), e.toInt(lf)), e.int0(nb-1))
				bk := e.op("Add", nil, ret, e.op("Where", nil, e.op("Less", nil, n, e.int0(exact)), n, large))
				emb := e.op("Gather", nil, e.weight(32, e.heads), bk)
				bias := e.op("Unsqueeze", nil, e.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 2, 0, 1)}, emb), e.ints(0))
				return e.op("Add", nil, scores, bias)
			},
			scheme: "t5_relative_bias", want: map[string]any{"num_buckets": 32, "max_distance": 128, "bidirectional": true, "num_heads": 4},
		},
		{
			// 12 heads: 8 slopes of 2^(-k) and 4 extra odd powers of 2^(-1/2),
			// computed at run time; keys-only bias.
			name: "alibi_runtime_slopes_12_heads", heads: 12, hd: 4,
			bias: func(e *xenv, scores *graph.Value) *graph.Value {
				r := e.op("Unsqueeze", nil, e.toFloat(e.rangeS()), e.ints(0))
				return e.op("Add", nil, causalWhere(e, scores), e.op("Mul", nil, runtimeSlopes(e, 12), r))
			},
			scheme: "alibi", want: map[string]any{"num_heads": 12, "slopes": bloomSlopes(12), "symmetric": false},
		},
		{
			// Gemma: the queries scaled (query_pre_attn_scalar) before the
			// rotation, base 10000, head_dim 32 of 2 heads.
			name: "rope_gemma_scaled_queries", heads: 2, hd: 32,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := halfCosSin(e, freqsMatMul(e, e.rangeS(), 10000, 32, "div"))
				q = e.op("Mul", nil, q, e.f0(0.0625))
				return applyRope(q, k, func(x *graph.Value) *graph.Value {
					return e.op("Add", nil, e.op("Mul", nil, x, cos), e.op("Mul", nil, rotNegThenSlice(e, x, 32), sin))
				})
			},
			scheme: "rope", want: ropeHalf(10000, 32, 2),
		},
		{
			// q and k rotated together: Concat on the head axis, one
			// rotation, Split back (a packed form).
			name: "rope_qk_packed_one_rotation", heads: 2, kvHeads: 1, hd: 16,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := halfCosSin(e, freqsMatMul(e, e.rangeS(), 10000, 16, "table"))
				qk := e.op("Concat", e.axis(1), q, k)
				y := e.op("Add", nil, e.op("Mul", nil, qk, cos), e.op("Mul", nil, rotSplit18(e, qk), sin))
				o := e.g.Op("Split", []*graph.Value{y, e.ints(2, 1)}, 2, graph.IntAttr("axis", 1))
				return o[0], o[1]
			},
			opset:  18,
			scheme: "rope", want: map[string]any{"layout": "half_split", "base": 10000.0, "num_heads": 2, "num_kv_heads": 1},
		},
		{
			// Phi-2's partial rotation: the first 16 of 40 dims sliced out,
			// rotated (Split at opset 13, Neg folded into a sign vector),
			// concatenated back with the rest.
			name: "rope_phi2_partial_slice", heads: 2, hd: 40, opset: 13,
			rope: func(e *xenv, q, k *graph.Value) (*graph.Value, *graph.Value) {
				cos, sin := halfCosSin(e, freqsMatMul(e, e.rangeS(), 10000, 16, "table"))
				return applyRope(q, k, func(x *graph.Value) *graph.Value {
					xr := e.op("Slice", nil, x, e.ints(0), e.ints(16), e.ints(-1))
					xp := e.op("Slice", nil, x, e.ints(16), e.ints(math.MaxInt64), e.ints(-1))
					y := e.op("Add", nil, e.op("Mul", nil, xr, cos), e.op("Mul", nil, rotSplit13SignMul(e, xr, 16), sin))
					return e.op("Concat", e.axis(-1), y, xp)
				})
			},
			scheme: "rope", want: map[string]any{"layout": "half_split", "base": 10000.0, "rotary_dim": 16, "head_dim": 40},
		},
		{
			// the T5 decoder with a KV cache: queries at Range(past, past+S),
			// keys at Range(0, past+S), causal buckets.
			name: "t5_decoder_with_cache", heads: 4, hd: 8, cache: true,
			bias: func(e *xenv, scores *graph.Value) *graph.Value {
				pl := e.pastLen()
				tot := e.op("Add", nil, pl, e.seq)
				ctx := e.op("Range", nil, pl, tot, e.int0(1))
				mem := e.op("Range", nil, e.int0(0), tot, e.int0(1))
				rel := e.op("Sub", nil, e.op("Unsqueeze", nil, mem, e.ints(0)), e.op("Unsqueeze", nil, ctx, e.ints(1)))
				bk := t5Bucket(e, rel, 32, 128, false)
				emb := e.op("Gather", nil, e.weight(32, e.heads), bk)
				bias := e.op("Unsqueeze", nil, e.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 2, 0, 1)}, emb), e.ints(0))
				return e.op("Add", nil, scores, bias)
			},
			scheme: "t5_relative_bias", want: map[string]any{"num_buckets": 32, "max_distance": 128, "bidirectional": false, "num_heads": 4},
		},
		{
			// keras: angle_rates = 1 / 10000^(2i/d) by Pow then Div, angles by
			// MatMul, concat [sin, cos], added to the embeddings.
			name: "sinusoidal_keras_concat_computed", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				d := e.D
				i := e.toFloat(e.op("Range", nil, e.int0(0), e.int0(int64(d/2)), e.int0(1)))
				ex := e.op("Div", nil, e.op("Mul", nil, i, e.f0(2)), e.f0(float32(d)))
				rates := e.op("Div", nil, e.f0(1), e.op("Pow", nil, e.f0(10000), ex))
				ang := e.op("MatMul", nil, e.op("Unsqueeze", nil, e.toFloat(e.rangeS()), e.ints(1)), e.op("Unsqueeze", nil, rates, e.ints(0)))
				pe := e.op("Concat", e.axis(-1), e.op("Sin", nil, ang), e.op("Cos", nil, ang))
				return e.op("Add", nil, x, pe)
			},
			scheme: "sinusoidal", want: map[string]any{"layout": "concat_sin_cos", "base": 10000.0, "dim": 32, "computed": true, "freq_denominator": "d/2"},
		},
		{
			// the same with the rates as (1/10000)^(2i/d) and positions scaled
			// after: Mul(rates, pos) with pos [S,1] on the right.
			name: "sinusoidal_keras_pow_of_reciprocal", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				d := e.D
				i := e.toFloat(e.op("Range", nil, e.int0(0), e.int0(int64(d)), e.int0(2)))
				rates := e.op("Pow", nil, e.op("Reciprocal", nil, e.f0(10000)), e.op("Div", nil, i, e.f0(float32(d))))
				ang := e.op("Mul", nil, e.op("Unsqueeze", nil, rates, e.ints(0)), e.op("Unsqueeze", nil, e.toFloat(e.rangeS()), e.ints(1)))
				pe := e.op("Concat", e.axis(1), e.op("Sin", nil, ang), e.op("Cos", nil, ang))
				return e.op("Add", nil, pe, x)
			},
			scheme: "sinusoidal", want: map[string]any{"layout": "concat_sin_cos", "base": 10000.0, "dim": 32, "computed": true, "freq_denominator": "d/2"},
		},
		{
			// tf2onnx: the keras tutorial's precomputed interleaved table
			// sliced by a dynamic Slice whose end comes from Shape(x).
			name: "sinusoidal_tf2onnx_sliced_table", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				tab := e.floats([]int64{64, int64(e.D)}, sinTableInterleaved(64, e.D))
				end := e.op("Slice", nil, e.op("Shape", nil, x), e.ints(1), e.ints(2), e.ints(0))
				pe := e.op("Slice", nil, tab, e.ints(0), end, e.ints(0))
				return e.op("Add", nil, x, e.op("Unsqueeze", nil, pe, e.ints(0)))
			},
			scheme: "sinusoidal", want: map[string]any{"layout": "interleaved", "base": 10000.0, "dim": 32, "computed": false, "max_positions": 64, "freq_denominator": "d/2", "position_offset": 0},
		},
		{
			// GPT-2 with a KV cache: Gather of wpe at Range(0,S) + past length.
			name: "learned_gather_past_offset", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				pos := e.op("Add", nil, e.rangeS(), e.pastLen())
				return e.op("Add", nil, x, e.op("Gather", nil, e.weight(96, e.D), pos))
			},
			scheme: "learned_absolute", want: map[string]any{"max_positions": 96, "dim": 32, "position_offset": 0},
		},
		{
			// a sliced table expanded to the batch: Slice(wpe, 0, S), Expand.
			name: "learned_slice_expand", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				sl := e.op("Slice", nil, e.weight(80, e.D), e.ints(0), e.op("Unsqueeze", nil, e.seq, e.ints(0)), e.ints(0))
				ex := e.op("Expand", nil, e.op("Unsqueeze", nil, sl, e.ints(0)), e.op("Shape", nil, x))
				return e.op("Add", nil, ex, x)
			},
			scheme: "learned_absolute", want: map[string]any{"max_positions": 80, "dim": 32, "position_offset": 0},
		},
		{
			// a learned table stored transposed, [dim, positions] (a
			// checkpoint laid out for x·Wᵀ), read with Gather on axis 1 and
			// transposed back to [S, dim].
			name: "learned_transposed_gather_axis1", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				g := e.op("Gather", e.axis(1), e.weight(e.D, 72), e.rangeS()) // [D, S]
				return e.op("Add", nil, x, e.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 1, 0)}, g))
			},
			scheme: "learned_absolute", want: map[string]any{"max_positions": 72, "dim": 32, "position_offset": 0},
		},
		{
			// RoBERTa's positions (padding_idx 1: ids != 1 counted, plus 1)
			// reading a transposed [dim, positions] table with Gather on
			// axis 1: [D, B, S], transposed to [B, S, D].
			name: "learned_transposed_gather_axis1_offset", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				m := e.toInt(e.op("Not", nil, e.op("Equal", nil, e.ids, e.int0(1))))
				pos := e.op("Add", nil, e.op("Mul", nil, e.op("CumSum", nil, m, e.int0(1)), m), e.int0(1))
				g := e.op("Gather", e.axis(1), e.weight(e.D, 66), pos)
				return e.op("Add", nil, x, e.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 1, 2, 0)}, g))
			},
			scheme: "learned_absolute", want: map[string]any{"max_positions": 66, "dim": 32, "position_offset": 2},
		},
		{
			// the transposed table read by a product with a one-hot of the
			// positions on axis 0: [D, 72]·[72, S], transposed.
			name: "learned_transposed_onehot_matmul", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				oh := e.op("OneHot", []*graph.Attr{graph.IntAttr("axis", 0)}, e.rangeS(), e.int0(72), e.f32(0, 1))
				pe := e.op("MatMul", nil, e.weight(e.D, 72), oh)
				return e.op("Add", nil, x, e.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 1, 0)}, pe))
			},
			scheme: "learned_absolute", want: map[string]any{"max_positions": 72, "dim": 32, "position_offset": 0},
		},
		{
			// the transposed table sliced on axis 1 to the sequence,
			// transposed and expanded to the batch.
			name: "learned_transposed_slice_axis1", heads: 2, hd: 16,
			abs: func(e *xenv, x *graph.Value) *graph.Value {
				sl := e.op("Slice", nil, e.weight(e.D, 80), e.ints(0), e.op("Unsqueeze", nil, e.seq, e.ints(0)), e.ints(1))
				tr := e.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 1, 0)}, sl)
				return e.op("Add", nil, x, tr)
			},
			scheme: "learned_absolute", want: map[string]any{"max_positions": 80, "dim": 32, "position_offset": 0},
		},
		{
			// BLOOM-like with 6 heads: slopes computed at run time from the
			// head count (the extra odd powers concatenated), bias slope·(j-i)
			// added to Where-masked scores.
			name: "alibi_runtime_slopes_6_heads_where", heads: 6, hd: 8,
			bias: func(e *xenv, scores *graph.Value) *graph.Value {
				r := e.toFloat(e.rangeS())
				rel := e.op("Sub", nil, e.op("Unsqueeze", nil, r, e.ints(0)), e.op("Unsqueeze", nil, r, e.ints(1)))
				return e.op("Add", nil, causalWhere(e, scores), e.op("Mul", nil, rel, runtimeSlopes(e, 6)))
			},
			scheme: "alibi", want: map[string]any{"num_heads": 6, "slopes": bloomSlopes(6), "symmetric": false},
		},
		{
			// MPT-like with 8 heads: run-time slopes times the key positions
			// only (shift-invariant along a row), Where-masked scores.
			name: "alibi_runtime_slopes_8_heads_keys", heads: 8, hd: 4,
			bias: func(e *xenv, scores *graph.Value) *graph.Value {
				r := e.op("Unsqueeze", nil, e.toFloat(e.rangeS()), e.ints(0)) // [1, S]
				return e.op("Add", nil, e.op("Mul", nil, runtimeSlopes(e, 8), r), causalWhere(e, scores))
			},
			scheme: "alibi", want: map[string]any{"num_heads": 8, "slopes": bloomSlopes(8), "symmetric": false},
		},
		{
			// T5 encoder bias with the bucket function in another order.
			name: "t5_bidirectional_reordered", heads: 4, hd: 8,
			bias:   func(e *xenv, scores *graph.Value) *graph.Value { return t5Bias(e, scores, 32, 128, true) },
			scheme: "t5_relative_bias", want: map[string]any{"num_buckets": 32, "max_distance": 128, "bidirectional": true, "num_heads": 4},
		},
		{
			// T5 decoder (causal) bias, -min(rel, 0) as Relu(-rel).
			name: "t5_causal_relu", heads: 4, hd: 8,
			bias:   func(e *xenv, scores *graph.Value) *graph.Value { return t5Bias(e, scores, 32, 64, false) },
			scheme: "t5_relative_bias", want: map[string]any{"num_buckets": 32, "max_distance": 64, "bidirectional": false, "num_heads": 4},
		},
	}
}

// TestExporterForms audits each variant and checks the scheme, that it
// reaches the block, and every expected param.
func TestExporterForms(t *testing.T) {
	s := schema(t)
	for _, f := range exporterForms() {
		t.Run(f.name, func(t *testing.T) {
			m := buildExporterForm(f)
			r, ctx, err := audit.AuditModel(m, f.name, passes.Options{Trace: true})
			if err != nil {
				t.Fatal(err)
			}
			validate(t, s, r)
			if len(r.Schemes) != 1 || r.Schemes[0] != f.scheme || len(r.Layers) != 1 || len(r.Findings) != 1 {
				t.Fatalf("schemes %v, layers %v, %d findings; want one %s layer (trace %v)", r.Schemes, r.Layers, len(r.Findings), f.scheme, ctx.Trace())
			}
			got := jsonParams(r.Findings[0])
			for k, w := range f.want {
				if !closeEnough(w, got[k]) {
					t.Errorf("%s = %v, want %v (params %v)", k, got[k], w, got)
				}
			}
		})
	}
}
