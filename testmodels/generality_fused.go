package testmodels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// Class 2, fused: RotaryEmbedding ops (com.microsoft and ONNX opset 23)
// that are not on an attention block's q or k as the block finder walks
// back from the scores: alone in a fragment, as ONNX Runtime's fusion
// tests and ONNX's backend tests write them, and in a decoder whose keys
// reach the scores through a static cache written by ScatterND.

func fusedForms(built func(func() *graph.Model) func(string) (*graph.Model, error)) []GeneralityForm {
	return []GeneralityForm{
		{
			Name: "rope_fused_ms_fragment_ort_fusion_test", Class: 2,
			Note: "the fused model of ONNX Runtime's test_rotary_embedding_fusion (create_fused_model): one com.microsoft " +
				"RotaryEmbedding (interleaved = 1, as the fusion writes Microsoft's LLaMA rotations) of input_0 [batch, 4, seq, 6] " +
				"(batch, heads, sequence, head size) at position_ids [batch, seq] with cos_cache and sin_cache initializers " +
				"[12, 3] (base 10000), output_0 the graph's output; the model imports com.microsoft only, no attention",
			Build: built(ropeFusedMSFragment),
			Truth: Truth{
				Schemes: []string{"rope"},
				Layers:  []LayerScheme{},
				Findings: []FindingTruth{{Scheme: "rope", Layers: []int{}, Fused: true, Params: map[string]any{
					"layout": "interleaved", "base": 10000.0, "head_dim": 6.0, "rotary_dim": 6.0, "num_heads": 4.0,
					"scaling": "none", "factor": 1.0, "max_positions": 12.0}}},
			},
			Null: map[string][]string{"rope": {"num_kv_heads"}},
		},
		{
			Name: "rope_fused_onnx_backend_3d_rotary_dim", Class: 2,
			Note: "ONNX's backend test of RotaryEmbedding (opset 23) on 3-D input with num_heads = 4 and rotary_embedding_dim = 4 " +
				"(test_rotary_embedding_3d_input and _with_rotary_dim together): input [2, 3, 32], cos_cache and sin_cache [50, 2] " +
				"and position_ids [2, 3] are all graph inputs, as the backend tests' models have them; no attention. The caches' " +
				"values are not in the file, so the frequencies are not either",
			Build: built(ropeFusedONNXFragment),
			Truth: Truth{
				Schemes: []string{"rope"},
				Layers:  []LayerScheme{},
				Findings: []FindingTruth{{Scheme: "rope", Layers: []int{}, Fused: true, Params: map[string]any{
					"layout": "half_split", "head_dim": 8.0, "rotary_dim": 4.0, "num_heads": 4.0, "max_positions": 50.0}}},
			},
			Null: map[string][]string{"rope": {"base", "scaling", "factor", "num_kv_heads"}},
		},
		{
			Name: "rope_fused_static_cache_scatternd", Class: 2,
			Note: "a Llama decoder with a static KV cache (transformers' StaticCache: past_key [batch, 2, 32, 16] as an input, the " +
				"new keys written at cache_position by `k_out[:, :, cache_position] = k`, which the exporter writes as the " +
				"sequence axis moved first, ScatterND, moved back) after a rotary fusion (ONNX Runtime's or onnxscript's): q and " +
				"k [batch, heads, seq, 16] rotated by com.microsoft RotaryEmbedding with stored caches [64, 8] (base 10000) at " +
				"position_ids; repeat_kv (Unsqueeze, Expand, Reshape) to 4 heads, the scores over the 32 cache slots masked " +
				"beyond cache_position. The keys reach the scores through the scatter, not along the path a block's sides are " +
				"walked",
			Build: built(ropeFusedStaticCache),
			Truth: Truth{
				Schemes: []string{"rope"},
				Layers:  layerSchemes("rope", "rope"),
				Findings: []FindingTruth{{Scheme: "rope", Layers: []int{0, 1}, Fused: true, Params: map[string]any{
					"layout": "half_split", "base": 10000.0, "head_dim": 16.0, "rotary_dim": 16.0, "num_heads": 4.0,
					"num_kv_heads": 2.0, "scaling": "none", "factor": 1.0, "max_positions": 64.0}}},
			},
		},
	}
}

// ropeFusedMSFragment is ONNX Runtime's fused RotaryEmbedding test model,
// with caches that hold a rotation.
func ropeFusedMSFragment() *graph.Model {
	const heads, hd, rows = 4, 6, 12
	b := newGen("onnxruntime.transformers", 81, graph.Opset{Domain: "com.microsoft", Version: 1})
	x := b.input("input_0", graph.Float, sym("batch"), fixed(heads), sym("seq"), fixed(hd))
	pos := b.input("position_ids", graph.Int64, sym("batch"), sym("seq"))
	cs, sn := RopeCache(rows, hd, 10000)
	cosCache := b.fl("cos_cache", []int64{rows, hd / 2}, cs)
	sinCache := b.fl("sin_cache", []int64{rows, hd / 2}, sn)
	y := b.ms("RotaryEmbedding", []*graph.Attr{graph.IntAttr("interleaved", 1)}, x, pos, cosCache, sinCache)
	b.output(y, "output_0", graph.Float, sym("batch"), fixed(heads), sym("seq"), fixed(hd))
	return b.m
}

// ropeFusedONNXFragment is the backend test's one-node model.
func ropeFusedONNXFragment() *graph.Model {
	b := newGen("backend-test", 82, graph.Opset{Domain: "", Version: 23})
	x := b.input("input", graph.Float, fixed(2), fixed(3), fixed(32))
	cosCache := b.input("cos_cache", graph.Float, fixed(50), fixed(2))
	sinCache := b.input("sin_cache", graph.Float, fixed(50), fixed(2))
	pos := b.input("position_ids", graph.Int64, fixed(2), fixed(3))
	y := b.op("RotaryEmbedding", []*graph.Attr{graph.IntAttr("num_heads", 4), graph.IntAttr("rotary_embedding_dim", 4)}, x, cosCache, sinCache, pos)
	b.output(y, "output", graph.Float, fixed(2), fixed(3), fixed(32))
	return b.m
}

// ropeFusedStaticCache builds the static-cache decoder.
func ropeFusedStaticCache() *graph.Model {
	const d, heads, kv, hd, slots, rows, vocab = 64, 4, 2, 16, 32, 64, 96
	b := newGen("pytorch", 83, graph.Opset{Domain: "", Version: 17}, graph.Opset{Domain: "com.microsoft", Version: 1})
	ids := b.input("input_ids", graph.Int64, sym("batch"), sym("seq"))
	pos := b.input("position_ids", graph.Int64, sym("batch"), sym("seq"))
	cachePos := b.input("cache_position", graph.Int64, sym("seq"))
	embed := b.wScaled("model.embed_tokens.weight", 1, vocab, d)
	x := b.op("Gather", nil, embed, ids)
	cs, sn := RopeCache(rows, hd, 10000)
	cosCache := b.fl("cos_cache", []int64{rows, hd / 2}, cs)
	sinCache := b.fl("sin_cache", []int64{rows, hd / 2}, sn)
	rot := func(t *graph.Value) *graph.Value {
		return b.ms("RotaryEmbedding", []*graph.Attr{graph.IntAttr("interleaved", 0)}, t, pos, cosCache, sinCache)
	}
	// Slot j is seen by the query at cache_position i when j <= i.
	slot := b.op("Range", nil, b.int0(0), b.int0(slots), b.int0(1))
	later := b.op("Greater", nil, b.op("Unsqueeze", nil, slot, b.ints(0)), b.op("Unsqueeze", nil, cachePos, b.ints(1)))
	mask := b.op("Unsqueeze", nil, b.op("Where", nil, later, b.f0(-3.4028234663852886e+38), b.f0(0)), b.ints(0, 1))
	// k_out[:, :, cache_position] = k: the indexed axis first, ScatterND
	// at [seq, 1] indices, back.
	write := func(cache, t *graph.Value) *graph.Value {
		sc := b.op("ScatterND", nil, b.op("Transpose", permAttr(2, 0, 1, 3), cache), b.op("Unsqueeze", nil, cachePos, b.ints(1)),
			b.op("Transpose", permAttr(2, 0, 1, 3), t))
		return b.op("Transpose", permAttr(1, 2, 0, 3), sc)
	}
	repeatKV := func(t *graph.Value) *graph.Value {
		ex := b.op("Expand", nil, b.op("Unsqueeze", nil, t, b.ints(2)), b.ints(1, 1, heads/kv, 1, 1))
		return b.op("Reshape", nil, ex, b.ints(0, heads, -1, hd))
	}
	cacheDims := []graph.Dim{sym("batch"), fixed(kv), fixed(slots), fixed(hd)}
	for l := 0; l < 2; l++ {
		pre := fmt.Sprintf("model.layers.%d.", l)
		pk := b.input(fmt.Sprintf("past_key_values.%d.key", l), graph.Float, cacheDims...)
		pv := b.input(fmt.Sprintf("past_key_values.%d.value", l), graph.Float, cacheDims...)
		h := b.rmsNorm(x, pre+"input_layernorm", d)
		q := rot(b.heads(b.linear(h, pre+"self_attn.q_proj", d, heads*hd, false), heads, hd))
		k := write(pk, rot(b.heads(b.linear(h, pre+"self_attn.k_proj", d, kv*hd, false), kv, hd)))
		v := write(pv, b.heads(b.linear(h, pre+"self_attn.v_proj", d, kv*hd, false), kv, hd))
		a := b.attn(q, repeatKV(k), repeatKV(v), 1/math.Sqrt(hd), func(s *graph.Value) *graph.Value { return b.op("Add", nil, s, mask) })
		x = b.op("Add", nil, x, b.linear(b.merge(a, heads*hd), pre+"self_attn.o_proj", heads*hd, d, false))
		h = b.rmsNorm(x, pre+"post_attention_layernorm", d)
		gate := b.linear(h, pre+"mlp.gate_proj", d, 2*d, false)
		mlp := b.op("Mul", nil, b.op("Mul", nil, gate, b.op("Sigmoid", nil, gate)), b.linear(h, pre+"mlp.up_proj", d, 2*d, false))
		x = b.op("Add", nil, x, b.linear(mlp, pre+"mlp.down_proj", 2*d, d, false))
		b.output(k, fmt.Sprintf("present.%d.key", l), graph.Float, cacheDims...)
		b.output(v, fmt.Sprintf("present.%d.value", l), graph.Float, cacheDims...)
	}
	logits := b.op("MatMul", nil, b.rmsNorm(x, "model.norm", d), b.w("lm_head.weight", d, vocab))
	b.output(logits, "logits", graph.Float, sym("batch"), sym("seq"), fixed(vocab))
	b.g.Outputs = append(b.g.Outputs[len(b.g.Outputs)-1:], b.g.Outputs[:len(b.g.Outputs)-1]...)
	return b.m
}
