package testmodels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// Class 2: forms whose attention (or rotation) is not where today's block
// finder and detectors look, and a model whose probe would exceed the
// probe's size limit: none of them holds "no position information".

func foundForms(built func(func() *graph.Model) func(string) (*graph.Model, error)) []GeneralityForm {
	return []GeneralityForm{
		{
			Name: "rope_function_body_fragment", Class: 2,
			Note: "the body of ONNX's RotaryEmbedding function (opset 23) written out, as onnxscript inlines it, in a fragment " +
				"with no attention: X [batch, seq, 2·16] viewed as [batch, seq, 2, 16], the first 8 lanes rotated as interleaved " +
				"pairs taken by strided Slices (x[..., 0::2], x[..., 1::2]), half-width stored caches [64, 4] (base 10000) gathered " +
				"at position_ids, real/imaginary parts stacked back (Unsqueeze, Concat, Reshape), the other 8 lanes passed through",
			Build: built(ropeFunctionBody),
			Truth: Truth{
				Schemes: []string{"rope"},
				Layers:  []LayerScheme{},
				Findings: []FindingTruth{{Scheme: "rope", Layers: []int{}, Params: map[string]any{
					"layout": "interleaved", "base": 10000.0, "rotary_dim": 8.0, "head_dim": 16.0, "max_positions": 64.0}}},
			},
		},
		{
			Name: "rope_cohere_repeat_interleave", Class: 2,
			Note: "CohereModel as torch.onnx.export (opset 17) traces it: emb = repeat_interleave(freqs, 2, dim=-1), which the " +
				"exporter writes as a Split of the 8 frequencies and, per lane, Unsqueeze, Expand to 2 and Reshape, then Concat; " +
				"rotate_half = stack([-x[..., 1::2], x[..., ::2]], -1).flatten(-2) (strided Slices, Unsqueeze, Concat, a Reshape " +
				"whose shape comes from Shape); GQA 4/2 heads of 16, base 10000; parallel attention and MLP, logits · logit_scale",
			Build: built(ropeCohere),
			Truth: Truth{
				Schemes: []string{"rope"},
				Layers:  layerSchemes("rope", "rope"),
				Findings: []FindingTruth{{Scheme: "rope", Layers: []int{0, 1}, Params: map[string]any{
					"layout": "interleaved", "base": 10000.0, "head_dim": 16.0, "rotary_dim": 16.0, "num_heads": 4.0, "num_kv_heads": 2.0,
					"scaling": "none"}}},
			},
		},
		{
			Name: "disentangled_deberta_v1_no_buckets", Class: 2,
			Note: "DebertaModel (v1) as torch.onnx.export traces it: a fused in_proj chunked into q, k, v with q_bias and v_bias, " +
				"relative positions q - k without buckets, att_span = min(S, max_relative_positions 16) computed from the length, " +
				"rel_embeddings [32, 64] sliced [16 - span : 16 + span], c2p through pos_proj (no bias) and p2c through pos_q_proj " +
				"(with bias), indices clamp(±rel + span, 0, 2·span - 1) expanded and read by GatherElements, the query and the " +
				"position query divided by sqrt(head_dim · 3), XSoftmax's Where masks",
			Build: built(debertaV1),
			Truth: Truth{
				Schemes: []string{"disentangled"},
				Layers:  layerSchemes("disentangled", "disentangled"),
				Findings: []FindingTruth{{Scheme: "disentangled", Layers: []int{0, 1}, Params: map[string]any{
					"position_buckets": nil, "max_relative_positions": 16.0, "att_types": []any{"c2p", "p2c"}, "share_att_key": false,
					"scale_factor": 3.0}}},
			},
		},
		{
			Name: "sinusoidal_static_long_context", Class: 2,
			Note: "a static-shape export (input_ids [1, 65536], as exports for fixed-size accelerators are made) of an encoder with " +
				"d_model 4096 whose [sin | cos] encoding is computed in the graph from Range(0, 65536) and 1/10000^(2i/d): the " +
				"angles alone are [65536, 2048], more than a probe may evaluate; projections to 2 heads of 16",
			Build: built(sinusoidalStaticLong),
			Truth: Truth{
				Schemes: []string{"sinusoidal"},
				Layers:  layerSchemes("sinusoidal"),
				Findings: []FindingTruth{{Scheme: "sinusoidal", Layers: []int{0}, Params: map[string]any{
					"layout": "concat_sin_cos", "base": 10000.0, "dim": 4096.0, "computed": true, "freq_denominator": "d/2"}}},
			},
			Alternatives: []Truth{{
				Schemes:  []string{"unknown"},
				Layers:   layerSchemes("unknown"),
				Findings: []FindingTruth{{Scheme: "unknown", Layers: []int{0}, Params: map[string]any{"reason": "probe_failed"}}},
			}},
		},
	}
}

// ropeFunctionBody is the fragment: X and position_ids in, Y out.
func ropeFunctionBody() *graph.Model {
	const heads, hd, rd, rows = 2, 16, 8, 64
	b := newGen("onnxscript", 71, graph.Opset{Domain: "", Version: 23})
	x := b.input("X", graph.Float, sym("batch"), sym("seq"), fixed(heads*hd))
	pos := b.input("position_ids", graph.Int64, sym("batch"), sym("seq"))
	cs, sn := RopeCache(rows, rd, 10000)
	cosCache := b.fl("cos_cache", []int64{rows, rd / 2}, cs)
	sinCache := b.fl("sin_cache", []int64{rows, rd / 2}, sn)

	x4 := b.op("Reshape", nil, x, b.ints(0, 0, heads, -1))
	xr := b.op("Slice", nil, x4, b.ints(0), b.ints(rd), b.ints(3))
	xp := b.op("Slice", nil, x4, b.ints(rd), b.ints(math.MaxInt64), b.ints(3))
	cos := b.op("Unsqueeze", nil, b.op("Gather", nil, cosCache, pos), b.ints(2))
	sin := b.op("Unsqueeze", nil, b.op("Gather", nil, sinCache, pos), b.ints(2))
	x1 := b.op("Slice", nil, xr, b.ints(0), b.ints(math.MaxInt64), b.ints(-1), b.ints(2))
	x2 := b.op("Slice", nil, xr, b.ints(1), b.ints(math.MaxInt64), b.ints(-1), b.ints(2))
	re := b.op("Sub", nil, b.op("Mul", nil, cos, x1), b.op("Mul", nil, sin, x2))
	im := b.op("Add", nil, b.op("Mul", nil, sin, x1), b.op("Mul", nil, cos, x2))
	st := b.op("Concat", axisAttr(-1), b.op("Unsqueeze", nil, re, b.ints(-1)), b.op("Unsqueeze", nil, im, b.ints(-1)))
	rot := b.op("Reshape", nil, st, b.op("Shape", nil, xr))
	y := b.op("Reshape", nil, b.op("Concat", axisAttr(-1), rot, xp), b.op("Shape", nil, x))
	b.output(y, "Y", graph.Float, sym("batch"), sym("seq"), fixed(heads*hd))
	return b.m
}

// repeatInterleave is torch.repeat_interleave(f, 2, dim=-1) of f [.., n]
// as torch.onnx.export (opset 13-17) writes it for a dimension of known
// size n: f split into its n lanes, each unsqueezed, expanded to 2 along
// the new axis and reshaped back, the lanes concatenated.
func (b *gen) repeatInterleave(f *graph.Value, n int, rank int64) *graph.Value {
	ones := make([]int64, n)
	for i := range ones {
		ones[i] = 1
	}
	lanes := b.g.Op("Split", []*graph.Value{f, b.ints(ones...)}, n, graph.IntAttr("axis", rank-1))
	parts := make([]*graph.Value, n)
	lead := make([]int64, rank)
	keep := make([]int64, rank)
	for i := range lead {
		lead[i] = -1
	}
	lead[rank-1] = 1
	keep[rank-1] = -1
	for i, l := range lanes {
		u := b.op("Unsqueeze", nil, l, b.ints(rank))
		shape := b.op("Concat", axisAttr(0), b.ints(lead...), b.ints(2))
		// The exporter's normalisation of -1 sizes for Expand.
		norm := b.op("Where", nil, b.op("Equal", nil, shape, b.op("Mul", nil, b.op("ConstantOfShape", []*graph.Attr{graph.TensorAttr("value", int64Tensor(1))}, b.op("Shape", nil, shape)), b.int0(-1))),
			b.op("ConstantOfShape", []*graph.Attr{graph.TensorAttr("value", int64Tensor(1))}, b.op("Shape", nil, shape)), shape)
		parts[i] = b.op("Reshape", nil, b.op("Expand", nil, u, norm), b.ints(keep...))
	}
	return b.op("Concat", axisAttr(rank-1), parts...)
}

// ropeCohere builds the Cohere-like decoder.
func ropeCohere() *graph.Model {
	const d, heads, kv, hd, layers, vocab, ffn = 64, 4, 2, 16, 2, 96, 96
	b := newGen("pytorch", 72, graph.Opset{Domain: "", Version: 17})
	ids := b.input("input_ids", graph.Int64, sym("batch"), sym("seq"))
	mask := b.input("attention_mask", graph.Int64, sym("batch"), sym("seq"))
	embed := b.wScaled("model.embed_tokens.weight", 1, vocab, d)
	x := b.op("Gather", nil, embed, ids)
	s := b.dim(ids, 1)

	// position_ids = cache_position.unsqueeze(0); inv_freq[None, :, None] @ position_ids[:, None, :].
	pos := b.op("Unsqueeze", nil, b.op("Range", nil, b.int0(0), s, b.int0(1)), b.ints(0))
	inv := make([]float32, hd/2)
	for i := range inv {
		inv[i] = float32(1 / math.Pow(10000, float64(2*i)/hd))
	}
	invE := b.op("Expand", nil, b.fl("model.rotary_emb.inv_freq", []int64{1, hd / 2, 1}, inv), b.op("Concat", axisAttr(0), b.dim1(pos, 0), b.ints(1, 1)))
	freqs := b.op("Transpose", permAttr(0, 2, 1), b.op("MatMul", nil, invE, b.toF(b.op("Unsqueeze", nil, pos, b.ints(1))))) // [1, S, 8]
	emb := b.repeatInterleave(freqs, hd/2, 3)
	cos := b.op("Unsqueeze", nil, b.op("Cos", nil, emb), b.ints(1))
	sin := b.op("Unsqueeze", nil, b.op("Sin", nil, emb), b.ints(1))
	rotateHalf := func(t *graph.Value) *graph.Value {
		x1 := b.op("Slice", nil, t, b.ints(0), b.ints(math.MaxInt64), b.ints(-1), b.ints(2))
		x2 := b.op("Slice", nil, t, b.ints(1), b.ints(math.MaxInt64), b.ints(-1), b.ints(2))
		st := b.op("Concat", axisAttr(-1), b.op("Unsqueeze", nil, b.op("Neg", nil, x2), b.ints(-1)), b.op("Unsqueeze", nil, x1, b.ints(-1)))
		flat := b.op("Concat", axisAttr(0), b.op("Slice", nil, b.op("Shape", nil, st), b.ints(0), b.ints(-2), b.ints(0)), b.ints(-1))
		return b.op("Reshape", nil, st, flat)
	}
	rope := func(t *graph.Value) *graph.Value {
		return b.op("Add", nil, b.op("Mul", nil, t, cos), b.op("Mul", nil, rotateHalf(t), sin))
	}
	repeatKV := func(t *graph.Value) *graph.Value {
		ex := b.op("Expand", nil, b.op("Unsqueeze", nil, t, b.ints(2)), b.ints(1, 1, heads/kv, 1, 1))
		return b.op("Reshape", nil, ex, b.ints(0, heads, -1, hd))
	}
	// The 4-D mask: causal + padding, finfo.min.
	m := b.op("Add", nil, b.causalMask(s), b.extendedMask(mask))
	for l := 0; l < layers; l++ {
		pre := fmt.Sprintf("model.layers.%d.", l)
		h := b.op("LayerNormalization", []*graph.Attr{graph.IntAttr("axis", -1), graph.FloatAttr("epsilon", 1e-5)}, x, b.gain(pre+"input_layernorm.weight", d), b.fl(pre+"input_layernorm.bias", []int64{d}, make([]float32, d)))
		q := rope(b.heads(b.linear(h, pre+"self_attn.q_proj", d, heads*hd, false), heads, hd))
		k := repeatKV(rope(b.heads(b.linear(h, pre+"self_attn.k_proj", d, kv*hd, false), kv, hd)))
		v := repeatKV(b.heads(b.linear(h, pre+"self_attn.v_proj", d, kv*hd, false), kv, hd))
		a := b.attn(q, k, v, 1/math.Sqrt(hd), func(sc *graph.Value) *graph.Value { return b.op("Add", nil, sc, m) })
		attnOut := b.linear(b.merge(a, d), pre+"self_attn.o_proj", d, d, false)
		gate := b.linear(h, pre+"mlp.gate_proj", d, ffn, false)
		mlp := b.linear(b.op("Mul", nil, b.op("Mul", nil, gate, b.op("Sigmoid", nil, gate)), b.linear(h, pre+"mlp.up_proj", d, ffn, false)), pre+"mlp.down_proj", ffn, d, false)
		x = b.op("Add", nil, b.op("Add", nil, x, attnOut), mlp)
	}
	x = b.op("LayerNormalization", []*graph.Attr{graph.IntAttr("axis", -1), graph.FloatAttr("epsilon", 1e-5)}, x, b.gain("model.norm.weight", d), b.fl("model.norm.bias", []int64{d}, make([]float32, d)))
	logits := b.op("Mul", nil, b.op("MatMul", nil, x, b.op("Transpose", permAttr(1, 0), embed)), b.f0(0.0625))
	b.output(logits, "logits", graph.Float, sym("batch"), sym("seq"), fixed(vocab))
	return b.m
}

// debertaV1 builds the DeBERTa (v1) encoder without position buckets.
func debertaV1() *graph.Model {
	const d, heads, hd, layers, vocab, maxRel, ffn = 64, 4, 16, 2, 96, 16, 96
	b := newGen("pytorch", 73, graph.Opset{Domain: "", Version: 17})
	ids := b.input("input_ids", graph.Int64, sym("batch"), sym("sequence"))
	mask := b.input("attention_mask", graph.Int64, sym("batch"), sym("sequence"))
	x := b.layerNorm(b.op("Gather", nil, b.wScaled("embeddings.word_embeddings.weight", 1, vocab, d), ids), "embeddings.LayerNorm", d)
	// get_attention_mask: mask[:, None, None, :] · mask[:, None, :, None], as booleans.
	m4 := b.op("Mul", nil, b.op("Unsqueeze", nil, mask, b.ints(1, 2)), b.op("Unsqueeze", nil, mask, b.ints(1, 3)))
	keep := b.op("Cast", toAttr(graph.Bool), m4)
	// build_relative_position: q_ids[:, None] - k_ids.view(1, -1).repeat(q, 1), unsqueezed to [1, 1, q, k].
	s := b.dim(ids, 1)
	r := b.op("Range", nil, b.int0(0), s, b.int0(1))
	rel := b.op("Sub", nil, b.op("Unsqueeze", nil, r, b.ints(1)), b.op("Tile", nil, b.op("Reshape", nil, r, b.ints(1, -1)), b.op("Concat", axisAttr(0), b.op("Unsqueeze", nil, s, b.ints(0)), b.ints(1))))
	rel = b.op("Unsqueeze", nil, rel, b.ints(0, 1))
	relEmb := b.wScaled("encoder.rel_embeddings.weight", 0.5, 2*maxRel, d)
	// compute_attention_span: min(max(q, k), max_relative_positions).
	span := b.op("Min", nil, s, b.int0(maxRel))
	scale := b.f0(float32(math.Sqrt(hd * 3)))
	for l := 0; l < layers; l++ {
		pre := fmt.Sprintf("encoder.layer.%d.attention.self.", l)
		qkv := b.op("Transpose", permAttr(0, 2, 1, 3), b.op("Reshape", nil, b.linear(x, pre+"in_proj", d, 3*d, false), b.ints(0, 0, heads, -1))) // [B, H, S, 3·hd]
		parts := b.g.Op("Split", []*graph.Value{qkv, b.ints(hd, hd, hd)}, 3, graph.IntAttr("axis", -1))
		q := b.op("Add", nil, parts[0], b.heads(b.op("Unsqueeze", nil, b.wScaled(pre+"q_bias", 0.02, d), b.ints(0, 1)), heads, hd))
		k := parts[1]
		v := b.op("Add", nil, parts[2], b.heads(b.op("Unsqueeze", nil, b.wScaled(pre+"v_bias", 0.02, d), b.ints(0, 1)), heads, hd))
		q = b.op("Div", nil, q, scale)
		scores := b.op("MatMul", nil, q, b.op("Transpose", permAttr(0, 1, 3, 2), k))

		emb := b.op("Unsqueeze", nil, b.op("Slice", nil, relEmb, b.op("Unsqueeze", nil, b.op("Sub", nil, b.int0(maxRel), span), b.ints(0)),
			b.op("Unsqueeze", nil, b.op("Add", nil, b.int0(maxRel), span), b.ints(0)), b.ints(0)), b.ints(0)) // [1, 2·span, d]
		hi := b.op("Sub", nil, b.op("Mul", nil, span, b.int0(2)), b.int0(1))
		clamp := func(t *graph.Value) *graph.Value { return b.op("Max", nil, b.op("Min", nil, t, hi), b.int0(0)) }
		expand := func(idx *graph.Value) *graph.Value {
			return b.op("Expand", nil, idx, b.op("Concat", axisAttr(0), b.dim1(q, 0), b.dim1(q, 1), b.dim1(q, 2), b.dim1(rel, 3)))
		}
		// c2p
		posKey := b.heads(b.linear(emb, pre+"pos_proj", d, d, false), heads, hd)
		c2p := b.op("MatMul", nil, q, b.op("Transpose", permAttr(0, 1, 3, 2), posKey))
		c2p = b.op("GatherElements", axisAttr(-1), c2p, expand(clamp(b.op("Add", nil, rel, span))))
		// p2c
		posQuery := b.op("Div", nil, b.heads(b.linear(emb, pre+"pos_q_proj", d, d, true), heads, hd), scale)
		p2c := b.op("MatMul", nil, k, b.op("Transpose", permAttr(0, 1, 3, 2), posQuery))
		p2c = b.op("Transpose", permAttr(0, 1, 3, 2), b.op("GatherElements", axisAttr(-1), p2c, expand(clamp(b.op("Add", nil, b.op("Neg", nil, rel), span)))))
		scores = b.op("Add", nil, scores, b.op("Add", nil, c2p, p2c))

		scores = b.op("Where", nil, keep, scores, b.f0(-3.4028234663852886e+38))
		p := b.op("Where", nil, keep, b.op("Softmax", axisAttr(-1), scores), b.f0(0))
		ctx := b.merge(b.op("MatMul", nil, p, v), d)
		ao := "encoder.layer." + fmt.Sprint(l) + ".attention.output"
		x = b.layerNorm(b.op("Add", nil, b.linear(ctx, ao+".dense", d, d, true), x), ao+".LayerNorm", d)
		fo := "encoder.layer." + fmt.Sprint(l)
		x = b.layerNorm(b.op("Add", nil, b.ffn(x, fo+".ffn", d, ffn, "gelu", true), x), fo+".output.LayerNorm", d)
	}
	b.output(x, "last_hidden_state", graph.Float, sym("batch"), sym("sequence"), fixed(d))
	return b.m
}

// sinusoidalStaticLong builds the static-shape long-context encoder.
func sinusoidalStaticLong() *graph.Model {
	const seq, d, heads, hd, vocab = 65536, 4096, 2, 16, 64
	b := newGen("pytorch", 74, graph.Opset{Domain: "", Version: 17})
	ids := b.input("input_ids", graph.Int64, fixed(1), fixed(seq))
	x := b.op("Gather", nil, b.wScaled("embed_tokens.weight", 1, vocab, d), ids)
	pos := b.toF(b.op("Range", nil, b.int0(0), b.dim(ids, 1), b.int0(1)))
	ex := b.op("Div", nil, b.toF(b.op("Range", nil, b.int0(0), b.int0(d), b.int0(2))), b.f0(d))
	inv := b.op("Div", nil, b.f0(1), b.op("Pow", nil, b.f0(10000), ex))
	ang := b.op("Mul", nil, b.op("Unsqueeze", nil, pos, b.ints(1)), b.op("Unsqueeze", nil, inv, b.ints(0)))
	pe := b.op("Concat", axisAttr(-1), b.op("Sin", nil, ang), b.op("Cos", nil, ang))
	x = b.op("Add", nil, x, b.op("Unsqueeze", nil, pe, b.ints(0)))
	q := b.heads(b.linear(x, "layer.0.q_proj", d, heads*hd, false), heads, hd)
	k := b.heads(b.linear(x, "layer.0.k_proj", d, heads*hd, false), heads, hd)
	v := b.heads(b.linear(x, "layer.0.v_proj", d, heads*hd, false), heads, hd)
	a := b.attn(q, k, v, 1/math.Sqrt(hd), nil)
	y := b.op("Add", nil, x, b.linear(b.merge(a, heads*hd), "layer.0.o_proj", heads*hd, d, false))
	logits := b.linear(y, "lm_head", d, vocab, false)
	b.output(logits, "logits", graph.Float, fixed(1), fixed(seq), fixed(vocab))
	return b.m
}
