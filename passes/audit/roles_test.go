package audit_test

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/passes/work"
	"github.com/onnxpe/onnxpe/testmodels"
)

// rolesOf normalises m and returns the role of every input by name.
func rolesOf(t *testing.T, m *graph.Model) map[string]work.Role {
	t.Helper()
	w, err := work.NewWork(m)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]work.Role{}
	for _, v := range w.Inputs() {
		out[v.Name] = w.Role(v)
	}
	return out
}

var bsDims = []graph.Dim{{Param: "batch"}, {Param: "seq"}}

// TestInputRoles: input roles follow the math of each input's uses: token
// ids read the table whose rows are the vocabulary of the logits (else the
// largest), positions enter a rotation or read a second table, token types
// read a small table or one beside positions the graph computes, masks are
// used as masks. Each case is a form an earlier rule got wrong.
func TestInputRoles(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *schemetest.Net)
		want  map[string]work.Role
	}{{
		// GPT-2 Megatron (ort_gpt2_megatron_unfused): the token table has 10
		// rows, the position table 64; the logits count the 10.
		name: "vocabulary_smaller_than_positions",
		build: func(b *schemetest.Net) {
			pos, ids := b.IntInput("b", bsDims...), b.IntInput("a", bsDims...)
			x := b.Op("Add", []*graph.Value{b.Gather(64, pos), b.Gather(10, ids)})
			y := b.Op("MatMul", []*graph.Value{x, b.Weight(schemetest.Hidden, 10)})
			y.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: 10, Known: true}})
			b.G.AddOutput(y)
		},
		want: map[string]work.Role{"a": work.RoleTokens, "b": work.RolePositions},
	}, {
		// No logits: the largest table holds tokens.
		name: "encoder_without_logits",
		build: func(b *schemetest.Net) {
			pos, ids := b.IntInput("a", bsDims...), b.IntInput("b", bsDims...)
			b.EncoderOut(b.Op("Add", []*graph.Value{b.Gather(24, pos), b.Gather(300, ids)}))
		},
		want: map[string]work.Role{"a": work.RolePositions, "b": work.RoleTokens},
	}, {
		// BERT (ort_bert_toy_pytorch): positions from the graph's own Range,
		// a token-type table of 24 rows (more than a segment table's 16:
		// only the computed positions tell).
		name: "segment_table_beside_computed_positions",
		build: func(b *schemetest.Net) {
			ids, tt := b.IntInput("a", bsDims...), b.IntInput("b", bsDims...)
			r := b.Op("Range", []*graph.Value{b.I64s(0), b.SeqLen(ids), b.I64s(1)})
			x := b.Op("Add", []*graph.Value{b.Gather(99, ids), b.Gather(24, tt)})
			x = b.Op("Add", []*graph.Value{x, b.Gather(512, b.Op("Unsqueeze", []*graph.Value{r, b.I64(0)}))})
			b.EncoderOut(x)
		},
		want: map[string]work.Role{"a": work.RoleTokens, "b": work.RoleTokenType},
	}, {
		// Token types and positions both given: the segment table is small.
		name: "segment_table_beside_position_ids",
		build: func(b *schemetest.Net) {
			ids, tt, pos := b.IntInput("a", bsDims...), b.IntInput("b", bsDims...), b.IntInput("c", bsDims...)
			x := b.Op("Add", []*graph.Value{b.Gather(schemetest.Vocab, ids), b.Gather(16, tt)})
			b.Output(b.Op("Add", []*graph.Value{x, b.Gather(64, pos)}))
		},
		want: map[string]work.Role{"a": work.RoleTokens, "b": work.RoleTokenType, "c": work.RolePositions},
	}, {
		// Positions offset by the length of a KV cache before a fused
		// RotaryEmbedding: arithmetic, then the op's position input.
		name: "rotary_positions_after_an_offset",
		build: func(b *schemetest.Net) {
			ids, pos := b.IDs(), b.PosIDs()
			past := b.G.AddInput("past", graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Value: schemetest.Heads, Known: true}, {Param: "past"}, {Value: schemetest.HeadDim, Known: true}}))
			plen := b.Op("Gather", []*graph.Value{b.Op("Shape", []*graph.Value{past}), b.I64s(2)}, graph.IntAttr("axis", 0))
			p := b.Op("Add", []*graph.Value{pos, plen})
			x := b.Embed(ids)
			cos, sin := b.Caches(64, schemetest.HeadDim, 10000, schemetest.One, 1)
			q := b.Dop("com.microsoft", "RotaryEmbedding", []*graph.Value{b.Proj(x, schemetest.Heads*schemetest.HeadDim), p, cos, sin}, 1, graph.IntAttr("num_heads", schemetest.Heads))[0]
			b.Output(b.Op("Add", []*graph.Value{x, q}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "position_ids": work.RolePositions, "past": work.RoleContent},
	}, {
		// GroupQueryAttention's do_rotary reads position_ids (input 9).
		name: "gqa_position_ids",
		build: func(b *schemetest.Net) {
			ids, pos := b.IDs(), b.PosIDs()
			x := b.Embed(ids)
			cos, sin := b.Caches(64, schemetest.HeadDim, 10000, schemetest.One, 1)
			seqlens := b.G.AddInput("seqlens_k", graph.TensorType(graph.Int32, []graph.Dim{{Param: "batch"}}))
			total := b.G.AddInput("total_sequence_length", graph.TensorType(graph.Int32, nil))
			q, k, v := b.Proj(x, schemetest.Heads*schemetest.HeadDim), b.Proj(x, schemetest.KVHeads*schemetest.HeadDim), b.Proj(x, schemetest.KVHeads*schemetest.HeadDim)
			a := b.Dop("com.microsoft", "GroupQueryAttention", []*graph.Value{q, k, v, nil, nil, seqlens, total, cos, sin, pos}, 3,
				graph.IntAttr("num_heads", schemetest.Heads), graph.IntAttr("kv_num_heads", schemetest.KVHeads), graph.IntAttr("do_rotary", 1))[0]
			b.Output(b.Op("Add", []*graph.Value{x, b.Proj(a, schemetest.Hidden)}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "position_ids": work.RolePositions,
			"seqlens_k": work.RoleOther, "total_sequence_length": work.RoleOther},
	}, {
		// EmbedLayerNormalization: input 7 is the mask, 8 the positions.
		name: "embed_layer_norm_inputs",
		build: func(b *schemetest.Net) {
			ids, seg, mask, pos := b.IntInput("a", bsDims...), b.IntInput("b", bsDims...), b.IntInput("c", bsDims...), b.IntInput("d", bsDims...)
			out := b.Dop("com.microsoft", "EmbedLayerNormalization", []*graph.Value{ids, seg, b.Weight(schemetest.Vocab, schemetest.Hidden), b.Weight(64, schemetest.Hidden),
				b.Weight(2, schemetest.Hidden), b.Weight(schemetest.Hidden), b.Weight(schemetest.Hidden), mask, pos}, 2)
			b.Output(out[0])
		},
		want: map[string]work.Role{"a": work.RoleTokens, "b": work.RoleTokenType, "c": work.RoleMask, "d": work.RolePositions},
	}, {
		// fairseq/BLOOM: positions computed from the mask's CumSum (a mask,
		// not positions, even though a position table is read after it);
		// the token ids compared with the padding id are still token ids.
		name: "mask_whose_cumsum_makes_positions",
		build: func(b *schemetest.Net) {
			ids, mask := b.IDs(), b.IntInput("attention_mask", bsDims...)
			cs := b.Op("CumSum", []*graph.Value{mask, b.I64s(1)})
			p := b.Op("Sub", []*graph.Value{b.Op("Mul", []*graph.Value{cs, mask}), b.I64s(1)})
			notPad := b.Op("Cast", []*graph.Value{b.Op("Not", []*graph.Value{b.Op("Equal", []*graph.Value{ids, b.I64s(1)})})}, graph.IntAttr("to", int64(graph.Int64)))
			p = b.Op("Mul", []*graph.Value{p, notPad})
			b.Output(b.Op("Add", []*graph.Value{b.Embed(ids), b.Gather(64, p)}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "attention_mask": work.RoleMask},
	}, {
		// Phi-3 (ee_phi35_mini_longrope_noweights): positions turned into
		// angles, and their largest + 1 compared with the original length:
		// a comparison after arithmetic is not a mask's use.
		name: "positions_compared_after_an_offset",
		build: func(b *schemetest.Net) {
			ids, pos := b.IDs(), b.PosIDs()
			long := b.Op("Greater", []*graph.Value{b.Op("Add", []*graph.Value{pos, b.I64s(1)}), b.I64s(4096)})
			inv := b.Op("Where", []*graph.Value{long, b.Scalar(0.5), b.Scalar(1)})
			a := b.Op("Mul", []*graph.Value{b.Op("Cast", []*graph.Value{pos}, graph.IntAttr("to", int64(graph.Float))), inv})
			x := b.Embed(ids)
			b.Output(b.Op("Add", []*graph.Value{x, b.Op("ReduceSum", []*graph.Value{b.Op("Sin", []*graph.Value{a})})}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "position_ids": work.RolePositions},
	}, {
		// A mask combined with a causal mask, then 1 - m (T5's decoder).
		name: "mask_combined_then_inverted",
		build: func(b *schemetest.Net) {
			ids, mask := b.IDs(), b.IntInput("attention_mask", bsDims...)
			causal := b.Op("Cast", []*graph.Value{b.Op("Less", []*graph.Value{b.I64(0, 1), b.I64(1, 2)})}, graph.IntAttr("to", int64(graph.Int64)))
			m := b.Op("Cast", []*graph.Value{b.Op("Mul", []*graph.Value{causal, mask})}, graph.IntAttr("to", int64(graph.Float)))
			inv := b.Op("Sub", []*graph.Value{b.Scalar(1), m})
			x := b.Embed(ids)
			b.Output(b.Op("Add", []*graph.Value{x, b.Op("ReduceSum", []*graph.Value{inv})}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "attention_mask": work.RoleMask},
	}, {
		// Inputs nothing reads, or only their shape (genai_lfm2_stub_decoder).
		name: "unused_inputs",
		build: func(b *schemetest.Net) {
			ids, _, shaped := b.IDs(), b.PosIDs(), b.IntInput("attention_mask", bsDims...)
			r := b.Op("Range", []*graph.Value{b.I64s(0), b.SeqLen(shaped), b.I64s(1)})
			b.Output(b.Op("Add", []*graph.Value{b.Embed(ids), b.Gather(64, r)}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "position_ids": work.RoleUnused, "attention_mask": work.RoleUnused},
	}, {
		// A cos/sin cache with as many rows as the vocabulary, gathered by
		// position_ids given before input_ids: its rows multiply q.
		name: "cos_sin_cache_as_large_as_the_vocabulary",
		build: func(b *schemetest.Net) {
			pos, ids := b.PosIDs(), b.IDs()
			x := b.Embed(ids)
			cos, sin := b.Caches(schemetest.Vocab, 2*schemetest.Hidden, 10000, schemetest.One, 1)
			c := b.Op("Concat", []*graph.Value{b.Op("Gather", []*graph.Value{cos, pos}), b.Op("Gather", []*graph.Value{cos, pos})}, graph.IntAttr("axis", -1))
			s := b.Op("Concat", []*graph.Value{b.Op("Gather", []*graph.Value{sin, pos}), b.Op("Gather", []*graph.Value{sin, pos})}, graph.IntAttr("axis", -1))
			q := b.Proj(x, schemetest.Hidden)
			r := b.Op("Add", []*graph.Value{b.Op("Mul", []*graph.Value{q, c}), b.Op("Mul", []*graph.Value{b.Op("Neg", []*graph.Value{q}), s})})
			b.Output(b.Op("Add", []*graph.Value{x, r}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "position_ids": work.RolePositions},
	}, {
		// Hugging Face's Llama (v4.47): the mask, cast to float, is added to
		// the causal mask and the sum compared with 0 (padding_mask =
		// causal + m == 0); the addition had made it positions.
		name: "mask_added_to_a_causal_mask_and_compared_with_0",
		build: func(b *schemetest.Net) {
			ids, m := b.IDs(), b.IntInput("attention_mask", bsDims...)
			mf := b.Op("Cast", []*graph.Value{b.Op("Unsqueeze", []*graph.Value{m, b.I64(1, 2)})}, graph.IntAttr("to", int64(graph.Float)))
			causal := b.F32([]int64{1, 1, 1, 1}, []float32{0})
			pad := b.Op("Equal", []*graph.Value{b.Op("Add", []*graph.Value{causal, mf}), b.Scalar(0)})
			bias := b.Op("Where", []*graph.Value{pad, b.Scalar(-1e9), b.Scalar(0)})
			b.Output(b.Op("Add", []*graph.Value{b.Embed(ids), b.Op("ReduceSum", []*graph.Value{bias})}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "attention_mask": work.RoleMask},
	}, {
		// DeBERTa: the mask times itself transposed (a pair of tokens is
		// visible when both are), m·mᵀ; a product had made it positions.
		name: "mask_times_itself",
		build: func(b *schemetest.Net) {
			ids, m := b.IDs(), b.IntInput("attention_mask", bsDims...)
			ext := b.Op("Unsqueeze", []*graph.Value{m, b.I64(1, 2)})
			pair := b.Op("Mul", []*graph.Value{ext, b.Op("Unsqueeze", []*graph.Value{b.Op("Squeeze", []*graph.Value{ext, b.I64(-2)}), b.I64(-1)})})
			f := b.Op("Cast", []*graph.Value{pair}, graph.IntAttr("to", int64(graph.Float)))
			b.Output(b.Op("Add", []*graph.Value{b.Embed(ids), b.Op("ReduceSum", []*graph.Value{f})}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "attention_mask": work.RoleMask},
	}, {
		// An encoder-decoder whose stacks share the token table (T5,
		// Marian, BART): the decoder's ids gather it too, so they are
		// tokens, not positions of a second table.
		name: "decoder_ids_gather_the_shared_token_table",
		build: func(b *schemetest.Net) {
			ids, dec := b.IDs(), b.IntInput("decoder_input_ids", bsDims...)
			table := b.Weight(schemetest.Vocab, schemetest.Hidden)
			enc := b.Op("Gather", []*graph.Value{table, ids})
			d := b.Op("Gather", []*graph.Value{table, dec})
			b.Output(b.Op("Add", []*graph.Value{d, b.Op("ReduceMean", []*graph.Value{enc})}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "decoder_input_ids": work.RoleTokens},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := schemetest.NewNet(schemetest.ONNX(18), schemetest.MS())
			c.build(b)
			got := rolesOf(t, b.M)
			for _, k := range slices.Sorted(maps.Keys(c.want)) {
				if got[k] != c.want[k] {
					t.Errorf("%s: role %q, want %q (all: %v)", k, got[k], c.want[k], got)
				}
			}
		})
	}
}

// TestRealModelRoles: the roles of the inputs of the vendored real models
// that other tools wrote, as their graphs establish them (truth.json notes).
func TestRealModelRoles(t *testing.T) {
	want := map[string]map[string]work.Role{
		"ort_gpt2_megatron_unfused":        {"input_ids": work.RoleTokens, "position_ids": work.RolePositions},
		"ort_gpt2_megatron_embedlayernorm": {"input_ids": work.RoleTokens, "position_ids": work.RolePositions},
		"ort_bert_toy_pytorch":             {"input_ids": work.RoleTokens, "token_type_ids": work.RoleTokenType, "input_mask": work.RoleMask},
		"ort_embed_layer_norm_fragment":    {"input_ids": work.RoleTokens, "segment_ids": work.RoleTokenType, "input_mask": work.RoleMask},
		"genai_lfm2_stub_decoder":          {"input_ids": work.RoleTokens, "position_ids": work.RoleUnused, "attention_mask": work.RoleUnused},
		"genai_tiny_gqa_no_rotary":         {"input_ids": work.RoleTokens, "attention_mask": work.RoleMask},
		"ee_phi35_mini_longrope_noweights": {"input_ids": work.RoleTokens, "position_ids": work.RolePositions, "attention_mask": work.RoleMask},
		"onnx_rotary_embedding_3d_input":   {"position_ids": work.RolePositions, "cos_cache": work.RoleParam},
		// A [1024, 1024] causal mask times -3.4e38; positions come from a Range.
		"ee_llama_dort_invfreq_input": {"input11": work.RoleMask, "input14": work.RoleTokens},
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		t.Run(name, func(t *testing.T) {
			m, err := graph.LoadWith(filepath.Join(testmodels.RealModelsDir(), name, "model.onnx"), graph.LoadOptions{AllowMissingExternal: true})
			if err != nil {
				t.Fatal(err)
			}
			got := rolesOf(t, m)
			for _, k := range slices.Sorted(maps.Keys(want[name])) {
				if got[k] != want[name][k] {
					t.Errorf("%s: role %q, want %q (all: %v)", k, got[k], want[name][k], got)
				}
			}
		})
	}
}
