package testmodels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// Class 1: encoder-decoder models with no learned positions, whose
// decoder reads its tokens from a [vocab, d] table by a second id input
// (or the only one). Nothing in them is a learned position table.

const (
	edVocab = 96
	edD     = 32
	edHeads = 4
	edHD    = edD / edHeads
	edFFN   = 64
)

func encDecForms(built func(func() *graph.Model) func(string) (*graph.Model, error)) []GeneralityForm {
	t5 := func(bidirectional bool) map[string]any {
		return map[string]any{"num_buckets": 32.0, "max_distance": 128.0, "bidirectional": bidirectional, "num_heads": float64(edHeads)}
	}
	return []GeneralityForm{
		{
			Name: "encdec_t5_shared_embedding", Class: 1,
			Note: "T5Model as torch.onnx.export traces it (input_ids, attention_mask, decoder_input_ids -> the decoder's last_hidden_state): " +
				"one shared [96, 32] token table gathered by both id inputs, no logits; bidirectional bucketed bias in the encoder's layer, " +
				"causal bias computed in the decoder's first layer and reused by the second; cross-attention has no position bias. " +
				"Blocks: 0 encoder, 1 decoder self, 2 cross, 3 decoder self, 4 cross.",
			Build: built(func() *graph.Model { return encDecT5(false) }),
			Truth: Truth{
				Schemes: []string{"nope", "t5_relative_bias"},
				Layers:  layerSchemes("t5_relative_bias", "t5_relative_bias", "nope", "t5_relative_bias", "nope"),
				Findings: []FindingTruth{
					{Scheme: "t5_relative_bias", Layers: []int{0}, Params: t5(true)},
					{Scheme: "t5_relative_bias", Layers: []int{1, 3}, Params: t5(false)},
					{Scheme: "nope", Layers: []int{2, 4}, Params: map[string]any{"temperature_tuning": nil}},
				},
			},
		},
		{
			Name: "encdec_t5_optimum_decoder", Class: 1,
			Note: "optimum's decoder_model.onnx of T5ForConditionalGeneration: input_ids of the decoder alone, encoder_hidden_states and " +
				"encoder_attention_mask as inputs, logits by the tied [96, 32] table scaled by d_model^-0.5; causal bucketed bias " +
				"computed in layer 0 and reused in layer 1. Blocks: 0 self, 1 cross, 2 self, 3 cross.",
			Build: built(func() *graph.Model { return encDecT5(true) }),
			Truth: Truth{
				Schemes: []string{"nope", "t5_relative_bias"},
				Layers:  layerSchemes("t5_relative_bias", "nope", "t5_relative_bias", "nope"),
				Findings: []FindingTruth{
					{Scheme: "t5_relative_bias", Layers: []int{0, 2}, Params: t5(false)},
					{Scheme: "nope", Layers: []int{1, 3}, Params: map[string]any{"temperature_tuning": nil}},
				},
			},
		},
		{
			Name: "encdec_marian_encoder_sinusoid", Class: 1,
			Note: "MarianMTModel-like as torch.onnx.export traces it (logits by the tied [96, 32] table plus final_logits_bias): " +
				"the encoder adds Marian's stored [64, 32] sinusoid ([sin | cos], 10000^(2i/d)) gathered at Range(0, S); the " +
				"decoder has no position table (its only position signal is the causal mask). Blocks: 0 encoder, 1 decoder self, " +
				"2 cross (whose keys and values are downstream of the encoder's table).",
			Build: built(encDecMarian),
			Truth: Truth{
				Schemes: []string{"nope", "sinusoidal"},
				Layers:  layerSchemes("sinusoidal", "nope", "sinusoidal"),
				Findings: []FindingTruth{
					{Scheme: "sinusoidal", Layers: []int{0, 2}, Params: map[string]any{"layout": "concat_sin_cos", "base": 10000.0, "dim": float64(edD),
						"computed": false, "max_positions": 64.0, "freq_denominator": "d/2", "position_offset": 0.0}},
					{Scheme: "nope", Layers: []int{1}, Params: map[string]any{"temperature_tuning": nil}},
				},
			},
		},
	}
}

// t5Bucket is T5Attention._relative_position_bucket as traced.
func (b *gen) t5Bucket(rel *graph.Value, numBuckets, maxDistance int64, bidirectional bool) *graph.Value {
	var ret, n *graph.Value
	nb := numBuckets
	if bidirectional {
		nb /= 2
		ret = b.op("Mul", nil, b.toI(b.op("Greater", nil, rel, b.int0(0))), b.int0(nb))
		n = b.op("Abs", nil, rel)
	} else {
		n = b.op("Neg", nil, b.op("Min", nil, rel, b.op("ConstantOfShape", []*graph.Attr{graph.TensorAttr("value", int64Tensor(0))}, b.op("Shape", nil, rel))))
	}
	exact := nb / 2
	small := b.op("Less", nil, n, b.int0(exact))
	lf := b.op("Div", nil, b.op("Log", nil, b.op("Div", nil, b.toF(n), b.f0(float32(exact)))), b.f0(float32(math.Log(float64(maxDistance)/float64(exact)))))
	large := b.op("Add", nil, b.int0(exact), b.toI(b.op("Mul", nil, lf, b.f0(float32(nb-exact)))))
	large = b.op("Min", nil, large, b.op("ConstantOfShape", []*graph.Attr{graph.TensorAttr("value", int64Tensor(nb-1))}, b.op("Shape", nil, large)))
	bk := b.op("Where", nil, small, n, large)
	if ret != nil {
		bk = b.op("Add", nil, ret, bk)
	}
	return bk
}

func int64Tensor(v int64) *graph.Tensor {
	t, err := graph.NewTensor("value", graph.Int64, []int64{1}, []int64{v})
	if err != nil {
		panic(err)
	}
	return t
}

// t5Bias is T5Attention.compute_bias for query and key lengths (scalars):
// the bucket of memory - context, embedded, permuted to [1, H, q, k].
func (b *gen) t5Bias(name string, qlen, klen *graph.Value, bidirectional bool) *graph.Value {
	ctx := b.op("Unsqueeze", nil, b.op("Range", nil, b.int0(0), qlen, b.int0(1)), b.ints(1))
	mem := b.op("Unsqueeze", nil, b.op("Range", nil, b.int0(0), klen, b.int0(1)), b.ints(0))
	bk := b.t5Bucket(b.op("Sub", nil, mem, ctx), 32, 128, bidirectional)
	emb := b.op("Gather", nil, b.wScaled(name+".relative_attention_bias.weight", 1, 32, edHeads), bk) // [q, k, H]
	return b.op("Unsqueeze", nil, b.op("Transpose", permAttr(2, 0, 1), emb), b.ints(0))
}

// t5Attention is T5Attention without scaling: projections without bias,
// scores + position_bias.
func (b *gen) t5Attention(name string, xq, xkv, bias *graph.Value) *graph.Value {
	q := b.heads(b.linear(xq, name+".q", edD, edD, false), edHeads, edHD)
	k := b.heads(b.linear(xkv, name+".k", edD, edD, false), edHeads, edHD)
	v := b.heads(b.linear(xkv, name+".v", edD, edD, false), edHeads, edHD)
	a := b.attn(q, k, v, 0, func(s *graph.Value) *graph.Value { return b.op("Add", nil, s, bias) })
	return b.linear(b.merge(a, edD), name+".o", edD, edD, false)
}

// encDecT5 builds T5Model (decoderOnly false: both stacks, the decoder's
// hidden states out) or optimum's decoder_model.onnx (decoderOnly: the
// encoder's output an input, logits out).
func encDecT5(decoderOnly bool) *graph.Model {
	b := newGen("pytorch", 61, graph.Opset{Domain: "", Version: 17})
	shared := b.wScaled("shared.weight", 1, edVocab, edD)
	var encOut, encMask *graph.Value
	var decIDs *graph.Value
	if decoderOnly {
		decIDs = b.input("input_ids", graph.Int64, sym("batch_size"), sym("decoder_sequence_length"))
		encMask = b.input("encoder_attention_mask", graph.Int64, sym("batch_size"), sym("encoder_sequence_length"))
		encOut = b.input("encoder_hidden_states", graph.Float, sym("batch_size"), sym("encoder_sequence_length"), fixed(edD))
	} else {
		ids := b.input("input_ids", graph.Int64, sym("batch"), sym("src_len"))
		encMask = b.input("attention_mask", graph.Int64, sym("batch"), sym("src_len"))
		decIDs = b.input("decoder_input_ids", graph.Int64, sym("batch"), sym("tgt_len"))
		x := b.op("Gather", nil, shared, ids)
		s := b.dim(ids, 1)
		bias := b.op("Add", nil, b.t5Bias("encoder.block.0.layer.0.SelfAttention", s, s, true), b.extendedMask(encMask))
		h := b.rmsNorm(x, "encoder.block.0.layer.0.layer_norm", edD)
		x = b.op("Add", nil, x, b.t5Attention("encoder.block.0.layer.0.SelfAttention", h, h, bias))
		x = b.op("Add", nil, x, b.ffn(b.rmsNorm(x, "encoder.block.0.layer.1.layer_norm", edD), "encoder.block.0.layer.1.DenseReluDense", edD, edFFN, "relu", false))
		encOut = b.rmsNorm(x, "encoder.final_layer_norm", edD)
	}
	y := b.op("Gather", nil, shared, decIDs)
	t := b.dim(decIDs, 1)
	selfBias := b.op("Add", nil, b.t5Bias("decoder.block.0.layer.0.SelfAttention", t, t, false), b.causalMask(t))
	crossBias := b.extendedMask(encMask)
	for l := 0; l < 2; l++ {
		pre := fmt.Sprintf("decoder.block.%d.layer.", l)
		h := b.rmsNorm(y, pre+"0.layer_norm", edD)
		y = b.op("Add", nil, y, b.t5Attention(pre+"0.SelfAttention", h, h, selfBias))
		h = b.rmsNorm(y, pre+"1.layer_norm", edD)
		y = b.op("Add", nil, y, b.t5Attention(pre+"1.EncDecAttention", h, encOut, crossBias))
		y = b.op("Add", nil, y, b.ffn(b.rmsNorm(y, pre+"2.layer_norm", edD), pre+"2.DenseReluDense", edD, edFFN, "relu", false))
	}
	y = b.rmsNorm(y, "decoder.final_layer_norm", edD)
	if decoderOnly {
		scaled := b.op("Mul", nil, y, b.f0(float32(math.Pow(edD, -0.5))))
		logits := b.op("MatMul", nil, scaled, b.op("Transpose", permAttr(1, 0), shared))
		b.output(logits, "logits", graph.Float, sym("batch_size"), sym("decoder_sequence_length"), fixed(edVocab))
	} else {
		b.output(y, "last_hidden_state", graph.Float, sym("batch"), sym("tgt_len"), fixed(edD))
	}
	return b.m
}

// marianTable is MarianSinusoidalPositionalEmbedding._init_weight:
// position_enc[pos, j] = pos / 10000^(2(j//2)/d); sin of the even columns
// in the first half, cos of the odd ones in the second.
func marianTable(n, d int) []float32 {
	t := make([]float32, n*d)
	for p := 0; p < n; p++ {
		for i := 0; i < d/2; i++ {
			a := float64(p) / math.Pow(10000, float64(2*i)/float64(d))
			t[p*d+i], t[p*d+d/2+i] = float32(math.Sin(a)), float32(math.Cos(a))
		}
	}
	return t
}

// bartAttention is BartAttention: biased projections, the query scaled by
// head_dim^-0.5 before the product, an additive mask.
func (b *gen) bartAttention(name string, xq, xkv, mask *graph.Value) *graph.Value {
	q := b.op("Mul", nil, b.linear(xq, name+".q_proj", edD, edD, true), b.f0(float32(math.Pow(edHD, -0.5))))
	q = b.heads(q, edHeads, edHD)
	k := b.heads(b.linear(xkv, name+".k_proj", edD, edD, true), edHeads, edHD)
	v := b.heads(b.linear(xkv, name+".v_proj", edD, edD, true), edHeads, edHD)
	a := b.attn(q, k, v, 0, func(s *graph.Value) *graph.Value { return b.op("Add", nil, s, mask) })
	return b.linear(b.merge(a, edD), name+".out_proj", edD, edD, true)
}

// encDecMarian builds the Marian-like model: one post-norm encoder layer
// over tokens plus the stored sinusoid, one decoder layer over tokens
// alone, tied logits.
func encDecMarian() *graph.Model {
	b := newGen("pytorch", 62, graph.Opset{Domain: "", Version: 17})
	shared := b.wScaled("model.shared.weight", 1, edVocab, edD)
	ids := b.input("input_ids", graph.Int64, sym("batch"), sym("src_len"))
	mask := b.input("attention_mask", graph.Int64, sym("batch"), sym("src_len"))
	dec := b.input("decoder_input_ids", graph.Int64, sym("batch"), sym("tgt_len"))

	pos := b.op("Range", nil, b.int0(0), b.dim(ids, 1), b.int0(1))
	table := b.fl("model.encoder.embed_positions.weight", []int64{64, edD}, marianTable(64, edD))
	x := b.op("Add", nil, b.op("Gather", nil, shared, ids), b.op("Gather", nil, table, pos))
	encMask := b.extendedMask(mask)
	const e = "model.encoder.layers.0."
	x = b.layerNorm(b.op("Add", nil, x, b.bartAttention(e+"self_attn", x, x, encMask)), e+"self_attn_layer_norm", edD)
	x = b.layerNorm(b.op("Add", nil, x, b.ffn(x, e+"ffn", edD, edFFN, "silu", true)), e+"final_layer_norm", edD)

	y := b.op("Gather", nil, shared, dec)
	const d = "model.decoder.layers.0."
	y = b.layerNorm(b.op("Add", nil, y, b.bartAttention(d+"self_attn", y, y, b.causalMask(b.dim(dec, 1)))), d+"self_attn_layer_norm", edD)
	y = b.layerNorm(b.op("Add", nil, y, b.bartAttention(d+"encoder_attn", y, x, encMask)), d+"encoder_attn_layer_norm", edD)
	y = b.layerNorm(b.op("Add", nil, y, b.ffn(y, d+"ffn", edD, edFFN, "silu", true)), d+"final_layer_norm", edD)
	logits := b.op("Add", nil, b.op("MatMul", nil, y, b.op("Transpose", permAttr(1, 0), shared)), b.wScaled("final_logits_bias", 0.02, 1, edVocab))
	b.output(logits, "logits", graph.Float, sym("batch"), sym("tgt_len"), fixed(edVocab))
	return b.m
}
