package testmodels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// Class 4: parameters the graph fixes only up to a set (YaRN's original
// length), or that sit where today's detectors do not read them (factor
// lists behind an If, head counts in the shapes of absent weights, both
// disentangled directions through one shared projection, the base of a
// 2-D RoPE over a patch grid).

// The generality YaRN model's setting: with head_dim 16 and base 10000
// the published betas (32, 1) give the correction range [2, 6] for an
// original length of 2048 and of 4096 alike.
const (
	yarnFactor = 4.0
	yarnOrig   = 2048
)

// longRoPE is the generality LongRoPE model's setting (a Phi-3 shape
// scaled down): 6 query heads over 2 key/value heads of 16, base 10000,
// original length 128, context 256 (factor 2).
var longRoPE = struct {
	heads, kv, hd, orig, ctx int
	short, long              []float64
}{6, 2, 16, 128, 256,
	[]float64{1.0, 1.02, 1.05, 1.1, 1.2, 1.35, 1.6, 1.9},
	[]float64{1.1, 1.3, 1.6, 2.2, 3.0, 3.5, 3.9, 4.1}}

func paramForms(built func(func() *graph.Model) func(string) (*graph.Model, error)) []GeneralityForm {
	lr := longRoPE
	lrAttn := math.Sqrt(1 + math.Log(float64(lr.ctx)/float64(lr.orig))/math.Log(float64(lr.orig)))
	floats := func(v []float64) []any {
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = x
		}
		return out
	}
	return []GeneralityForm{
		{
			Name: "rope_yarn_ambiguous_original_length", Class: 4,
			Note: fmt.Sprintf("LlamaModel (max_position_embeddings %d, rope_scaling {rope_type: yarn, factor %g}) as "+
				"torch.onnx.export traces transformers v4.47, whose _compute_yarn_parameters reads the correction range from "+
				"max_position_embeddings (inv_freq a constant [1, 8, 1] expanded to the batch, MatMul with position_ids, Concat, "+
				"Cos and Sin times attention_scaling 0.1·ln 4 + 1); head_dim 16, base 10000, GQA 4/2. The published betas 32 and "+
				"1 give the correction range [2, 6] for original lengths 2048 and 4096 alike (the frequencies are equal to the "+
				"last bit), so the graph fixes original_max_positions only up to {2048, 4096} (other betas widen the set: beta_fast "+
				"and beta_slow are not checked)", yarnOrig, yarnFactor),
			Build: built(ropeYaRN),
			Truth: Truth{
				Schemes: []string{"rope"},
				Layers:  layerSchemes("rope", "rope"),
				Findings: []FindingTruth{{Scheme: "rope", Layers: []int{0, 1}, Params: map[string]any{
					"layout": "half_split", "base": 10000.0, "head_dim": 16.0, "rotary_dim": 16.0, "num_heads": 4.0, "num_kv_heads": 2.0,
					"scaling": "yarn", "factor": yarnFactor, "attention_factor": 0.1*math.Log(yarnFactor) + 1}}},
			},
			Null: map[string][]string{"rope": {"original_max_positions"}},
		},
		{
			Name: "rope_longrope_genai_if_absent_weights", Class: 4,
			Note: "ONNX Runtime GenAI's model builder for a Phi-3 long-context model on an EP without GroupQueryAttention: " +
				"cos/sin caches chosen by an If on Greater(attention_mask's length, 128) between large caches [256, 8] (long " +
				"factors, 256 positions) and small ones [128, 8] (short factors), each a Constant in its branch, both multiplied by " +
				"sqrt(1 + ln 2 / ln 128); com.microsoft RotaryEmbedding on q [B, S, 96] and k [B, S, 32], repeat_kv (Reshape, " +
				"Transpose, Concat with the past, Unsqueeze, Expand, Reshape), MultiHeadAttention with 6 heads; every weight in " +
				"model.onnx.data, which is absent (the key projection's shape [96, 32] gives 2 key/value heads). The caches hold " +
				"cos and sin of t / (λ_i · θ^(2i/16)): the graph fixes each product λ_i · θ^(2i/16) (and the ratios of the long " +
				"to the short factors), not the base θ and the factor lists λ apart, so those are null",
			Build: func(dir string) (*graph.Model, error) { return saveAbsent(ropeLongRoPEGenAI(), dir, 12000) },
			Truth: Truth{
				Schemes: []string{"rope"},
				Layers:  layerSchemes("rope", "rope"),
				Findings: []FindingTruth{{Scheme: "rope", Layers: []int{0, 1}, Fused: true, Params: map[string]any{
					"layout": "half_split", "head_dim": 16.0, "rotary_dim": 16.0,
					"num_heads": float64(lr.heads), "num_kv_heads": float64(lr.kv),
					"scaling": "longrope", "factor": float64(lr.ctx) / float64(lr.orig), "original_max_positions": float64(lr.orig),
					"max_positions": float64(lr.ctx), "attention_factor": lrAttn}}},
			},
			Null: map[string][]string{"rope": {"base", "short_factor", "long_factor"}},
		},
		{
			Name: "rope_longrope_phi4mini_if_factor_lists_absent_weights", Class: 4,
			Note: "Phi-4-mini's LongRoPE as transformers v4.50's Phi3 writes it (partial_rotary_factor 0.75: q[..., :12] rotated, " +
				"q[..., 12:] passed; views (*input_shape, -1, head_dim)) with the Python choice of ext_factors in " +
				"_longrope_frequency_update written as torch.cond, as torch.export's exporter writes it: an If on " +
				"ReduceMax(position_ids) + 1 > 128 between two Constant factor lists [6] (long, short), inv_freq = 1 / " +
				"(ext_factors · 10000^(arange(0, 12, 2)/12)), MatMul with position_ids, Concat, Cos and Sin times sqrt(1 + ln 2 / " +
				"ln 128); the fused qkv_proj [96, 160] sliced into q, k and v (the key slice is 32 wide: 2 heads of 16 under 6 " +
				"query heads), repeat_kv by Expand and Reshape; every weight in model.onnx.data, which is absent (the factor lists " +
				"and the base are small constants kept in the model file)",
			Build: func(dir string) (*graph.Model, error) { return saveAbsent(ropeLongRoPEPhi3(12), dir, 1024) },
			Truth: Truth{
				Schemes: []string{"rope"},
				Layers:  layerSchemes("rope", "rope"),
				Findings: []FindingTruth{{Scheme: "rope", Layers: []int{0, 1}, Params: map[string]any{
					"layout": "half_split", "base": 10000.0, "head_dim": 16.0, "rotary_dim": 12.0,
					"num_heads": float64(lr.heads), "num_kv_heads": float64(lr.kv),
					"scaling": "longrope", "factor": float64(lr.ctx) / float64(lr.orig), "original_max_positions": float64(lr.orig),
					"short_factor": floats(lr.short[:6]), "long_factor": floats(lr.long[:6]), "attention_factor": lrAttn}}},
			},
		},
		{
			Name: "disentangled_deberta_v2_hf447", Class: 4,
			Note: "DebertaV2Model (transformers v4.47) as torch.onnx.export traces it: [B·H, S, 16] layouts and bmm, log-bucketed " +
				"relative positions (position_buckets 8, max_relative_positions 32) built once, rel_embeddings [16, 64] " +
				"LayerNorm'd, share_att_key: the position keys and queries are the content key_proj and query_proj of the " +
				"relative embeddings, repeated to the batch (Tile); c2p and p2c gathered (GatherElements) at clamp(±rel + 8, 0, " +
				"15), p2c's positions passed through build_rpos's If (the query and key lengths differ: rebuilt; else the same), " +
				"each term divided by sqrt(16 · 3)",
			Build: built(debertaV2),
			Truth: Truth{
				Schemes: []string{"disentangled"},
				Layers:  layerSchemes("disentangled", "disentangled"),
				Findings: []FindingTruth{{Scheme: "disentangled", Layers: []int{0, 1}, Params: map[string]any{
					"position_buckets": 8.0, "max_relative_positions": 32.0, "att_types": []any{"c2p", "p2c"}, "share_att_key": true,
					"scale_factor": 3.0}}},
			},
		},
		{
			Name: "rope_2d_pixtral_patches", Class: 4,
			Note: "PixtralVisionModel (transformers v4.47) as torch.onnx.export traces it for one 16 x 24 image in 4 x 4 patches " +
				"(a 4 x 6 grid): position ids h·8 + w (max_width = image_size 32 / patch 4), the stored buffer inv_freq [64, 16] " +
				"of angles (h·θ^(-4i/16) then w·θ^(-(4i+2)/16), the two halves equal, θ 10000) gathered at them, Cos and Sin, " +
				"rotate_half; 4 heads of 16, 2 layers",
			Build: built(ropePixtral),
			Truth: Truth{
				Schemes: []string{"rope"},
				Layers:  layerSchemes("rope", "rope"),
				Findings: []FindingTruth{{Scheme: "rope", Layers: []int{0, 1}, Params: map[string]any{
					"layout": "half_split", "base": 10000.0, "head_dim": 16.0, "rotary_dim": 16.0, "num_heads": 4.0, "num_kv_heads": 4.0,
					"scaling": "none", "axes": 2.0, "grid": []any{4.0, 6.0}}}},
			},
		},
	}
}

// yarnInvFreq is _compute_yarn_parameters of transformers v4.47 in
// float64: the correction range of the betas (32, 1) and a linear ramp
// between interpolated and extrapolated frequencies.
func yarnInvFreq(dim int, base, factor float64, orig int) []float64 {
	corr := func(rot float64) float64 {
		return float64(dim) * math.Log(float64(orig)/(rot*2*math.Pi)) / (2 * math.Log(base))
	}
	low, high := max(math.Floor(corr(32)), 0), min(math.Ceil(corr(1)), float64(dim-1))
	if low == high {
		high += 0.001
	}
	inv := make([]float64, dim/2)
	for i := range inv {
		pos := math.Pow(base, float64(2*i)/float64(dim))
		ramp := min(max((float64(i)-low)/(high-low), 0), 1)
		extra := 1 - ramp
		inv[i] = 1/(factor*pos)*(1-extra) + 1/pos*extra
	}
	return inv
}

// llamaLayers appends the decoder layers of a Llama over x with q and k
// turned by rope, GQA repeat_kv, RMSNorm, SiLU MLP; mask is additive.
func (b *gen) llamaLayers(x *graph.Value, n int, d, heads, kv, hd int64, rope func(*graph.Value) *graph.Value, mask *graph.Value) *graph.Value {
	repeatKV := func(t *graph.Value) *graph.Value {
		if kv == heads {
			return t
		}
		ex := b.op("Expand", nil, b.op("Unsqueeze", nil, t, b.ints(2)), b.ints(1, 1, heads/kv, 1, 1))
		return b.op("Reshape", nil, ex, b.ints(0, heads, -1, hd))
	}
	for l := 0; l < n; l++ {
		pre := fmt.Sprintf("layers.%d.", l)
		h := b.rmsNorm(x, pre+"input_layernorm", d)
		q := rope(b.heads(b.linear(h, pre+"self_attn.q_proj", d, heads*hd, false), heads, hd))
		k := repeatKV(rope(b.heads(b.linear(h, pre+"self_attn.k_proj", d, kv*hd, false), kv, hd)))
		v := repeatKV(b.heads(b.linear(h, pre+"self_attn.v_proj", d, kv*hd, false), kv, hd))
		a := b.attn(q, k, v, 1/math.Sqrt(float64(hd)), func(s *graph.Value) *graph.Value { return b.op("Add", nil, s, mask) })
		x = b.op("Add", nil, x, b.linear(b.merge(a, heads*hd), pre+"self_attn.o_proj", heads*hd, d, false))
		h = b.rmsNorm(x, pre+"post_attention_layernorm", d)
		gate := b.linear(h, pre+"mlp.gate_proj", d, 2*d, false)
		mlp := b.op("Mul", nil, b.op("Mul", nil, gate, b.op("Sigmoid", nil, gate)), b.linear(h, pre+"mlp.up_proj", d, 2*d, false))
		x = b.op("Add", nil, x, b.linear(mlp, pre+"mlp.down_proj", 2*d, d, false))
	}
	return b.rmsNorm(x, "norm", d)
}

// rotateHalf is Llama's rotate_half: cat(-x[..., d/2:], x[..., :d/2]).
func (b *gen) rotateHalf(t *graph.Value, hd int64) *graph.Value {
	x1 := b.op("Slice", nil, t, b.ints(0), b.ints(hd/2), b.ints(-1))
	x2 := b.op("Slice", nil, t, b.ints(hd/2), b.ints(math.MaxInt64), b.ints(-1))
	return b.op("Concat", axisAttr(-1), b.op("Neg", nil, x2), x1)
}

// ropeYaRN builds the YaRN Llama.
func ropeYaRN() *graph.Model {
	const d, heads, kv, hd, vocab = 64, 4, 2, 16, 96
	b := newGen("pytorch", 91, graph.Opset{Domain: "", Version: 17})
	ids := b.input("input_ids", graph.Int64, sym("batch"), sym("seq"))
	mask := b.input("attention_mask", graph.Int64, sym("batch"), sym("seq"))
	pos := b.input("position_ids", graph.Int64, sym("batch"), sym("seq"))
	x := b.op("Gather", nil, b.wScaled("embed_tokens.weight", 1, vocab, d), ids)
	inv64 := yarnInvFreq(hd, 10000, yarnFactor, yarnOrig)
	inv := make([]float32, len(inv64))
	for i, f := range inv64 {
		inv[i] = float32(f)
	}
	invE := b.op("Expand", nil, b.fl("rotary_emb.inv_freq", []int64{1, hd / 2, 1}, inv), b.op("Concat", axisAttr(0), b.dim1(pos, 0), b.ints(1, 1)))
	fr := b.op("Transpose", permAttr(0, 2, 1), b.op("MatMul", nil, invE, b.toF(b.op("Unsqueeze", nil, pos, b.ints(1)))))
	emb := b.op("Concat", axisAttr(-1), fr, fr)
	scale := b.f0(float32(0.1*math.Log(yarnFactor) + 1))
	cos := b.op("Unsqueeze", nil, b.op("Mul", nil, b.op("Cos", nil, emb), scale), b.ints(1))
	sin := b.op("Unsqueeze", nil, b.op("Mul", nil, b.op("Sin", nil, emb), scale), b.ints(1))
	rope := func(t *graph.Value) *graph.Value {
		return b.op("Add", nil, b.op("Mul", nil, t, cos), b.op("Mul", nil, b.rotateHalf(t, hd), sin))
	}
	m := b.op("Add", nil, b.causalMask(b.dim(ids, 1)), b.extendedMask(mask))
	x = b.llamaLayers(x, 2, d, heads, kv, hd, rope, m)
	b.output(b.linear(x, "lm_head", d, vocab, false), "logits", graph.Float, sym("batch"), sym("seq"), fixed(vocab))
	return b.m
}

// longRoPECaches are GenAI's make_rotary_embedding_caches_from_scratch:
// inv_freq = 1/(factors · θ^(2i/d)), cos and sin of t·inv_freq for t <
// rows, times mscale, the first half of cat(freqs, freqs): [rows, d/2].
func longRoPECaches(factors []float64, rows, hd int, mscale float64) (cos, sin []float32) {
	half := hd / 2
	cos, sin = make([]float32, rows*half), make([]float32, rows*half)
	for i := 0; i < half; i++ {
		inv := float32(1 / (float32(factors[i]) * float32(math.Pow(10000, float64(2*i)/float64(hd)))))
		for t := 0; t < rows; t++ {
			a := float64(float32(t) * inv)
			cos[t*half+i], sin[t*half+i] = float32(math.Cos(a)*mscale), float32(math.Sin(a)*mscale)
		}
	}
	return cos, sin
}

// ropeLongRoPEGenAI builds the GenAI Phi-3 model (before its weights are
// moved out).
func ropeLongRoPEGenAI() *graph.Model {
	lr := longRoPE
	heads, kv, hd := int64(lr.heads), int64(lr.kv), int64(lr.hd)
	d := heads * hd
	const vocab = 96
	b := newGen("onnxruntime-genai", 92, graph.Opset{Domain: "", Version: 17}, graph.Opset{Domain: "com.microsoft", Version: 1})
	ids := b.input("input_ids", graph.Int64, sym("batch_size"), sym("sequence_length"))
	mask := b.input("attention_mask", graph.Int64, sym("batch_size"), sym("total_sequence_length"))
	pos := b.input("position_ids", graph.Int64, sym("batch_size"), sym("sequence_length"))
	x := b.op("Gather", nil, b.wScaled("model.embed_tokens.weight", 1, vocab, d), ids)

	mscale := math.Sqrt(1 + math.Log(float64(lr.ctx)/float64(lr.orig))/math.Log(float64(lr.orig)))
	branch := func(name string, factors []float64, rows int) *graph.Graph {
		sg := b.g.NewSubgraph(name)
		cs, sn := longRoPECaches(factors, rows, lr.hd, mscale)
		for _, c := range []struct {
			n string
			v []float32
		}{{"cos_cache", cs}, {"sin_cache", sn}} {
			o := sg.Op("Constant", nil, 1, graph.TensorAttr("value", f32Tensor(c.n, []int64{int64(rows), hd / 2}, c.v)))[0]
			o.Type = graph.TensorType(graph.Float, graph.Dims(int64(rows), hd/2))
			sg.AddOutput(o)
		}
		return sg
	}
	total := b.dim(mask, 1)
	long := b.op("Greater", nil, total, b.int0(int64(lr.orig)))
	caches := b.g.Op("If", []*graph.Value{long}, 2, graph.GraphAttr("then_branch", branch("large_rotemb_caches_graph", lr.long, lr.ctx)),
		graph.GraphAttr("else_branch", branch("small_rotemb_caches_graph", lr.short, lr.orig)))
	cosCache, sinCache := caches[0], caches[1]
	for _, c := range caches {
		c.Type = graph.TensorType(graph.Float, []graph.Dim{sym("max_sequence_length"), fixed(hd / 2)})
	}

	// The 4-D causal mask over past + new tokens (GenAI's mask_name, the
	// MultiHeadAttention's attention_bias).
	past := b.op("Sub", nil, total, b.dim(ids, 1))
	qpos := b.op("Range", nil, past, total, b.int0(1))
	kpos := b.op("Range", nil, b.int0(0), total, b.int0(1))
	bias := b.op("Where", nil, b.op("Greater", nil, b.op("Unsqueeze", nil, kpos, b.ints(0)), b.op("Unsqueeze", nil, qpos, b.ints(1))),
		b.f0(-3.4028234663852886e+38), b.f0(0))
	bias = b.op("Unsqueeze", nil, bias, b.ints(0, 1))

	repeatKV := func(t, pastKV *graph.Value) (*graph.Value, *graph.Value) {
		r := b.op("Transpose", permAttr(0, 2, 1, 3), b.op("Reshape", nil, t, b.ints(0, 0, kv, -1)))
		present := b.op("Concat", axisAttr(2), pastKV, r)
		ex := b.op("Expand", nil, b.op("Unsqueeze", nil, present, b.ints(2)),
			b.op("Concat", axisAttr(0), b.dim1(present, 0), b.ints(kv, heads/kv), b.dim1(present, 2), b.ints(hd)))
		rep := b.op("Reshape", nil, ex, b.op("Concat", axisAttr(0), b.dim1(present, 0), b.ints(heads), b.dim1(present, 2), b.ints(hd)))
		return b.op("Reshape", nil, b.op("Transpose", permAttr(0, 2, 1, 3), rep), b.ints(0, 0, heads*hd)), present
	}
	for l := 0; l < 2; l++ {
		pre := fmt.Sprintf("model.layers.%d.", l)
		pk := b.input(fmt.Sprintf("past_key_values.%d.key", l), graph.Float, sym("batch_size"), fixed(kv), sym("past_sequence_length"), fixed(hd))
		pv := b.input(fmt.Sprintf("past_key_values.%d.value", l), graph.Float, sym("batch_size"), fixed(kv), sym("past_sequence_length"), fixed(hd))
		h := b.op("SimplifiedLayerNormalization", []*graph.Attr{graph.IntAttr("axis", -1), graph.FloatAttr("epsilon", 1e-5)}, x, b.gain(pre+"input_layernorm.weight", d))
		q := b.op("MatMul", nil, h, b.w(pre+"attn.q_proj.weight", d, heads*hd))
		k := b.op("MatMul", nil, h, b.w(pre+"attn.k_proj.weight", d, kv*hd))
		v := b.op("MatMul", nil, h, b.w(pre+"attn.v_proj.weight", d, kv*hd))
		rot := []*graph.Attr{graph.IntAttr("interleaved", 0)}
		q = b.ms("RotaryEmbedding", rot, q, pos, cosCache, sinCache)
		k = b.ms("RotaryEmbedding", rot, k, pos, cosCache, sinCache)
		kr, presentK := repeatKV(k, pk)
		vr, presentV := repeatKV(v, pv)
		a := b.ms("MultiHeadAttention", []*graph.Attr{graph.IntAttr("num_heads", heads), graph.FloatAttr("scale", float32(1/math.Sqrt(float64(hd))))},
			q, kr, vr, nil, nil, bias)
		x = b.op("Add", nil, x, b.op("MatMul", nil, a, b.w(pre+"attn.o_proj.weight", heads*hd, d)))
		h = b.op("SimplifiedLayerNormalization", []*graph.Attr{graph.IntAttr("axis", -1), graph.FloatAttr("epsilon", 1e-5)}, x, b.gain(pre+"post_attention_layernorm.weight", d))
		gate := b.op("MatMul", nil, h, b.w(pre+"mlp.gate_proj.weight", d, 2*d))
		up := b.op("MatMul", nil, h, b.w(pre+"mlp.up_proj.weight", d, 2*d))
		x = b.op("Add", nil, x, b.op("MatMul", nil, b.op("Mul", nil, b.op("Mul", nil, gate, b.op("Sigmoid", nil, gate)), up), b.w(pre+"mlp.down_proj.weight", 2*d, d)))
		kvDims := []graph.Dim{sym("batch_size"), fixed(kv), sym("total_sequence_length"), fixed(hd)}
		b.output(presentK, fmt.Sprintf("present.%d.key", l), graph.Float, kvDims...)
		b.output(presentV, fmt.Sprintf("present.%d.value", l), graph.Float, kvDims...)
	}
	x = b.op("SimplifiedLayerNormalization", []*graph.Attr{graph.IntAttr("axis", -1), graph.FloatAttr("epsilon", 1e-5)}, x, b.gain("model.norm.weight", d))
	logits := b.op("MatMul", nil, x, b.w("lm_head.weight", d, vocab))
	// Logits first, as GenAI lists its outputs.
	b.output(logits, "logits", graph.Float, sym("batch_size"), sym("sequence_length"), fixed(vocab))
	b.g.Outputs = append(b.g.Outputs[len(b.g.Outputs)-1:], b.g.Outputs[:len(b.g.Outputs)-1]...)
	return b.m
}

// ropeLongRoPEPhi3 builds the Phi-3 model with the If between factor
// lists, rotating the first rd lanes of each head (before its weights
// are moved out).
func ropeLongRoPEPhi3(rd int64) *graph.Model {
	lr := longRoPE
	heads, kv, hd := int64(lr.heads), int64(lr.kv), int64(lr.hd)
	d := heads * hd
	const vocab = 96
	b := newGen("pytorch", 95, graph.Opset{Domain: "", Version: 17})
	ids := b.input("input_ids", graph.Int64, sym("batch"), sym("seq"))
	mask := b.input("attention_mask", graph.Int64, sym("batch"), sym("seq"))
	pos := b.input("position_ids", graph.Int64, sym("batch"), sym("seq"))
	x := b.op("Gather", nil, b.wScaled("model.embed_tokens.weight", 1, vocab, d), ids)

	branch := func(name string, factors []float64) *graph.Graph {
		sg := b.g.NewSubgraph(name)
		v := make([]float32, rd/2)
		for i := range v {
			v[i] = float32(factors[i])
		}
		o := sg.Op("Constant", nil, 1, graph.TensorAttr("value", f32Tensor("ext_factors", []int64{rd / 2}, v)))[0]
		o.Type = graph.TensorType(graph.Float, graph.Dims(rd/2))
		sg.AddOutput(o)
		return sg
	}
	seqLen := b.op("Add", nil, b.op("ReduceMax", []*graph.Attr{graph.IntAttr("keepdims", 0)}, pos), b.int0(1))
	ext := b.op("If", []*graph.Attr{graph.GraphAttr("then_branch", branch("long_factor", lr.long)), graph.GraphAttr("else_branch", branch("short_factor", lr.short))},
		b.op("Greater", nil, seqLen, b.int0(int64(lr.orig))))
	shape := make([]float32, rd/2)
	for i := range shape {
		shape[i] = float32(2*i) / float32(rd)
	}
	inv := b.op("Reciprocal", nil, b.op("Mul", nil, ext, b.op("Pow", nil, b.f0(10000), b.fl("inv_freq_shape", []int64{rd / 2}, shape))))
	invE := b.op("Expand", nil, b.op("Unsqueeze", nil, inv, b.ints(0, 2)), b.op("Concat", axisAttr(0), b.dim1(pos, 0), b.ints(1, 1)))
	fr := b.op("Transpose", permAttr(0, 2, 1), b.op("MatMul", nil, invE, b.toF(b.op("Unsqueeze", nil, pos, b.ints(1)))))
	emb := b.op("Concat", axisAttr(-1), fr, fr)
	af := b.f0(float32(math.Sqrt(1 + math.Log(float64(lr.ctx)/float64(lr.orig))/math.Log(float64(lr.orig)))))
	cos := b.op("Unsqueeze", nil, b.op("Mul", nil, b.op("Cos", nil, emb), af), b.ints(1))
	sin := b.op("Unsqueeze", nil, b.op("Mul", nil, b.op("Sin", nil, emb), af), b.ints(1))
	rope := func(t *graph.Value) *graph.Value {
		if rd == hd {
			return b.op("Add", nil, b.op("Mul", nil, t, cos), b.op("Mul", nil, b.rotateHalf(t, hd), sin))
		}
		tr := b.op("Slice", nil, t, b.ints(0), b.ints(rd), b.ints(-1))
		tp := b.op("Slice", nil, t, b.ints(rd), b.ints(math.MaxInt64), b.ints(-1))
		return b.op("Concat", axisAttr(-1), b.op("Add", nil, b.op("Mul", nil, tr, cos), b.op("Mul", nil, b.rotateHalf(tr, rd), sin)), tp)
	}
	view := func(t *graph.Value, h int64) *graph.Value {
		shape := b.op("Concat", axisAttr(0), b.dim1(t, 0), b.dim1(t, 1), b.ints(-1, hd))
		return b.op("Transpose", permAttr(0, 2, 1, 3), b.op("Reshape", nil, t, shape))
	}
	repeatKV := func(t *graph.Value) *graph.Value {
		dims := b.op("Concat", axisAttr(0), b.dim1(t, 0), b.ints(kv, heads/kv), b.dim1(t, 2), b.ints(hd))
		ex := b.op("Expand", nil, b.op("Unsqueeze", nil, t, b.ints(2)), dims)
		return b.op("Reshape", nil, ex, b.op("Concat", axisAttr(0), b.dim1(t, 0), b.ints(heads), b.dim1(t, 2), b.ints(hd)))
	}
	m := b.op("Add", nil, b.causalMask(b.dim(ids, 1)), b.extendedMask(mask))
	qEnd, kEnd := heads*hd, heads*hd+kv*hd
	for l := 0; l < 2; l++ {
		pre := fmt.Sprintf("model.layers.%d.", l)
		h := b.rmsNorm(x, pre+"input_layernorm", d)
		qkv := b.op("MatMul", nil, h, b.w(pre+"self_attn.qkv_proj.weight", d, qEnd+2*kv*hd))
		q := rope(view(b.op("Slice", nil, qkv, b.ints(0), b.ints(qEnd), b.ints(-1)), heads))
		k := repeatKV(rope(view(b.op("Slice", nil, qkv, b.ints(qEnd), b.ints(kEnd), b.ints(-1)), kv)))
		v := repeatKV(view(b.op("Slice", nil, qkv, b.ints(kEnd), b.ints(math.MaxInt64), b.ints(-1)), kv))
		a := b.attn(q, k, v, 1/math.Sqrt(float64(hd)), func(s *graph.Value) *graph.Value { return b.op("Add", nil, s, m) })
		x = b.op("Add", nil, x, b.op("MatMul", nil, b.merge(a, d), b.w(pre+"self_attn.o_proj.weight", d, d)))
		h = b.rmsNorm(x, pre+"post_attention_layernorm", d)
		gu := b.op("MatMul", nil, h, b.w(pre+"mlp.gate_up_proj.weight", d, 4*d))
		gate := b.op("Slice", nil, gu, b.ints(0), b.ints(2*d), b.ints(-1))
		up := b.op("Slice", nil, gu, b.ints(2*d), b.ints(4*d), b.ints(-1))
		x = b.op("Add", nil, x, b.op("MatMul", nil, b.op("Mul", nil, up, b.op("Mul", nil, gate, b.op("Sigmoid", nil, gate))), b.w(pre+"mlp.down_proj.weight", 2*d, d)))
	}
	x = b.rmsNorm(x, "model.norm", d)
	b.output(b.op("MatMul", nil, x, b.w("lm_head.weight", d, vocab)), "logits", graph.Float, sym("batch"), sym("seq"), fixed(vocab))
	return b.m
}

// logBucket is make_log_bucket_position of DeBERTa-v2.
func (b *gen) logBucket(rel *graph.Value, bucket, maxPos int64) *graph.Value {
	mid := bucket / 2
	sign := b.op("Sign", nil, rel)
	inner := b.op("And", nil, b.op("Less", nil, rel, b.int0(mid)), b.op("Greater", nil, rel, b.int0(-mid)))
	abs := b.op("Where", nil, inner, b.int0(mid-1), b.op("Abs", nil, rel))
	logPos := b.op("Add", nil, b.op("Ceil", nil, b.op("Mul", nil, b.op("Div", nil, b.op("Log", nil, b.op("Div", nil, b.toF(abs), b.f0(float32(mid)))),
		b.op("Log", nil, b.f0(float32(maxPos-1)/float32(mid)))), b.f0(float32(mid-1)))), b.f0(float32(mid)))
	return b.op("Where", nil, b.op("LessOrEqual", nil, abs, b.int0(mid)), b.toF(rel), b.op("Mul", nil, logPos, b.toF(sign)))
}

// relativePosition is build_relative_position with buckets: [1, q, k].
func (b *gen) relativePosition(g *graph.Graph, qlen, klen *graph.Value, bucket, maxPos int64) *graph.Value {
	saved := b.g
	b.g = g
	defer func() { b.g = saved }()
	q := b.op("Range", nil, b.int0(0), qlen, b.int0(1))
	k := b.op("Range", nil, b.int0(0), klen, b.int0(1))
	rel := b.op("Sub", nil, b.op("Unsqueeze", nil, q, b.ints(1)), b.op("Unsqueeze", nil, k, b.ints(0)))
	rel = b.toI(b.logBucket(rel, bucket, maxPos))
	return b.op("Unsqueeze", nil, rel, b.ints(0))
}

// debertaV2 builds the DeBERTa-v2 encoder of transformers v4.47.
func debertaV2() *graph.Model {
	const d, heads, hd, layers, vocab, buckets, maxRel, ffn = 64, 4, 16, 2, 96, 8, 32, 96
	b := newGen("pytorch", 93, graph.Opset{Domain: "", Version: 17})
	ids := b.input("input_ids", graph.Int64, sym("batch"), sym("seq"))
	mask := b.input("attention_mask", graph.Int64, sym("batch"), sym("seq"))
	x := b.layerNorm(b.op("Gather", nil, b.wScaled("embeddings.word_embeddings.weight", 1, vocab, d), ids), "embeddings.LayerNorm", d)
	x = b.op("Mul", nil, x, b.toF(b.op("Unsqueeze", nil, mask, b.ints(2))))
	ext := b.op("Mul", nil, b.op("Unsqueeze", nil, mask, b.ints(1, 2)), b.op("Unsqueeze", nil, mask, b.ints(1, 3)))
	keep := b.op("Cast", toAttr(graph.Bool), ext)
	s := b.dim(ids, 1)
	relPos := b.relativePosition(b.g, s, s, buckets, maxRel) // [1, S, S]
	relEmb := b.layerNorm(b.wScaled("encoder.rel_embeddings.weight", 0.5, 2*buckets, d), "encoder.LayerNorm", d)
	scale := b.op("Sqrt", nil, b.op("Mul", nil, b.toF(b.int0(hd)), b.f0(3)))

	// transpose_for_scores: [B, S, H·hd] -> [B·H, S, hd].
	tfs := func(t *graph.Value) *graph.Value {
		p := b.op("Transpose", permAttr(0, 2, 1, 3), b.op("Reshape", nil, t, b.ints(0, 0, heads, -1)))
		return b.op("Reshape", nil, p, b.op("Concat", axisAttr(0), b.ints(-1), b.dim1(t, 1), b.ints(hd)))
	}
	t12 := permAttr(0, 2, 1)
	rel4 := b.op("Unsqueeze", nil, relPos, b.ints(1)) // [1, 1, S, S]
	for l := 0; l < layers; l++ {
		pre := fmt.Sprintf("encoder.layer.%d.attention.self.", l)
		// share_att_key: the position queries and keys are the content
		// query_proj and key_proj (the same weights) of the relative
		// embeddings.
		qW, qB := b.w(pre+"query_proj.weight", d, d), b.wScaled(pre+"query_proj.bias", 0.02, d)
		kW, kB := b.w(pre+"key_proj.weight", d, d), b.wScaled(pre+"key_proj.bias", 0.02, d)
		proj := func(t, w, bias *graph.Value) *graph.Value { return b.op("Add", nil, bias, b.op("MatMul", nil, t, w)) }
		q := tfs(proj(x, qW, qB))
		k := tfs(proj(x, kW, kB))
		v := tfs(b.linear(x, pre+"value_proj", d, d, true))
		scores := b.op("MatMul", nil, q, b.op("Div", nil, b.op("Transpose", t12, k), scale))

		emb := b.op("Unsqueeze", nil, b.op("Slice", nil, relEmb, b.ints(0), b.ints(2*buckets), b.ints(0)), b.ints(0)) // [1, 16, d]
		reps := b.op("Concat", axisAttr(0), b.op("Unsqueeze", nil, b.op("Div", nil, b.dim(q, 0), b.int0(heads)), b.ints(0)), b.ints(1, 1))
		posQ := b.op("Tile", nil, tfs(proj(emb, qW, qB)), reps)
		posK := b.op("Tile", nil, tfs(proj(emb, kW, kB)), reps)
		expand := func(idx *graph.Value) *graph.Value {
			return b.op("Expand", nil, b.op("Squeeze", nil, idx, b.ints(0)), b.op("Concat", axisAttr(0), b.dim1(q, 0), b.dim1(q, 1), b.dim1(relPos, 2)))
		}
		clamp := func(t *graph.Value) *graph.Value {
			return b.op("Clip", nil, t, b.int0(0), b.int0(2*buckets-1))
		}
		// c2p
		c2p := b.op("MatMul", nil, q, b.op("Transpose", t12, posK))
		c2p = b.op("GatherElements", axisAttr(-1), c2p, expand(clamp(b.op("Add", nil, rel4, b.int0(buckets)))))
		score := b.op("Div", nil, c2p, scale)
		// p2c: r_pos by build_rpos (an If on the query and key lengths).
		then := b.g.NewSubgraph("build_rpos_then")
		rebuilt := b.relativePosition(then, b.dim(q, -2), b.dim(k, -2), buckets, maxRel)
		rebuilt.Type = graph.TensorType(graph.Int64, []graph.Dim{fixed(1), sym("seq"), sym("seq")})
		then.AddOutput(rebuilt)
		els := b.g.NewSubgraph("build_rpos_else")
		same := els.Op("Identity", []*graph.Value{rel4}, 1)[0]
		same.Type = graph.TensorType(graph.Int64, []graph.Dim{fixed(1), fixed(1), sym("seq"), sym("seq")})
		els.AddOutput(same)
		differ := b.op("Not", nil, b.op("Equal", nil, b.dim(q, -2), b.dim(k, -2)))
		rpos := b.op("If", []*graph.Attr{graph.GraphAttr("then_branch", then), graph.GraphAttr("else_branch", els)}, differ)
		p2c := b.op("MatMul", nil, k, b.op("Transpose", t12, posQ))
		p2cIdx := b.op("Squeeze", nil, clamp(b.op("Add", nil, b.op("Neg", nil, rpos), b.int0(buckets))), b.ints(0))
		p2c = b.op("GatherElements", axisAttr(-1), p2c, b.op("Expand", nil, p2cIdx,
			b.op("Concat", axisAttr(0), b.dim1(q, 0), b.dim1(k, -2), b.dim1(k, -2))))
		score = b.op("Add", nil, score, b.op("Div", nil, b.op("Transpose", t12, p2c), scale))
		scores = b.op("Add", nil, scores, score)

		s4 := b.op("Reshape", nil, scores, b.op("Concat", axisAttr(0), b.ints(-1, heads), b.dim1(scores, -2), b.dim1(scores, -1)))
		s4 = b.op("Where", nil, keep, s4, b.f0(-3.4028234663852886e+38))
		p := b.op("Softmax", axisAttr(-1), s4)
		ctx := b.op("MatMul", nil, b.op("Reshape", nil, p, b.op("Concat", axisAttr(0), b.ints(-1), b.dim1(p, -2), b.dim1(p, -1))), v)
		ctx = b.op("Transpose", permAttr(0, 2, 1, 3), b.op("Reshape", nil, ctx, b.op("Concat", axisAttr(0), b.ints(-1, heads), b.dim1(ctx, -2), b.dim1(ctx, -1))))
		ctx = b.op("Reshape", nil, ctx, b.ints(0, 0, -1))
		ao := fmt.Sprintf("encoder.layer.%d.attention.output", l)
		x = b.layerNorm(b.op("Add", nil, b.linear(ctx, ao+".dense", d, d, true), x), ao+".LayerNorm", d)
		fo := fmt.Sprintf("encoder.layer.%d", l)
		x = b.layerNorm(b.op("Add", nil, b.ffn(x, fo+".ffn", d, ffn, "gelu", true), x), fo+".output.LayerNorm", d)
	}
	b.output(x, "last_hidden_state", graph.Float, sym("batch"), sym("seq"), fixed(d))
	return b.m
}

// ropePixtral builds the Pixtral-like vision encoder.
func ropePixtral() *graph.Model {
	const d, heads, hd, patch, maxSide = 64, 4, 16, 4, 8
	b := newGen("pytorch", 94, graph.Opset{Domain: "", Version: 17})
	px := b.input("pixel_values", graph.Float, fixed(1), fixed(3), fixed(16), fixed(24))
	conv := b.op("Conv", []*graph.Attr{graph.IntsAttr("kernel_shape", patch, patch), graph.IntsAttr("strides", patch, patch)}, px, b.w("patch_conv.weight", d, 3, patch, patch)) // [1, d, 4, 6]
	x := b.op("Transpose", permAttr(0, 2, 1), b.op("Reshape", nil, conv, b.ints(0, 0, -1)))
	x = b.rmsNorm(x, "ln_pre", d)
	// position_ids_in_meshgrid: h·max_width + w over the conv's grid.
	rows, cols := b.dim(conv, 2), b.dim(conv, 3)
	hr := b.op("Unsqueeze", nil, b.op("Range", nil, b.int0(0), rows, b.int0(1)), b.ints(1))
	wr := b.op("Unsqueeze", nil, b.op("Range", nil, b.int0(0), cols, b.int0(1)), b.ints(0))
	grid := b.op("Concat", axisAttr(0), b.op("Unsqueeze", nil, rows, b.ints(0)), b.op("Unsqueeze", nil, cols, b.ints(0)))
	ids := b.op("Add", nil, b.op("Mul", nil, b.op("Expand", nil, hr, grid), b.int0(maxSide)), b.op("Expand", nil, wr, grid))
	ids = b.op("Reshape", nil, ids, b.ints(-1))
	// The inv_freq buffer: [maxSide², hd] angles.
	freqs := make([]float64, hd/2)
	for j := range freqs {
		freqs[j] = 1 / math.Pow(10000, float64(2*j)/hd)
	}
	table := make([]float32, maxSide*maxSide*hd)
	for h := 0; h < maxSide; h++ {
		for w := 0; w < maxSide; w++ {
			row := table[(h*maxSide+w)*hd:]
			for i := 0; i < hd/4; i++ {
				row[i] = float32(float64(h) * float64(float32(freqs[2*i])))
				row[hd/4+i] = float32(float64(w) * float64(float32(freqs[2*i+1])))
			}
			copy(row[hd/2:hd], row[:hd/2])
		}
	}
	ang := b.op("Gather", nil, b.fl("patch_positional_embedding.inv_freq", []int64{maxSide * maxSide, hd}, table), ids)
	cos := b.op("Unsqueeze", nil, b.op("Cos", nil, ang), b.ints(0))
	sin := b.op("Unsqueeze", nil, b.op("Sin", nil, ang), b.ints(0))
	rope := func(t *graph.Value) *graph.Value {
		return b.op("Add", nil, b.op("Mul", nil, t, cos), b.op("Mul", nil, b.rotateHalf(t, hd), sin))
	}
	for l := 0; l < 2; l++ {
		pre := fmt.Sprintf("transformer.layers.%d.", l)
		h := b.rmsNorm(x, pre+"attention_norm", d)
		q := rope(b.heads(b.linear(h, pre+"attention.q_proj", d, d, false), heads, hd))
		k := rope(b.heads(b.linear(h, pre+"attention.k_proj", d, d, false), heads, hd))
		v := b.heads(b.linear(h, pre+"attention.v_proj", d, d, false), heads, hd)
		x = b.op("Add", nil, x, b.linear(b.merge(b.attn(q, k, v, 1/math.Sqrt(hd), nil), d), pre+"attention.o_proj", d, d, false))
		h = b.rmsNorm(x, pre+"ffn_norm", d)
		gate := b.linear(h, pre+"feed_forward.gate_proj", d, 2*d, false)
		mlp := b.op("Mul", nil, b.op("Mul", nil, gate, b.op("Sigmoid", nil, gate)), b.linear(h, pre+"feed_forward.up_proj", d, 2*d, false))
		x = b.op("Add", nil, x, b.linear(mlp, pre+"feed_forward.down_proj", 2*d, d, false))
	}
	b.output(x, "last_hidden_state", graph.Float, fixed(1), fixed(24), fixed(d))
	return b.m
}
