package testmodels

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// LlamaConfig shapes a Llama-style decoder built by Llama.
type LlamaConfig struct {
	Layers    int
	Hidden    int
	Heads     int
	KVHeads   int
	FFN       int
	Vocab     int
	RopeBase  float64
	Opset     int64
	Seed      uint64
	NoWeights bool // use 1-element placeholder weights (for graph benchmarks)
	// RoPE says how the rotation is expressed (default RopeComputed).
	RoPE RopeForm
	// MaxPositions is the number of rows of stored cos/sin tables
	// (RopeCacheTable and the fused forms); default 128.
	MaxPositions int
	// RotateHalfFunction writes rotate_half as a model-local function
	// (domain onnxpe.test) whose split point is an attribute reference,
	// as function-based exporters do.
	RotateHalfFunction bool
	// InvFreq, when set, replaces the frequencies base^(-2i/head_dim)
	// (head_dim/2 of them; a scaled RoPE), and RopeScale, when not 0,
	// multiplies cos and sin (YaRN's attention factor): a model built with
	// a scaling rule, the reference onnxpe extend's tests compare with.
	InvFreq   []float64
	RopeScale float64
	// DType is the element type of the weights, activations, logits and
	// stored cos/sin tables: graph.Float (also when 0), graph.Float16 or
	// graph.BFloat16, as half exports have them. In a half type a computed
	// RoPE keeps its frequencies, angles and cos/sin in float32 and casts
	// cos/sin to it (Hugging Face's .to(x.dtype)); stored tables and the
	// fused ops' caches hold the float32 values rounded to it once (ONNX
	// Runtime GenAI's fp16 builds); the causal mask uses float16's lowest
	// value in float16 (bfloat16 has float32's range: -1e9 stays finite).
	DType graph.DataType
	// NoPositionIDs takes no position_ids input: a computed RoPE turns
	// token i by i (Range(0, seq), as exports of models that count
	// positions from 0 have it).
	NoPositionIDs bool
	// KVCache gives every layer a KV cache as Hugging Face's exports with
	// past_key_values have it: inputs past_key_values.L.key/value [batch,
	// kv_heads, past, head_dim] concatenated before the new (rotated) keys
	// and values, outputs present.L.key/value [batch, kv_heads, past + seq,
	// head_dim], the causal mask [seq, past + seq] (query i sees the keys
	// up to past + i). It needs position_ids.
	KVCache bool
	// Store, when set, receives each weight as it is made and returns the
	// tensor the model holds instead (a caller building a model larger
	// than memory writes the bytes to a side file and returns
	// graph.NewExternalTensor); it may panic on a write error.
	Store func(*graph.Tensor) *graph.Tensor
}

// RopeForm is how a Llama build expresses its rotary embedding.
type RopeForm int

const (
	// RopeComputed computes cos/sin from position_ids and inv_freq inside
	// the graph, once, shared by all layers (Hugging Face Llama).
	RopeComputed RopeForm = iota
	// RopeCacheTable stores cos/sin tables [max_positions, head_dim] and
	// gathers rows by position_ids, shared by all layers (older Hugging
	// Face Llama, GPT-NeoX).
	RopeCacheTable
	// RopeFusedMS uses com.microsoft RotaryEmbedding nodes with stored
	// [max_positions, head_dim/2] caches.
	RopeFusedMS
	// RopeFusedONNX uses the standard RotaryEmbedding (opset 23).
	RopeFusedONNX
)

func (r RopeForm) String() string {
	return [...]string{"computed", "cache_table", "fused_com_microsoft", "fused_onnx"}[r]
}

// DefaultLlama is a tiny Llama: 2 layers, hidden 64, 4 heads, 2 KV heads.
var DefaultLlama = LlamaConfig{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 128, RopeBase: 10000, Opset: 17, Seed: 1}

// llamaBuilder carries the state of one Llama build.
type llamaBuilder struct {
	cfg LlamaConfig
	g   *graph.Graph
	rng *rand.Rand
}

func (b *llamaBuilder) op(op string, attrs []*graph.Attr, in ...*graph.Value) *graph.Value {
	return b.g.Op(op, in, 1, attrs...)[0]
}

func (b *llamaBuilder) i64(name string, v ...int64) *graph.Value {
	t, err := graph.NewTensor(name, graph.Int64, []int64{int64(len(v))}, v)
	if err != nil {
		panic(err)
	}
	return b.g.AddInitializer(t)
}

func (b *llamaBuilder) scalar(name string, v float32) *graph.Value {
	return b.g.AddInitializer(b.floats(name, nil, []float32{v}))
}

// dtype is the element type of the build's weights and activations.
func (b *llamaBuilder) dtype() graph.DataType {
	if b.cfg.DType == 0 {
		return graph.Float
	}
	return b.cfg.DType
}

// floats stores v in the build's element type, rounding each value once.
func (b *llamaBuilder) floats(name string, dims []int64, v []float32) *graph.Tensor {
	var t *graph.Tensor
	var err error
	if dt := b.dtype(); dt == graph.Float {
		t, err = graph.NewTensor(name, graph.Float, dims, v)
	} else {
		w := make([]float64, len(v))
		for i, x := range v {
			w[i] = float64(x)
		}
		t, err = graph.TensorFromFloat64(name, dt, dims, w)
	}
	if err != nil {
		panic(err)
	}
	return t
}

func (b *llamaBuilder) weight(name string, dims ...int64) *graph.Value {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	if b.cfg.NoWeights {
		dims = []int64{1}
		n = 1
	}
	v := make([]float32, n)
	scale := 1 / math.Sqrt(float64(dims[0]))
	for i := range v {
		v[i] = float32(b.rng.NormFloat64() * scale)
	}
	t := b.floats(name, dims, v)
	if b.cfg.Store != nil {
		t = b.cfg.Store(t)
	}
	return b.g.AddInitializer(t)
}

// Llama builds a Llama-style decoder as PyTorch exports it: token
// embedding; per layer RMSNorm, Q/K/V projections, half-split RoPE computed
// from position_ids and an inv_freq table (rotate_half with Slice, Neg and
// Concat), grouped-query attention with a causal mask, and a SwiGLU MLP;
// final norm and LM head. Inputs: input_ids and position_ids (int64,
// [batch, seq]); output: logits.
func Llama(cfg LlamaConfig) *graph.Model {
	if cfg.MaxPositions == 0 {
		cfg.MaxPositions = 128
	}
	if cfg.RoPE == RopeFusedONNX && cfg.Opset < 23 {
		panic("testmodels: the standard RotaryEmbedding needs opset 23")
	}
	if cfg.NoPositionIDs && (cfg.RoPE != RopeComputed || cfg.Opset < 11) {
		panic("testmodels: a Llama without position ids computes its RoPE (Range needs opset 11)")
	}
	if cfg.KVCache && (cfg.NoPositionIDs || cfg.Opset < 14) {
		panic("testmodels: a Llama with a KV cache takes position_ids (and Trilu needs opset 14)")
	}
	if cfg.DType != 0 && cfg.DType != graph.Float && cfg.DType != graph.Float16 && cfg.DType != graph.BFloat16 {
		panic("testmodels: a Llama is built in float32, float16 or bfloat16")
	}
	opsets := []graph.Opset{{Domain: "", Version: cfg.Opset}}
	if cfg.RotateHalfFunction {
		opsets = append(opsets, graph.Opset{Domain: "onnxpe.test", Version: 1})
	}
	if cfg.RoPE == RopeFusedMS {
		opsets = append(opsets, graph.Opset{Domain: "com.microsoft", Version: 1})
	}
	ir := int64(8)
	if cfg.Opset >= 21 {
		ir = 10
	}
	m := graph.NewModel(ir, "onnxpe-testmodels", opsets...)
	b := &llamaBuilder{cfg: cfg, g: m.Graph, rng: rand.New(rand.NewPCG(cfg.Seed, 7))}
	g := b.g
	hd := int64(cfg.Hidden / cfg.Heads)
	batchSeq := []graph.Dim{{Param: "batch"}, {Param: "seq"}}
	ids := g.AddInput("input_ids", graph.TensorType(graph.Int64, batchSeq))
	var pos *graph.Value
	if !cfg.NoPositionIDs {
		pos = g.AddInput("position_ids", graph.TensorType(graph.Int64, batchSeq))
	}

	emb := b.weight("embed_tokens.weight", int64(cfg.Vocab), int64(cfg.Hidden))
	x := b.op("Gather", nil, emb, ids)

	axes := func(v ...int64) []*graph.Attr {
		if cfg.Opset >= 13 {
			return nil
		}
		return []*graph.Attr{graph.IntsAttr("axes", v...)}
	}
	unsq := func(x *graph.Value, ax int64) *graph.Value {
		if cfg.Opset >= 13 {
			return b.op("Unsqueeze", nil, x, b.i64(fmt.Sprintf("axes_%d", ax), ax))
		}
		return b.op("Unsqueeze", axes(ax), x)
	}
	if cfg.NoPositionIDs { // [1, S]: Range(0, seq)
		scalar := func(name string, v int64) *graph.Value {
			t, _ := graph.NewTensor(name, graph.Int64, nil, []int64{v})
			return g.AddInitializer(t)
		}
		seq := b.op("Gather", []*graph.Attr{graph.IntAttr("axis", 0)}, b.op("Shape", nil, ids), scalar("pos_seq_axis", 1))
		pos = unsq(b.op("Range", nil, scalar("pos_start", 0), seq, scalar("pos_delta", 1)), 0)
	}
	// RoPE: inv_freq[i] = base^(-2i/hd), angle(p, i) = p * inv_freq[i].
	inv := make([]float64, hd/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(cfg.RopeBase, float64(2*i)/float64(hd))
	}
	if cfg.InvFreq != nil {
		if len(cfg.InvFreq) != len(inv) {
			panic("testmodels: InvFreq needs head_dim/2 frequencies")
		}
		inv = cfg.InvFreq
	}
	scale := float32(1)
	if cfg.RopeScale != 0 {
		scale = float32(cfg.RopeScale)
	}
	// table stores f(p * inv_freq[i]) for p < MaxPositions; dup repeats the
	// half so that a row has head_dim entries (the cat((freqs, freqs)) form).
	table := func(name string, f func(float64) float64, dup bool) *graph.Value {
		w := len(inv)
		if dup {
			w *= 2
		}
		v := make([]float32, cfg.MaxPositions*w)
		for p := 0; p < cfg.MaxPositions; p++ {
			for i := 0; i < w; i++ {
				v[p*w+i] = scale * float32(f(float64(float32(p)*float32(inv[i%len(inv)]))))
			}
		}
		return g.AddInitializer(b.floats(name, []int64{int64(cfg.MaxPositions), int64(w)}, v))
	}
	var cos, sin *graph.Value // [B,1,S,hd] for the unfused forms
	var cosCache, sinCache *graph.Value
	switch cfg.RoPE {
	case RopeComputed:
		inv32 := make([]float32, len(inv))
		for i, x := range inv {
			inv32[i] = float32(x)
		}
		invT, _ := graph.NewTensor("rotary_emb.inv_freq", graph.Float, []int64{1, hd / 2, 1}, inv32)
		invFreq := g.AddInitializer(invT)
		posF := b.op("Cast", []*graph.Attr{graph.IntAttr("to", int64(graph.Float))}, unsq(pos, 1)) // [B,1,S]
		freqs := b.op("MatMul", nil, invFreq, posF)                                                // [B,hd/2,S]
		freqs = b.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1)}, freqs)           // [B,S,hd/2]
		embAng := b.op("Concat", []*graph.Attr{graph.IntAttr("axis", -1)}, freqs, freqs)           // [B,S,hd]
		scaled := func(v *graph.Value, name string) *graph.Value {
			if scale == 1 {
				return v
			}
			t, _ := graph.NewTensor(name, graph.Float, nil, []float32{scale})
			return b.op("Mul", nil, v, g.AddInitializer(t))
		}
		toDType := func(v *graph.Value) *graph.Value { // .to(x.dtype)
			if b.dtype() == graph.Float {
				return v
			}
			return b.op("Cast", []*graph.Attr{graph.IntAttr("to", int64(b.dtype()))}, v)
		}
		cos = unsq(toDType(scaled(b.op("Cos", nil, embAng), "rotary_emb.attention_factor_cos")), 1) // [B,1,S,hd]
		sin = unsq(toDType(scaled(b.op("Sin", nil, embAng), "rotary_emb.attention_factor_sin")), 1)
	case RopeCacheTable:
		cos = unsq(b.op("Gather", nil, table("cos_cached", math.Cos, true), pos), 1)
		sin = unsq(b.op("Gather", nil, table("sin_cached", math.Sin, true), pos), 1)
	case RopeFusedMS, RopeFusedONNX:
		cosCache = table("cos_cache", math.Cos, false)
		sinCache = table("sin_cache", math.Sin, false)
	}

	// Causal mask from the sequence length: (1 - tril(ones)) * -inf-ish;
	// with a KV cache [seq, past + seq], tril offset by the past.
	var pastK, pastV []*graph.Value
	if cfg.KVCache {
		kvDims := []graph.Dim{{Param: "batch"}, {Value: int64(cfg.KVHeads), Known: true}, {Param: "past"}, {Value: hd, Known: true}}
		for l := 0; l < cfg.Layers; l++ {
			pastK = append(pastK, g.AddInput(fmt.Sprintf("past_key_values.%d.key", l), graph.TensorType(b.dtype(), kvDims)))
			pastV = append(pastV, g.AddInput(fmt.Sprintf("past_key_values.%d.value", l), graph.TensorType(b.dtype(), kvDims)))
		}
	}
	shape := b.op("Shape", nil, ids)
	seqLen := b.op("Gather", []*graph.Attr{graph.IntAttr("axis", 0)}, shape, b.i64("one_idx", 1))
	totalLen, pastLen := seqLen, (*graph.Value)(nil)
	if cfg.KVCache {
		t, _ := graph.NewTensor("past_axis", graph.Int64, nil, []int64{2})
		pastLen = b.op("Gather", []*graph.Attr{graph.IntAttr("axis", 0)}, b.op("Shape", nil, pastK[0]), g.AddInitializer(t))
		totalLen = b.op("Add", nil, seqLen, b.op("Unsqueeze", nil, pastLen, b.i64("past_len_axes", 0)))
	}
	sq := b.op("Concat", []*graph.Attr{graph.IntAttr("axis", 0)}, seqLen, totalLen)
	ones := b.op("ConstantOfShape", []*graph.Attr{graph.TensorAttr("value", b.floats("one_f", []int64{1}, []float32{1}))}, sq)
	lower := b.op("Trilu", []*graph.Attr{graph.IntAttr("upper", 0)}, ones)
	if cfg.KVCache {
		lower = b.op("Trilu", []*graph.Attr{graph.IntAttr("upper", 0)}, ones, pastLen)
	}
	negBig := float32(-1e9)
	if b.dtype() == graph.Float16 {
		negBig = -65504 // torch.finfo(torch.float16).min: -1e9 is -inf, and 0·-inf NaN
	}
	mask := b.op("Mul", nil, b.op("Sub", nil, b.scalar("one", 1), lower), b.scalar("neg_big", negBig))

	var presents []*graph.Value
	half := hd / 2
	if cfg.RotateHalfFunction {
		f := m.AddFunction("onnxpe.test", "RotateHalf", "half")
		f.SetOpsetVersion("", cfg.Opset)
		body := f.Body
		x := body.AddInput("x", nil)
		ints := func(v ...int64) *graph.Value {
			return body.Op("Constant", nil, 1, graph.IntsAttr("value_ints", v...))[0]
		}
		h := body.Op("Constant", nil, 1, graph.RefAttr("value_ints", "half", graph.AttrInts))[0]
		ax := ints(-1)
		x1 := body.Op("Slice", []*graph.Value{x, ints(0), h, ax}, 1)[0]
		x2 := body.Op("Slice", []*graph.Value{x, h, ints(math.MaxInt64), ax}, 1)[0]
		body.AddOutput(body.Op("Concat", []*graph.Value{body.Op("Neg", []*graph.Value{x2}, 1)[0], x1}, 1, graph.IntAttr("axis", -1))[0])
	}
	rotateHalf := func(t *graph.Value, l int) *graph.Value {
		if cfg.RotateHalfFunction {
			n := g.NewNode("RotateHalf", "onnxpe.test", []*graph.Value{t}, 1, graph.IntsAttr("half", half))
			g.Append(n)
			return n.Output(0)
		}
		x1 := b.op("Slice", nil, t, b.i64(fmt.Sprintf("l%d_s0", l), 0), b.i64(fmt.Sprintf("l%d_e0", l), half), b.i64(fmt.Sprintf("l%d_ax", l), -1))
		x2 := b.op("Slice", nil, t, b.i64(fmt.Sprintf("l%d_s1", l), half), b.i64(fmt.Sprintf("l%d_e1", l), math.MaxInt64), b.i64(fmt.Sprintf("l%d_ax2", l), -1))
		return b.op("Concat", []*graph.Attr{graph.IntAttr("axis", -1)}, b.op("Neg", nil, x2), x1)
	}
	rms := func(x *graph.Value, name string) *graph.Value {
		w := b.weight(name+".weight", int64(cfg.Hidden))
		sq := b.op("Pow", nil, x, b.scalar(name+".two", 2))
		var v *graph.Value
		if cfg.Opset >= 18 {
			v = b.op("ReduceMean", []*graph.Attr{graph.IntAttr("keepdims", 1)}, sq, b.i64(name+".axes", -1))
		} else {
			v = b.op("ReduceMean", []*graph.Attr{graph.IntsAttr("axes", -1), graph.IntAttr("keepdims", 1)}, sq)
		}
		r := b.op("Sqrt", nil, b.op("Add", nil, v, b.scalar(name+".eps", 1e-6)))
		return b.op("Mul", nil, w, b.op("Div", nil, x, r))
	}
	heads := func(t *graph.Value, n int64, l int, nm string) *graph.Value {
		r := b.op("Reshape", nil, t, b.i64(fmt.Sprintf("l%d_%s_shape", l, nm), 0, 0, n, hd))
		return b.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, r)
	}
	group := int64(cfg.Heads / cfg.KVHeads)
	repeatKV := func(t *graph.Value, l int, nm string) *graph.Value {
		if group == 1 {
			return t
		}
		// [B,kv,S,hd] -> [B,kv,1,S,hd] -> expand group -> [B,heads,S,hd]
		u := unsq(t, 2)
		sh := b.op("Shape", nil, u)
		bs := b.op("Slice", nil, sh, b.i64(fmt.Sprintf("l%d_%s_b0", l, nm), 0), b.i64(fmt.Sprintf("l%d_%s_b1", l, nm), 1))
		tail := b.op("Slice", nil, sh, b.i64(fmt.Sprintf("l%d_%s_t0", l, nm), 3), b.i64(fmt.Sprintf("l%d_%s_t1", l, nm), 5))
		tgt := b.op("Concat", []*graph.Attr{graph.IntAttr("axis", 0)}, bs, b.i64(fmt.Sprintf("l%d_%s_kv", l, nm), int64(cfg.KVHeads), group), tail)
		e := b.op("Expand", nil, u, tgt)
		return b.op("Reshape", nil, e, b.i64(fmt.Sprintf("l%d_%s_rs", l, nm), 0, int64(cfg.Heads), -1, hd))
	}

	for l := 0; l < cfg.Layers; l++ {
		p := fmt.Sprintf("layers.%d", l)
		h := rms(x, p+".input_layernorm")
		q := heads(b.op("MatMul", nil, h, b.weight(p+".q_proj", int64(cfg.Hidden), int64(cfg.Heads)*hd)), int64(cfg.Heads), l, "q")
		k := heads(b.op("MatMul", nil, h, b.weight(p+".k_proj", int64(cfg.Hidden), int64(cfg.KVHeads)*hd)), int64(cfg.KVHeads), l, "k")
		v := heads(b.op("MatMul", nil, h, b.weight(p+".v_proj", int64(cfg.Hidden), int64(cfg.KVHeads)*hd)), int64(cfg.KVHeads), l, "v")
		switch cfg.RoPE {
		case RopeComputed, RopeCacheTable:
			q = b.op("Add", nil, b.op("Mul", nil, q, cos), b.op("Mul", nil, rotateHalf(q, 2*l), sin))
			k = b.op("Add", nil, b.op("Mul", nil, k, cos), b.op("Mul", nil, rotateHalf(k, 2*l+1), sin))
		case RopeFusedMS:
			rot := func(t *graph.Value) *graph.Value {
				n := g.NewNode("RotaryEmbedding", "com.microsoft", []*graph.Value{t, pos, cosCache, sinCache}, 1, graph.IntAttr("interleaved", 0))
				g.Append(n)
				return n.Output(0)
			}
			q, k = rot(q), rot(k)
		case RopeFusedONNX:
			rot := func(t *graph.Value) *graph.Value {
				return b.op("RotaryEmbedding", []*graph.Attr{graph.IntAttr("interleaved", 0)}, t, cosCache, sinCache, pos)
			}
			q, k = rot(q), rot(k)
		}
		if cfg.KVCache {
			cat := func(past, x *graph.Value, kind string) *graph.Value {
				y := b.op("Concat", []*graph.Attr{graph.IntAttr("axis", 2)}, past, x)
				if err := g.RenameValue(y, fmt.Sprintf("present.%d.%s", l, kind)); err != nil {
					panic(err)
				}
				y.Type = graph.TensorType(b.dtype(), []graph.Dim{{Param: "batch"}, {Value: int64(cfg.KVHeads), Known: true}, {Param: "total"}, {Value: hd, Known: true}})
				presents = append(presents, y)
				return y
			}
			k, v = cat(pastK[l], k, "key"), cat(pastV[l], v, "value")
		}
		k = repeatKV(k, l, "k")
		v = repeatKV(v, l, "v")
		kt := b.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 1, 3, 2)}, k)
		s := b.op("Div", nil, b.op("MatMul", nil, q, kt), b.scalar(p+".scale", float32(math.Sqrt(float64(hd)))))
		a := b.op("Softmax", []*graph.Attr{graph.IntAttr("axis", -1)}, b.op("Add", nil, s, mask))
		o := b.op("Transpose", []*graph.Attr{graph.IntsAttr("perm", 0, 2, 1, 3)}, b.op("MatMul", nil, a, v))
		o = b.op("Reshape", nil, o, b.i64(p+".o_shape", 0, 0, int64(cfg.Hidden)))
		x = b.op("Add", nil, x, b.op("MatMul", nil, o, b.weight(p+".o_proj", int64(cfg.Heads)*hd, int64(cfg.Hidden))))
		h = rms(x, p+".post_attention_layernorm")
		gate := b.op("MatMul", nil, h, b.weight(p+".gate_proj", int64(cfg.Hidden), int64(cfg.FFN)))
		up := b.op("MatMul", nil, h, b.weight(p+".up_proj", int64(cfg.Hidden), int64(cfg.FFN)))
		act := b.op("Mul", nil, gate, b.op("Sigmoid", nil, gate))
		x = b.op("Add", nil, x, b.op("MatMul", nil, b.op("Mul", nil, act, up), b.weight(p+".down_proj", int64(cfg.FFN), int64(cfg.Hidden))))
	}
	x = rms(x, "norm")
	logits := b.op("MatMul", nil, x, b.weight("lm_head", int64(cfg.Hidden), int64(cfg.Vocab)))
	logits.Type = graph.TensorType(b.dtype(), []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: int64(cfg.Vocab), Known: true}})
	g.AddOutput(logits)
	for _, p := range presents {
		g.AddOutput(p)
	}
	return m
}

// Chain builds a graph of n nodes: alternating Add and Mul of a [4] input
// with constants, for benchmarks of graph size.
func Chain(n int) *graph.Model {
	m := graph.NewModel(8, "onnxpe-testmodels", graph.Opset{Domain: "", Version: 17})
	g := m.Graph
	x := g.AddInput("x", graph.TensorType(graph.Float, graph.Dims(4)))
	ct, _ := graph.NewTensor("c", graph.Float, []int64{4}, []float32{1, 2, 3, 4})
	c := g.AddInitializer(ct)
	for i := 0; i < n; i++ {
		op := "Add"
		if i%2 == 1 {
			op = "Mul"
		}
		x = g.Op(op, []*graph.Value{x, c}, 1)[0]
	}
	g.AddOutput(x)
	return m
}

// LlamaRoPEForm is one way a Llama of this package computes or reads its
// RoPE: Edit sets it on a configuration.
type LlamaRoPEForm struct {
	Name string
	Edit func(*LlamaConfig)
}

// LlamaRoPEForms are the four RoPE forms tests build Llamas in: computed
// in the graph (opset 18), a cos/sin table gathered by position (opset
// 20), com.microsoft RotaryEmbedding, ONNX RotaryEmbedding (opset 23).
var LlamaRoPEForms = []LlamaRoPEForm{
	{"computed", func(c *LlamaConfig) { c.Opset = 18 }},
	{"cache_table", func(c *LlamaConfig) { c.Opset, c.RoPE = 20, RopeCacheTable }},
	{"fused_ms", func(c *LlamaConfig) { c.RoPE = RopeFusedMS }},
	{"fused_onnx", func(c *LlamaConfig) { c.Opset, c.RoPE = 23, RopeFusedONNX }},
}

// LlamaInputs draws seeded inputs of a Llama built with cfg for one call
// of batch rows of seq new tokens after past cached ones (cfg.KVCache;
// past 0 gives empty caches): token ids, position_ids past..past+seq-1,
// past_key_values.L.key/value drawn N(0, 1).
func LlamaInputs(cfg LlamaConfig, batch, seq, past int, seed uint64) map[string]*kernels.Tensor {
	rng := rand.New(rand.NewPCG(seed, 17))
	ids := make([]int64, batch*seq)
	pos := make([]int64, batch*seq)
	for i := range ids {
		ids[i] = int64(rng.IntN(cfg.Vocab))
		pos[i] = int64(past + i%seq)
	}
	in := map[string]*kernels.Tensor{"input_ids": kernels.FromSlice([]int{batch, seq}, ids)}
	if !cfg.NoPositionIDs {
		in["position_ids"] = kernels.FromSlice([]int{batch, seq}, pos)
	}
	if cfg.KVCache {
		hd := cfg.Hidden / cfg.Heads
		for l := 0; l < cfg.Layers; l++ {
			for _, kind := range []string{"key", "value"} {
				in[fmt.Sprintf("past_key_values.%d.%s", l, kind)] = inDType(randTensor(rng, batch, cfg.KVHeads, past, hd), cfg.DType)
			}
		}
	}
	return in
}
