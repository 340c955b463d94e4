package testmodels

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// Models in the forms deployed transformers take after ONNX Runtime's
// tools have been at them: ONNX Runtime GenAI's model builder
// (GroupQueryAttention with do_rotary, MatMulNBits), its transformer
// optimizer (EmbedLayerNormalization + Attention; RotaryEmbedding +
// MultiHeadAttention) and the newest exporters' static KV cache (opset-24
// Attention with TensorScatter). They are built in Go, tiny and seeded;
// ONNX Runtime must run each as onnxpe does (testmodels' differential
// tests), and the audit's detectors of fused forms can use them with
// their Truth.

// DeployConfig shapes a deployment-form model.
type DeployConfig struct {
	Layers, Hidden, Heads, KVHeads, FFN, Vocab int
	RopeBase                                   float64
	MaxPositions                               int // rows of the cos/sin caches and position tables
	Seed                                       uint64
	// DType is the element type of FormGenAIGQA's weights, activations,
	// past/present caches, logits and cos/sin caches: graph.Float (also
	// when 0), graph.Float16 (GenAI's fp16 builds: every float32 value
	// rounded once) or graph.BFloat16. FormGenAIInt4 takes graph.Float16
	// too (GenAI's fp16 int4 builds: MatMulNBits on float16 activations
	// with float16 scales; the 4-bit weights and zero points are
	// unchanged). The other forms are float32 only.
	DType graph.DataType
}

// DefaultDeploy is a 2-layer model of hidden size 64: 4 query heads, 2
// key/value heads, head size 16.
var DefaultDeploy = DeployConfig{Layers: 2, Hidden: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 96, RopeBase: 10000, MaxPositions: 64, Seed: 21}

// DeployForm names one deployment form.
type DeployForm string

const (
	// FormGenAIGQA is ONNX Runtime GenAI's decoder: SimplifiedLayerNorm /
	// SkipSimplifiedLayerNormalization, GroupQueryAttention with
	// do_rotary and cos/sin caches, seqlens_k and total_sequence_length
	// computed from attention_mask, past/present per layer.
	FormGenAIGQA DeployForm = "genai_gqa_rotary"
	// FormGenAIInt4 is FormGenAIGQA with every projection a 4-bit
	// MatMulNBits (block 32, zero points): GenAI's int4 models.
	FormGenAIInt4 DeployForm = "genai_matmulnbits_int4"
	// FormRotaryMHA is com.microsoft RotaryEmbedding on Q and K feeding
	// MultiHeadAttention (unidirectional, key padding mask, past/present).
	FormRotaryMHA DeployForm = "rotary_multiheadattention"
	// FormEmbedLNAttention is a BERT encoder as ONNX Runtime's optimizer
	// saves it: EmbedLayerNormalization (word, position and segment
	// embeddings; mask_index), Attention, SkipLayerNormalization,
	// BiasGelu.
	FormEmbedLNAttention DeployForm = "embedlayernorm_attention"
	// FormStaticCache24 is an opset-24 decoder with a static KV cache:
	// RMSNormalization, RotaryEmbedding (opset 23) on (B, N, S, H) Q and
	// K, TensorScatter writing the new keys and values into preallocated
	// caches at write_indices, Attention (opset 24, is_causal) reading
	// nonpad_kv_seqlen of them.
	FormStaticCache24 DeployForm = "attention24_tensorscatter"
)

// DeployForms lists the forms.
var DeployForms = []DeployForm{FormGenAIGQA, FormGenAIInt4, FormRotaryMHA, FormEmbedLNAttention, FormStaticCache24}

// BuildDeploy builds form with cfg.
func BuildDeploy(form DeployForm, cfg DeployConfig) *graph.Model {
	switch cfg.DType {
	case 0, graph.Float:
	case graph.Float16:
		if form != FormGenAIGQA && form != FormGenAIInt4 {
			panic("testmodels: only " + string(FormGenAIGQA) + " and " + string(FormGenAIInt4) + " are built in float16")
		}
	case graph.BFloat16:
		if form != FormGenAIGQA {
			panic("testmodels: only " + string(FormGenAIGQA) + " is built in bfloat16")
		}
	default:
		panic("testmodels: a deployment form is built in float32, float16 or bfloat16")
	}
	b := newDeployBuilder(cfg)
	switch form {
	case FormGenAIGQA:
		b.genai(false)
	case FormGenAIInt4:
		b.genai(true)
	case FormRotaryMHA:
		b.rotaryMHA()
	case FormEmbedLNAttention:
		b.bert()
	case FormStaticCache24:
		b.staticCache()
	default:
		panic("testmodels: unknown deployment form " + string(form))
	}
	return b.m
}

// DeployTruth is the audit's expected finding for form: learned absolute
// positions for the BERT form, half-split RoPE (stored cos/sin caches of
// MaxPositions rows) for the others.
func DeployTruth(form DeployForm, cfg DeployConfig) Truth {
	layers := make([]int, cfg.Layers)
	ls := make([]LayerScheme, cfg.Layers)
	scheme := "rope"
	if form == FormEmbedLNAttention {
		scheme = "learned_absolute"
	}
	for i := range layers {
		layers[i] = i
		ls[i] = LayerScheme{Index: i, Scheme: scheme}
	}
	hd := cfg.Hidden / cfg.Heads
	params := map[string]any{"max_positions": float64(cfg.MaxPositions), "dim": float64(cfg.Hidden)}
	if scheme == "rope" {
		kv := cfg.KVHeads
		if form == FormRotaryMHA {
			kv = cfg.Heads
		}
		params = map[string]any{"layout": "half_split", "base": cfg.RopeBase, "head_dim": float64(hd), "rotary_dim": float64(hd),
			"num_heads": float64(cfg.Heads), "num_kv_heads": float64(kv), "scaling": "none", "factor": 1.0,
			"max_positions": float64(cfg.MaxPositions)}
	}
	return Truth{Schemes: []string{scheme}, Layers: ls,
		Findings: []FindingTruth{{Scheme: scheme, Layers: layers, Fused: true, Params: params}}}
}

type deployBuilder struct {
	cfg DeployConfig
	m   *graph.Model
	g   *graph.Graph
	rng *rand.Rand
	hd  int64
}

func newDeployBuilder(cfg DeployConfig) *deployBuilder {
	return &deployBuilder{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 11)), hd: int64(cfg.Hidden / cfg.Heads)}
}

func (b *deployBuilder) model(opsets ...graph.Opset) {
	b.m = graph.NewModel(10, "onnxpe-testmodels", opsets...)
	b.g = b.m.Graph
}

func (b *deployBuilder) op(op, domain string, in []*graph.Value, attrs ...*graph.Attr) *graph.Value {
	return b.opN(op, domain, in, 1, attrs...)[0]
}

func (b *deployBuilder) opN(op, domain string, in []*graph.Value, n int, attrs ...*graph.Attr) []*graph.Value {
	nd := b.g.NewNode(op, domain, in, n, attrs...)
	b.g.Append(nd)
	return nd.Outputs()
}

// dtype is the element type of the build's floats.
func (b *deployBuilder) dtype() graph.DataType {
	if b.cfg.DType == 0 {
		return graph.Float
	}
	return b.cfg.DType
}

// floats stores v in the build's element type, rounding each float32 value
// once (as GenAI's builder converts its float32 tensors).
func (b *deployBuilder) floats(name string, dims []int64, v []float32) *graph.Tensor {
	dt := b.dtype()
	if dt == graph.Float {
		return f32Tensor(name, dims, v)
	}
	w := make([]float64, len(v))
	for i, x := range v {
		w[i] = float64(x)
	}
	t, err := graph.TensorFromFloat64(name, dt, dims, w)
	if err != nil {
		panic(err)
	}
	return t
}

func (b *deployBuilder) weight(name string, scale float64, dims ...int64) *graph.Value {
	n := int64(1)
	for _, d := range dims {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(b.rng.NormFloat64() * scale)
	}
	return b.g.AddInitializer(b.floats(name, dims, v))
}

// proj is x . W (W (in, out), std 1/sqrt(in)), or a 4-bit MatMulNBits of a
// random weight when quant.
func (b *deployBuilder) proj(name string, x *graph.Value, in, out int64, quant bool) *graph.Value {
	if quant {
		w := NewNBitsWeight(int(in), int(out), 4, 32, b.rng.Uint64())
		return addMatMulNBits(b.g, name, x, w, b.dtype())
	}
	return b.op("MatMul", "", []*graph.Value{x, b.weight(name, 1/math.Sqrt(float64(in)), in, out)})
}

func (b *deployBuilder) ones(name string, n int64) *graph.Value {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1 + 0.1*float32(b.rng.NormFloat64())
	}
	return b.g.AddInitializer(b.floats(name, []int64{n}, v))
}

func (b *deployBuilder) i64s(name string, v ...int64) *graph.Value {
	t, err := graph.NewTensor(name, graph.Int64, []int64{int64(len(v))}, v)
	if err != nil {
		panic(err)
	}
	return b.g.AddInitializer(t)
}

// ropeCaches adds cos/sin caches (MaxPositions, head_dim/2).
func (b *deployBuilder) ropeCaches() (*graph.Value, *graph.Value) {
	cs, sn := RopeCache(b.cfg.MaxPositions, int(b.hd), b.cfg.RopeBase)
	dims := []int64{int64(b.cfg.MaxPositions), b.hd / 2}
	return b.g.AddInitializer(b.floats("cos_cache", dims, cs)), b.g.AddInitializer(b.floats("sin_cache", dims, sn))
}

func dyn(names ...string) []graph.Dim {
	d := make([]graph.Dim, len(names))
	for i, n := range names {
		d[i] = graph.Dim{Param: n}
	}
	return d
}

func (b *deployBuilder) mlp(x *graph.Value, p string, quant bool) *graph.Value {
	c := b.cfg
	gate := b.proj(p+".gate_proj", x, int64(c.Hidden), int64(c.FFN), quant)
	up := b.proj(p+".up_proj", x, int64(c.Hidden), int64(c.FFN), quant)
	act := b.op("Mul", "", []*graph.Value{gate, b.op("Sigmoid", "", []*graph.Value{gate})})
	return b.proj(p+".down_proj", b.op("Mul", "", []*graph.Value{act, up}), int64(c.FFN), int64(c.Hidden), quant)
}

func mustRename(g *graph.Graph, v *graph.Value, name string) {
	if err := g.RenameValue(v, name); err != nil {
		panic(err)
	}
}

func (b *deployBuilder) logits(x *graph.Value) {
	c := b.cfg
	y := b.op("MatMul", "", []*graph.Value{x, b.weight("lm_head", 1/math.Sqrt(float64(c.Hidden)), int64(c.Hidden), int64(c.Vocab))})
	mustRename(b.g, y, "logits")
	y.Type = graph.TensorType(b.dtype(), append(dyn("batch", "seq"), graph.Dim{Value: int64(c.Vocab), Known: true}))
	b.g.AddOutput(y)
}

// genai builds FormGenAIGQA (FormGenAIInt4 when quant). Inputs: input_ids
// (B, S) int64, attention_mask (B, T) int64 with T = P + S (ones for the
// tokens of each sequence, right padding), past_key_values.L.key/value
// (B, Nkv, P, H). Outputs: logits, present.L.key/value (B, Nkv, T, H).
func (b *deployBuilder) genai(quant bool) {
	c := b.cfg
	b.model(graph.Opset{Domain: "", Version: 21}, graph.Opset{Domain: "com.microsoft", Version: 1})
	g := b.g
	ids := g.AddInput("input_ids", graph.TensorType(graph.Int64, dyn("batch", "seq")))
	mask := g.AddInput("attention_mask", graph.TensorType(graph.Int64, dyn("batch", "total")))
	// seqlens_k = sum(mask) - 1, total_sequence_length = mask width.
	sum := b.op("ReduceSum", "", []*graph.Value{mask, b.i64s("axes1", 1)}, graph.IntAttr("keepdims", 0))
	seqlens := b.op("Cast", "", []*graph.Value{b.op("Sub", "", []*graph.Value{sum, b.i64s("one", 1)})}, graph.IntAttr("to", int64(graph.Int32)))
	width := b.op("Gather", "", []*graph.Value{b.op("Shape", "", []*graph.Value{mask}), b.i64s("idx1", 1)}, graph.IntAttr("axis", 0))
	total := b.op("Cast", "", []*graph.Value{b.op("Squeeze", "", []*graph.Value{width, b.i64s("axes0", 0)})}, graph.IntAttr("to", int64(graph.Int32)))
	cos, sin := b.ropeCaches()
	x := b.op("Gather", "", []*graph.Value{b.weight("embed_tokens", 1, int64(c.Vocab), int64(c.Hidden)), ids})
	kvDims := dyn("batch", "kv_heads_fixed", "past", "head_fixed")
	kvDims[1] = graph.Dim{Value: int64(c.KVHeads), Known: true}
	kvDims[3] = graph.Dim{Value: b.hd, Known: true}
	var presents []*graph.Value
	h := b.op("SimplifiedLayerNormalization", "", []*graph.Value{x, b.ones("layers.0.input_layernorm", int64(c.Hidden))}, graph.FloatAttr("epsilon", 1e-6))
	residual := x
	for l := range c.Layers {
		p := fmt.Sprintf("layers.%d", l)
		pk := g.AddInput(fmt.Sprintf("past_key_values.%d.key", l), graph.TensorType(b.dtype(), kvDims))
		pv := g.AddInput(fmt.Sprintf("past_key_values.%d.value", l), graph.TensorType(b.dtype(), kvDims))
		q := b.proj(p+".q_proj", h, int64(c.Hidden), int64(c.Heads)*b.hd, quant)
		k := b.proj(p+".k_proj", h, int64(c.Hidden), int64(c.KVHeads)*b.hd, quant)
		v := b.proj(p+".v_proj", h, int64(c.Hidden), int64(c.KVHeads)*b.hd, quant)
		outs := b.opN("GroupQueryAttention", "com.microsoft", []*graph.Value{q, k, v, pk, pv, seqlens, total, cos, sin}, 3,
			graph.IntAttr("num_heads", int64(c.Heads)), graph.IntAttr("kv_num_heads", int64(c.KVHeads)), graph.IntAttr("do_rotary", 1))
		presents = append(presents, outs[1], outs[2])
		o := b.proj(p+".o_proj", outs[0], int64(c.Heads)*b.hd, int64(c.Hidden), quant)
		sk := b.opN("SkipSimplifiedLayerNormalization", "com.microsoft", []*graph.Value{o, residual, b.ones(p+".post_attention_layernorm", int64(c.Hidden))}, 4,
			graph.FloatAttr("epsilon", 1e-6))
		sk[1].Name, sk[2].Name = "", ""
		h, residual = sk[0], sk[3]
		mo := b.mlp(h, p+".mlp", quant)
		norm := fmt.Sprintf("layers.%d.input_layernorm", l+1)
		if l == c.Layers-1 {
			norm = "norm"
		}
		sk = b.opN("SkipSimplifiedLayerNormalization", "com.microsoft", []*graph.Value{mo, residual, b.ones(norm, int64(c.Hidden))}, 4,
			graph.FloatAttr("epsilon", 1e-6))
		sk[1].Name, sk[2].Name = "", ""
		h, residual = sk[0], sk[3]
	}
	b.logits(h)
	for l, pr := range presents {
		kind := "key"
		if l%2 == 1 {
			kind = "value"
		}
		pr.Type = graph.TensorType(b.dtype(), []graph.Dim{{Param: "batch"}, kvDims[1], {Param: "total"}, kvDims[3]})
		mustRename(g, pr, fmt.Sprintf("present.%d.%s", l/2, kind))
		g.AddOutput(pr)
	}
}

// rotaryMHA builds FormRotaryMHA. Inputs: input_ids and position_ids (B,
// S) int64, attention_mask (B, T) int32 (key padding), past_key/past_value
// per layer (B, N, P, H). Outputs: logits, present.L.key/value.
func (b *deployBuilder) rotaryMHA() {
	c := b.cfg
	b.model(graph.Opset{Domain: "", Version: 21}, graph.Opset{Domain: "com.microsoft", Version: 1})
	g := b.g
	ids := g.AddInput("input_ids", graph.TensorType(graph.Int64, dyn("batch", "seq")))
	pos := g.AddInput("position_ids", graph.TensorType(graph.Int64, dyn("batch", "seq")))
	mask := g.AddInput("attention_mask", graph.TensorType(graph.Int32, dyn("batch", "total")))
	cos, sin := b.ropeCaches()
	x := b.op("Gather", "", []*graph.Value{b.weight("embed_tokens", 1, int64(c.Vocab), int64(c.Hidden)), ids})
	kvDims := []graph.Dim{{Param: "batch"}, {Value: int64(c.Heads), Known: true}, {Param: "past"}, {Value: b.hd, Known: true}}
	var presents []*graph.Value
	for l := range c.Layers {
		p := fmt.Sprintf("layers.%d", l)
		h := b.op("SimplifiedLayerNormalization", "", []*graph.Value{x, b.ones(p+".input_layernorm", int64(c.Hidden))}, graph.FloatAttr("epsilon", 1e-6))
		pk := g.AddInput(fmt.Sprintf("past_key_values.%d.key", l), graph.TensorType(b.dtype(), kvDims))
		pv := g.AddInput(fmt.Sprintf("past_key_values.%d.value", l), graph.TensorType(b.dtype(), kvDims))
		D := int64(c.Heads) * b.hd
		rot := func(t *graph.Value) *graph.Value {
			return b.op("RotaryEmbedding", "com.microsoft", []*graph.Value{t, pos, cos, sin}, graph.IntAttr("num_heads", int64(c.Heads)))
		}
		q := rot(b.proj(p+".q_proj", h, int64(c.Hidden), D, false))
		k := rot(b.proj(p+".k_proj", h, int64(c.Hidden), D, false))
		v := b.proj(p+".v_proj", h, int64(c.Hidden), D, false)
		outs := b.opN("MultiHeadAttention", "com.microsoft", []*graph.Value{q, k, v, nil, mask, nil, pk, pv}, 3,
			graph.IntAttr("num_heads", int64(c.Heads)), graph.IntAttr("unidirectional", 1))
		presents = append(presents, outs[1], outs[2])
		x = b.op("Add", "", []*graph.Value{x, b.proj(p+".o_proj", outs[0], D, int64(c.Hidden), false)})
		h = b.op("SimplifiedLayerNormalization", "", []*graph.Value{x, b.ones(p+".post_attention_layernorm", int64(c.Hidden))}, graph.FloatAttr("epsilon", 1e-6))
		x = b.op("Add", "", []*graph.Value{x, b.mlp(h, p+".mlp", false)})
	}
	h := b.op("SimplifiedLayerNormalization", "", []*graph.Value{x, b.ones("norm", int64(c.Hidden))}, graph.FloatAttr("epsilon", 1e-6))
	b.logits(h)
	for l, pr := range presents {
		kind := "key"
		if l%2 == 1 {
			kind = "value"
		}
		pr.Type = graph.TensorType(b.dtype(), []graph.Dim{{Param: "batch"}, kvDims[1], {Param: "total"}, kvDims[3]})
		mustRename(g, pr, fmt.Sprintf("present.%d.%s", l/2, kind))
		g.AddOutput(pr)
	}
}

// bert builds FormEmbedLNAttention. Inputs: input_ids, segment_ids and
// input_mask (B, S) int32 (the mask right-padded: EmbedLayerNormalization
// turns it into each sequence's length, Attention's mask_index). Output:
// last_hidden_state (B, S, hidden).
func (b *deployBuilder) bert() {
	c := b.cfg
	b.model(graph.Opset{Domain: "", Version: 17}, graph.Opset{Domain: "com.microsoft", Version: 1})
	g := b.g
	bs := dyn("batch", "seq")
	ids := g.AddInput("input_ids", graph.TensorType(graph.Int32, bs))
	seg := g.AddInput("segment_ids", graph.TensorType(graph.Int32, bs))
	mask := g.AddInput("input_mask", graph.TensorType(graph.Int32, bs))
	H := int64(c.Hidden)
	eln := b.opN("EmbedLayerNormalization", "com.microsoft", []*graph.Value{ids, seg,
		b.weight("word_embeddings", 1, int64(c.Vocab), H), b.weight("position_embeddings", 1, int64(c.MaxPositions), H),
		b.weight("token_type_embeddings", 1, 2, H), b.ones("embeddings.LayerNorm.weight", H), b.weight("embeddings.LayerNorm.bias", 0.1, H), mask},
		2, graph.FloatAttr("epsilon", 1e-12))
	x, maskIndex := eln[0], eln[1]
	for l := range c.Layers {
		p := fmt.Sprintf("encoder.layer.%d", l)
		a := b.op("Attention", "com.microsoft", []*graph.Value{x, b.weight(p+".attention.qkv.weight", 1/math.Sqrt(float64(H)), H, 3*H),
			b.weight(p+".attention.qkv.bias", 0.1, 3*H), maskIndex}, graph.IntAttr("num_heads", int64(c.Heads)))
		o := b.op("MatMul", "", []*graph.Value{a, b.weight(p+".attention.output.dense.weight", 1/math.Sqrt(float64(H)), H, H)})
		x = b.opN("SkipLayerNormalization", "com.microsoft", []*graph.Value{o, x, b.ones(p+".attention.output.LayerNorm.weight", H),
			b.weight(p+".attention.output.LayerNorm.bias", 0.1, H), b.weight(p+".attention.output.dense.bias", 0.1, H)}, 1, graph.FloatAttr("epsilon", 1e-12))[0]
		f := b.op("MatMul", "", []*graph.Value{x, b.weight(p+".intermediate.dense.weight", 1/math.Sqrt(float64(H)), H, int64(c.FFN))})
		f = b.op("BiasGelu", "com.microsoft", []*graph.Value{f, b.weight(p+".intermediate.dense.bias", 0.1, int64(c.FFN))})
		o = b.op("MatMul", "", []*graph.Value{f, b.weight(p+".output.dense.weight", 1/math.Sqrt(float64(c.FFN)), int64(c.FFN), H)})
		x = b.opN("SkipLayerNormalization", "com.microsoft", []*graph.Value{o, x, b.ones(p+".output.LayerNorm.weight", H),
			b.weight(p+".output.LayerNorm.bias", 0.1, H), b.weight(p+".output.dense.bias", 0.1, H)}, 1, graph.FloatAttr("epsilon", 1e-12))[0]
	}
	x.Type = graph.TensorType(graph.Float, append(dyn("batch", "seq"), graph.Dim{Value: H, Known: true}))
	mustRename(g, x, "last_hidden_state")
	g.AddOutput(x)
}

// staticCache builds FormStaticCache24. Inputs: input_ids and
// position_ids (B, S) int64, write_indices and nonpad_kv_seqlen (B)
// int64, key_cache.L/value_cache.L (B, Nkv, M, H) for a cache of M
// positions. Outputs: logits, updated_key_cache.L/updated_value_cache.L.
func (b *deployBuilder) staticCache() {
	c := b.cfg
	b.model(graph.Opset{Domain: "", Version: 24})
	g := b.g
	ids := g.AddInput("input_ids", graph.TensorType(graph.Int64, dyn("batch", "seq")))
	pos := g.AddInput("position_ids", graph.TensorType(graph.Int64, dyn("batch", "seq")))
	widx := g.AddInput("write_indices", graph.TensorType(graph.Int64, dyn("batch")))
	nonpad := g.AddInput("nonpad_kv_seqlen", graph.TensorType(graph.Int64, dyn("batch")))
	cos, sin := b.ropeCaches()
	x := b.op("Gather", "", []*graph.Value{b.weight("embed_tokens", 1, int64(c.Vocab), int64(c.Hidden)), ids})
	cacheDims := []graph.Dim{{Param: "batch"}, {Value: int64(c.KVHeads), Known: true}, {Param: "capacity"}, {Value: b.hd, Known: true}}
	heads := func(t *graph.Value, n int64, nm string) *graph.Value {
		r := b.op("Reshape", "", []*graph.Value{t, b.i64s(nm+"_shape", 0, 0, n, b.hd)})
		return b.op("Transpose", "", []*graph.Value{r}, graph.IntsAttr("perm", 0, 2, 1, 3))
	}
	var updated []*graph.Value
	for l := range c.Layers {
		p := fmt.Sprintf("layers.%d", l)
		kc := g.AddInput(fmt.Sprintf("key_cache.%d", l), graph.TensorType(graph.Float, cacheDims))
		vc := g.AddInput(fmt.Sprintf("value_cache.%d", l), graph.TensorType(graph.Float, cacheDims))
		h := b.op("RMSNormalization", "", []*graph.Value{x, b.ones(p+".input_layernorm", int64(c.Hidden))}, graph.FloatAttr("epsilon", 1e-6))
		q := heads(b.proj(p+".q_proj", h, int64(c.Hidden), int64(c.Heads)*b.hd, false), int64(c.Heads), p+".q")
		k := heads(b.proj(p+".k_proj", h, int64(c.Hidden), int64(c.KVHeads)*b.hd, false), int64(c.KVHeads), p+".k")
		v := heads(b.proj(p+".v_proj", h, int64(c.Hidden), int64(c.KVHeads)*b.hd, false), int64(c.KVHeads), p+".v")
		q = b.op("RotaryEmbedding", "", []*graph.Value{q, cos, sin, pos})
		k = b.op("RotaryEmbedding", "", []*graph.Value{k, cos, sin, pos})
		kc2 := b.op("TensorScatter", "", []*graph.Value{kc, k, widx}, graph.IntAttr("axis", 2))
		vc2 := b.op("TensorScatter", "", []*graph.Value{vc, v, widx}, graph.IntAttr("axis", 2))
		updated = append(updated, kc2, vc2)
		a := b.op("Attention", "", []*graph.Value{q, kc2, vc2, nil, nil, nil, nonpad}, graph.IntAttr("is_causal", 1))
		a = b.op("Transpose", "", []*graph.Value{a}, graph.IntsAttr("perm", 0, 2, 1, 3))
		a = b.op("Reshape", "", []*graph.Value{a, b.i64s(p+".o_shape", 0, 0, int64(c.Heads)*b.hd)})
		x = b.op("Add", "", []*graph.Value{x, b.proj(p+".o_proj", a, int64(c.Heads)*b.hd, int64(c.Hidden), false)})
		h = b.op("RMSNormalization", "", []*graph.Value{x, b.ones(p+".post_attention_layernorm", int64(c.Hidden))}, graph.FloatAttr("epsilon", 1e-6))
		x = b.op("Add", "", []*graph.Value{x, b.mlp(h, p+".mlp", false)})
	}
	h := b.op("RMSNormalization", "", []*graph.Value{x, b.ones("norm", int64(c.Hidden))}, graph.FloatAttr("epsilon", 1e-6))
	b.logits(h)
	for l, u := range updated {
		kind := "key"
		if l%2 == 1 {
			kind = "value"
		}
		u.Type = graph.TensorType(graph.Float, cacheDims)
		mustRename(g, u, fmt.Sprintf("updated_%s_cache.%d", kind, l/2))
		g.AddOutput(u)
	}
}

// DeployStep is the shape of one call of a deployment-form model.
type DeployStep struct {
	Batch int
	Seq   int   // new tokens
	Past  int   // tokens in the KV caches before the call (0: prefill)
	Lens  []int // valid tokens of each sequence after the call (right padding); nil: all Past+Seq
	// Capacity is the static cache's size (FormStaticCache24; default
	// Past+Seq+2).
	Capacity int
}

// DeployInputs draws seeded inputs of form for step.
func DeployInputs(form DeployForm, cfg DeployConfig, st DeployStep, seed uint64) map[string]*kernels.Tensor {
	rng := rand.New(rand.NewPCG(seed, 13))
	B, S, P := st.Batch, st.Seq, st.Past
	T := P + S
	lens := st.Lens
	if lens == nil {
		lens = make([]int, B)
		for i := range lens {
			lens[i] = T
		}
	}
	hd := cfg.Hidden / cfg.Heads
	in := map[string]*kernels.Tensor{}
	ids := func(dt graph.DataType, n int) *kernels.Tensor {
		if dt == graph.Int32 {
			v := make([]int32, B*S)
			for i := range v {
				v[i] = int32(rng.IntN(n))
			}
			return kernels.FromSlice([]int{B, S}, v)
		}
		v := make([]int64, B*S)
		for i := range v {
			v[i] = int64(rng.IntN(n))
		}
		return kernels.FromSlice([]int{B, S}, v)
	}
	positions := func() *kernels.Tensor {
		v := make([]int64, B*S)
		for b := range B {
			for s := range S {
				v[b*S+s] = int64(max(0, lens[b]-S) + s)
			}
		}
		return kernels.FromSlice([]int{B, S}, v)
	}
	maskRow := func(b, j int) bool { return j < lens[b] }
	past := func(names string, heads int) {
		for l := range cfg.Layers {
			for _, kind := range []string{"key", "value"} {
				in[fmt.Sprintf(names, l, kind)] = inDType(randTensor(rng, B, heads, P, hd), cfg.DType)
			}
		}
	}
	switch form {
	case FormGenAIGQA, FormGenAIInt4:
		in["input_ids"] = ids(graph.Int64, cfg.Vocab)
		m := make([]int64, B*T)
		for b := range B {
			for j := range T {
				if maskRow(b, j) {
					m[b*T+j] = 1
				}
			}
		}
		in["attention_mask"] = kernels.FromSlice([]int{B, T}, m)
		past("past_key_values.%d.%s", cfg.KVHeads)
	case FormRotaryMHA:
		in["input_ids"] = ids(graph.Int64, cfg.Vocab)
		in["position_ids"] = positions()
		m := make([]int32, B*T)
		for b := range B {
			for j := range T {
				if maskRow(b, j) {
					m[b*T+j] = 1
				}
			}
		}
		in["attention_mask"] = kernels.FromSlice([]int{B, T}, m)
		past("past_key_values.%d.%s", cfg.Heads)
	case FormEmbedLNAttention:
		in["input_ids"] = ids(graph.Int32, cfg.Vocab)
		seg := make([]int32, B*S)
		m := make([]int32, B*S)
		for b := range B {
			for s := range S {
				if s >= S/2 {
					seg[b*S+s] = 1
				}
				if maskRow(b, s) {
					m[b*S+s] = 1
				}
			}
		}
		in["segment_ids"] = kernels.FromSlice([]int{B, S}, seg)
		in["input_mask"] = kernels.FromSlice([]int{B, S}, m)
	case FormStaticCache24:
		capacity := st.Capacity
		if capacity == 0 {
			capacity = T + 2
		}
		in["input_ids"] = ids(graph.Int64, cfg.Vocab)
		in["position_ids"] = positions()
		w, np := make([]int64, B), make([]int64, B)
		for b := range B {
			w[b] = int64(max(0, lens[b]-S))
			np[b] = int64(lens[b])
		}
		in["write_indices"] = kernels.FromSlice([]int{B}, w)
		in["nonpad_kv_seqlen"] = kernels.FromSlice([]int{B}, np)
		for l := range cfg.Layers {
			for _, kind := range []string{"key", "value"} {
				in[fmt.Sprintf("%s_cache.%d", kind, l)] = randTensor(rng, B, cfg.KVHeads, capacity, hd)
			}
		}
	}
	return in
}

// inDType is t (float32) rounded to dt when dt is a half type.
func inDType(t *kernels.Tensor, dt graph.DataType) *kernels.Tensor {
	if dt == 0 || dt == graph.Float {
		return t
	}
	dims := make([]int64, len(t.Shape))
	for i, d := range t.Shape {
		dims[i] = int64(d)
	}
	gt, err := graph.TensorFromFloat64("", dt, dims, t.Float64s())
	if err != nil {
		panic(err)
	}
	h, err := kernels.FromGraph(gt)
	if err != nil {
		panic(err)
	}
	return h
}
