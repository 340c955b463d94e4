package testmodels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// Class 3: position values whose form hides the scheme that made them: a
// sinusoid an optimizer folded into a constant, a FLOATER integration
// written as an explicit-Euler chain of Tanh layers.

func valueForms(built func(func() *graph.Model) func(string) (*graph.Model, error)) []GeneralityForm {
	return []GeneralityForm{
		{
			Name: "sinusoidal_folded_by_optimizer", Class: 3,
			Note: "the Annotated Transformer's encoder exported with a fixed input [1, 24] and saved by ONNX Runtime's optimizer, " +
				"whose constant folding turned the computed encoding (pe[:, 0::2] = sin, pe[:, 1::2] = cos of pos/10000^(2i/d)) " +
				"into one stored [24, 32] initializer added to the scaled token embeddings: no Range, Sin or Cos is left, and " +
				"no Gather or Slice reads the table",
			Build: built(sinusoidalFolded),
			Truth: Truth{
				Schemes: []string{"sinusoidal"},
				Layers:  layerSchemes("sinusoidal", "sinusoidal"),
				Findings: []FindingTruth{{Scheme: "sinusoidal", Layers: []int{0, 1}, Params: map[string]any{
					"layout": "interleaved", "base": 10000.0, "dim": 32.0, "computed": false, "max_positions": 24.0,
					"freq_denominator": "d/2", "position_offset": 0.0}}},
			},
		},
		{
			Name: "sinusoidal_torch_tutorial_time_major_folded", Class: 3,
			Note: "PyTorch's nn.Transformer language-model tutorial (TransformerModel: PositionalEncoding's buffer pe [max_len, 1, d], " +
				"x = embedding(src)·sqrt(d) + pe[:src.size(0)], nn.TransformerEncoder with the square subsequent mask) exported with " +
				"a fixed src [35, 4] (sequence first, the tutorial's bptt 35) and constant folding: the encoding is one stored " +
				"[35, 1, 32] initializer broadcast over the batch axis 1; nn.MultiheadAttention as traced ([S, B·H, hd] views, " +
				"transposed to [B·H, S, hd], bmm)",
			Build: built(func() *graph.Model { return torchTutorial(true) }),
			Truth: Truth{
				Schemes: []string{"sinusoidal"},
				Layers:  layerSchemes("sinusoidal", "sinusoidal"),
				Findings: []FindingTruth{{Scheme: "sinusoidal", Layers: []int{0, 1}, Params: map[string]any{
					"layout": "interleaved", "base": 10000.0, "dim": 32.0, "computed": false, "max_positions": 35.0,
					"freq_denominator": "d/2", "position_offset": 0.0}}},
			},
		},
		{
			Name: "sinusoidal_torch_tutorial_time_major", Class: 2,
			Note: "the same tutorial model exported with dynamic axes (src [seq, batch]): the buffer pe [5000, 1, 32] sliced " +
				"[:seq] on axis 0 and broadcast over the batch, the causal mask computed from the length",
			Build: built(func() *graph.Model { return torchTutorial(false) }),
			Truth: Truth{
				Schemes: []string{"sinusoidal"},
				Layers:  layerSchemes("sinusoidal", "sinusoidal"),
				Findings: []FindingTruth{{Scheme: "sinusoidal", Layers: []int{0, 1}, Params: map[string]any{
					"layout": "interleaved", "base": 10000.0, "dim": 32.0, "computed": false, "max_positions": 5000.0,
					"freq_denominator": "d/2", "position_offset": 0.0}}},
			},
		},
		{
			Name: "floater_euler_tanh_unrolled", Class: 3,
			Note: "FLOATER's position flow dp/dt = tanh(W·[p, t] + b) from a learned p(0), integrated by explicit Euler with step " +
				"0.1 over 32 grid points, the steps unrolled by the tracer (exported without constant folding, as the integration " +
				"depends on weights only): Concat(p, t), MatMul, Add, Tanh, Mul(h), Add per step, the 32 states stacked, sliced " +
				"to the sequence and added to the token embeddings",
			Build: built(floaterEuler),
			Truth: Truth{
				Schemes: []string{"floater"},
				Layers:  layerSchemes("floater", "floater"),
				Findings: []FindingTruth{{Scheme: "floater", Layers: []int{0, 1}, Params: map[string]any{
					"dim": 32.0, "solver": "euler", "step": 0.1, "max_positions": 32.0, "form": "unrolled", "injection": "add_to_input"}}},
			},
		},
	}
}

// encoderLayers appends n post-norm encoder layers (eager attention,
// GELU FFN) over x [B, S, d] and returns the output.
func (b *gen) encoderLayers(x *graph.Value, n int, d, heads int64, mask *graph.Value) *graph.Value {
	hd := d / heads
	for l := 0; l < n; l++ {
		pre := fmt.Sprintf("encoder.layers.%d.", l)
		q := b.heads(b.linear(x, pre+"self_attn.q_proj", d, d, true), heads, hd)
		k := b.heads(b.linear(x, pre+"self_attn.k_proj", d, d, true), heads, hd)
		v := b.heads(b.linear(x, pre+"self_attn.v_proj", d, d, true), heads, hd)
		var bias func(*graph.Value) *graph.Value
		if mask != nil {
			bias = func(s *graph.Value) *graph.Value { return b.op("Add", nil, s, mask) }
		}
		a := b.linear(b.merge(b.attn(q, k, v, 1/math.Sqrt(float64(hd)), bias), d), pre+"self_attn.out_proj", d, d, true)
		x = b.layerNorm(b.op("Add", nil, x, a), pre+"norm1", d)
		x = b.layerNorm(b.op("Add", nil, x, b.ffn(x, pre+"ffn", d, 2*d, "gelu", true)), pre+"norm2", d)
	}
	return x
}

// sinusoidalFolded builds the optimizer's save of the fixed-size encoder.
func sinusoidalFolded() *graph.Model {
	const seq, d, vocab = 24, 32, 64
	b := newGen("onnxruntime.transformers", 81, graph.Opset{Domain: "", Version: 17})
	ids := b.input("src", graph.Int64, fixed(1), fixed(seq))
	x := b.op("Mul", nil, b.op("Gather", nil, b.wScaled("src_embed.0.lut.weight", 1, vocab, d), ids), b.f0(float32(math.Sqrt(d))))
	x = b.op("Add", nil, x, b.fl("onnx::Add_folded_pe", []int64{seq, d}, sinTableInterleavedGen(seq, d)))
	x = b.encoderLayers(x, 2, d, 4, nil)
	b.output(b.linear(x, "generator.proj", d, vocab, true), "logits", graph.Float, fixed(1), fixed(seq), fixed(vocab))
	return b.m
}

// sinTableInterleavedGen is the Annotated Transformer's table, computed
// in float32 as torch computes it: div_term = exp(arange(0, d, 2) ·
// -(ln 10000 / d)), sin(position · div_term) on the even columns, cos on
// the odd.
func sinTableInterleavedGen(n, d int) []float32 {
	t := make([]float32, n*d)
	for i := 0; i < d/2; i++ {
		div := float32(math.Exp(float64(float32(2*i)) * -(math.Log(10000) / float64(d))))
		for p := 0; p < n; p++ {
			a := float64(float32(p) * div)
			t[p*d+2*i], t[p*d+2*i+1] = float32(math.Sin(a)), float32(math.Cos(a))
		}
	}
	return t
}

// floaterEuler builds the Euler-integrated FLOATER encoder.
func floaterEuler() *graph.Model {
	const d, vocab, steps = 32, 64, 32
	const h = 0.1
	b := newGen("pytorch", 82, graph.Opset{Domain: "", Version: 17})
	ids := b.input("input_ids", graph.Int64, sym("batch"), sym("seq"))
	x := b.op("Gather", nil, b.wScaled("embed_tokens.weight", 1, vocab, d), ids)
	p := b.op("Unsqueeze", nil, b.wScaled("pos_flow.init", 0.5, d), b.ints(0)) // [1, d]
	w := b.w("pos_flow.dynamics.weight", d+1, d)
	bias := b.wScaled("pos_flow.dynamics.bias", 0.1, d)
	states := []*graph.Value{p}
	for k := 0; k < steps-1; k++ {
		t := b.fl(fmt.Sprintf("pos_flow.t_%d", k), []int64{1, 1}, []float32{float32(float64(k) * h)})
		f := b.op("Tanh", nil, b.op("Add", nil, b.op("MatMul", nil, b.op("Concat", axisAttr(1), p, t), w), bias))
		p = b.op("Add", nil, p, b.op("Mul", nil, f, b.f0(h)))
		states = append(states, p)
	}
	table := b.op("Concat", axisAttr(0), states...) // [steps, d]
	pe := b.op("Slice", nil, table, b.ints(0), b.dim1(ids, 1), b.ints(0))
	x = b.op("Add", nil, x, pe)
	x = b.encoderLayers(x, 2, d, 2, nil)
	b.output(b.linear(x, "lm_head", d, vocab, false), "logits", graph.Float, sym("batch"), sym("seq"), fixed(vocab))
	return b.m
}

// torchTutorial builds PyTorch's nn.Transformer tutorial model, sequence
// first: folded, a fixed src [35, 4] with the encoding and the mask
// constants; else src [seq, batch] with the buffer sliced and the mask
// computed.
func torchTutorial(folded bool) *graph.Model {
	const d, heads, hd, vocab, ffn, bptt, batch, maxLen = 32, 2, 16, 64, 64, 35, 4, 5000
	b := newGen("pytorch", 83, graph.Opset{Domain: "", Version: 17})
	var src, pe, mask *graph.Value
	neg := float32(math.Inf(-1))
	if folded {
		src = b.input("src", graph.Int64, fixed(bptt), fixed(batch))
		pe = b.fl("onnx::Add_folded_pe", []int64{bptt, 1, d}, sinTableInterleavedGen(bptt, d))
		m := make([]float32, bptt*bptt)
		for i := 0; i < bptt; i++ {
			for j := i + 1; j < bptt; j++ {
				m[i*bptt+j] = neg
			}
		}
		mask = b.fl("onnx::Add_folded_mask", []int64{bptt, bptt}, m)
	} else {
		src = b.input("src", graph.Int64, sym("seq"), sym("batch"))
		buf := b.fl("pos_encoder.pe", []int64{maxLen, 1, d}, sinTableInterleavedGen(maxLen, d))
		pe = b.op("Slice", nil, buf, b.ints(0), b.dim1(src, 0), b.ints(0))
		r := b.op("Range", nil, b.int0(0), b.dim(src, 0), b.int0(1))
		above := b.op("Greater", nil, b.op("Unsqueeze", nil, r, b.ints(0)), b.op("Unsqueeze", nil, r, b.ints(1)))
		mask = b.op("Where", nil, above, b.f0(neg), b.f0(0))
	}
	x := b.op("Mul", nil, b.op("Gather", nil, b.wScaled("embedding.weight", 0.1, vocab, d), src), b.f0(float32(math.Sqrt(d))))
	x = b.op("Add", nil, x, pe) // [S, B, d]
	for l := 0; l < 2; l++ {
		pre := fmt.Sprintf("transformer_encoder.layers.%d.", l)
		qkv := b.linear(x, pre+"self_attn.in_proj", d, 3*d, true)
		parts := b.g.Op("Split", []*graph.Value{qkv, b.ints(d, d, d)}, 3, graph.IntAttr("axis", -1))
		// [S, B, d] -> [S, B·H, hd] -> [B·H, S, hd]
		view := func(t *graph.Value) *graph.Value {
			shape := b.op("Concat", axisAttr(0), b.dim1(t, 0), b.op("Mul", nil, b.dim1(t, 1), b.ints(heads)), b.ints(hd))
			return b.op("Transpose", permAttr(1, 0, 2), b.op("Reshape", nil, t, shape))
		}
		q := b.op("Div", nil, view(parts[0]), b.f0(float32(math.Sqrt(hd))))
		k, v := view(parts[1]), view(parts[2])
		s := b.op("Add", nil, mask, b.op("MatMul", nil, q, b.op("Transpose", permAttr(0, 2, 1), k)))
		a := b.op("MatMul", nil, b.op("Softmax", axisAttr(-1), s), v) // [B·H, S, hd]
		a = b.op("Reshape", nil, b.op("Transpose", permAttr(1, 0, 2), a), b.op("Concat", axisAttr(0), b.dim1(x, 0), b.dim1(x, 1), b.ints(d)))
		x = b.layerNorm(b.op("Add", nil, x, b.linear(a, pre+"self_attn.out_proj", d, d, true)), pre+"norm1", d)
		x = b.layerNorm(b.op("Add", nil, x, b.ffn(x, pre+"ff", d, ffn, "relu", true)), pre+"norm2", d)
	}
	out := b.linear(x, "linear", d, vocab, true)
	if folded {
		b.output(out, "output", graph.Float, fixed(bptt), fixed(batch), fixed(vocab))
	} else {
		b.output(out, "output", graph.Float, sym("seq"), sym("batch"), fixed(vocab))
	}
	return b.m
}
