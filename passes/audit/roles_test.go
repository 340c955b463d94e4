package audit_test

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
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

func (b *fub) intInput(name string, dims ...graph.Dim) *graph.Value {
	return b.g.AddInput(name, graph.TensorType(graph.Int64, dims))
}

var bsDims = []graph.Dim{{Param: "batch"}, {Param: "seq"}}

// gather reads rows of a fresh [rows, fbHidden] table at ids.
func (b *fub) gather(rows int64, ids *graph.Value) *graph.Value {
	return b.op("Gather", []*graph.Value{b.weight(rows, fbHidden), ids})
}

// encoderOut ends a model on its hidden states (no logits).
func (b *fub) encoderOut(x *graph.Value) {
	y := b.op("Add", []*graph.Value{x, b.proj(x, fbHidden)})
	y.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: fbHidden, Known: true}})
	b.g.AddOutput(y)
}

// TestInputRoles: input roles follow the math of each input's uses: token
// ids read the table whose rows are the vocabulary of the logits (else the
// largest), positions enter a rotation or read a second table, token types
// read a small table or one beside positions the graph computes, masks are
// used as masks. Each case is a form an earlier rule got wrong.
func TestInputRoles(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *fub)
		want  map[string]work.Role
	}{{
		// GPT-2 Megatron (ort_gpt2_megatron_unfused): the token table has 10
		// rows, the position table 64; the logits count the 10.
		name: "vocabulary_smaller_than_positions",
		build: func(b *fub) {
			pos, ids := b.intInput("b", bsDims...), b.intInput("a", bsDims...)
			x := b.op("Add", []*graph.Value{b.gather(64, pos), b.gather(10, ids)})
			y := b.op("MatMul", []*graph.Value{x, b.weight(fbHidden, 10)})
			y.Type = graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Param: "seq"}, {Value: 10, Known: true}})
			b.g.AddOutput(y)
		},
		want: map[string]work.Role{"a": work.RoleTokens, "b": work.RolePositions},
	}, {
		// No logits: the largest table holds tokens.
		name: "encoder_without_logits",
		build: func(b *fub) {
			pos, ids := b.intInput("a", bsDims...), b.intInput("b", bsDims...)
			b.encoderOut(b.op("Add", []*graph.Value{b.gather(24, pos), b.gather(300, ids)}))
		},
		want: map[string]work.Role{"a": work.RolePositions, "b": work.RoleTokens},
	}, {
		// BERT (ort_bert_toy_pytorch): positions from the graph's own Range,
		// a token-type table of 24 rows (more than a segment table's 16:
		// only the computed positions tell).
		name: "segment_table_beside_computed_positions",
		build: func(b *fub) {
			ids, tt := b.intInput("a", bsDims...), b.intInput("b", bsDims...)
			r := b.op("Range", []*graph.Value{b.i64s(0), b.seqLen(ids), b.i64s(1)})
			x := b.op("Add", []*graph.Value{b.gather(99, ids), b.gather(24, tt)})
			x = b.op("Add", []*graph.Value{x, b.gather(512, b.op("Unsqueeze", []*graph.Value{r, b.i64(0)}))})
			b.encoderOut(x)
		},
		want: map[string]work.Role{"a": work.RoleTokens, "b": work.RoleTokenType},
	}, {
		// Token types and positions both given: the segment table is small.
		name: "segment_table_beside_position_ids",
		build: func(b *fub) {
			ids, tt, pos := b.intInput("a", bsDims...), b.intInput("b", bsDims...), b.intInput("c", bsDims...)
			x := b.op("Add", []*graph.Value{b.gather(fbVocab, ids), b.gather(16, tt)})
			b.output(b.op("Add", []*graph.Value{x, b.gather(64, pos)}))
		},
		want: map[string]work.Role{"a": work.RoleTokens, "b": work.RoleTokenType, "c": work.RolePositions},
	}, {
		// Positions offset by the length of a KV cache before a fused
		// RotaryEmbedding: arithmetic, then the op's position input.
		name: "rotary_positions_after_an_offset",
		build: func(b *fub) {
			ids, pos := b.ids(), b.posIDs()
			past := b.g.AddInput("past", graph.TensorType(graph.Float, []graph.Dim{{Param: "batch"}, {Value: fbHeads, Known: true}, {Param: "past"}, {Value: fbHD, Known: true}}))
			plen := b.op("Gather", []*graph.Value{b.op("Shape", []*graph.Value{past}), b.i64s(2)}, graph.IntAttr("axis", 0))
			p := b.op("Add", []*graph.Value{pos, plen})
			x := b.embed(ids)
			cos, sin := b.caches(64, fbHD, 10000, one, 1)
			q := b.dop("com.microsoft", "RotaryEmbedding", []*graph.Value{b.proj(x, fbHeads*fbHD), p, cos, sin}, 1, graph.IntAttr("num_heads", fbHeads))[0]
			b.output(b.op("Add", []*graph.Value{x, q}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "position_ids": work.RolePositions, "past": work.RoleContent},
	}, {
		// GroupQueryAttention's do_rotary reads position_ids (input 9).
		name: "gqa_position_ids",
		build: func(b *fub) {
			ids, pos := b.ids(), b.posIDs()
			x := b.embed(ids)
			cos, sin := b.caches(64, fbHD, 10000, one, 1)
			seqlens := b.g.AddInput("seqlens_k", graph.TensorType(graph.Int32, []graph.Dim{{Param: "batch"}}))
			total := b.g.AddInput("total_sequence_length", graph.TensorType(graph.Int32, nil))
			q, k, v := b.proj(x, fbHeads*fbHD), b.proj(x, fbKV*fbHD), b.proj(x, fbKV*fbHD)
			a := b.dop("com.microsoft", "GroupQueryAttention", []*graph.Value{q, k, v, nil, nil, seqlens, total, cos, sin, pos}, 3,
				graph.IntAttr("num_heads", fbHeads), graph.IntAttr("kv_num_heads", fbKV), graph.IntAttr("do_rotary", 1))[0]
			b.output(b.op("Add", []*graph.Value{x, b.proj(a, fbHidden)}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "position_ids": work.RolePositions,
			"seqlens_k": work.RoleOther, "total_sequence_length": work.RoleOther},
	}, {
		// EmbedLayerNormalization: input 7 is the mask, 8 the positions.
		name: "embed_layer_norm_inputs",
		build: func(b *fub) {
			ids, seg, mask, pos := b.intInput("a", bsDims...), b.intInput("b", bsDims...), b.intInput("c", bsDims...), b.intInput("d", bsDims...)
			out := b.dop("com.microsoft", "EmbedLayerNormalization", []*graph.Value{ids, seg, b.weight(fbVocab, fbHidden), b.weight(64, fbHidden),
				b.weight(2, fbHidden), b.weight(fbHidden), b.weight(fbHidden), mask, pos}, 2)
			b.output(out[0])
		},
		want: map[string]work.Role{"a": work.RoleTokens, "b": work.RoleTokenType, "c": work.RoleMask, "d": work.RolePositions},
	}, {
		// fairseq/BLOOM: positions computed from the mask's CumSum (a mask,
		// not positions, even though a position table is read after it);
		// the token ids compared with the padding id are still token ids.
		name: "mask_whose_cumsum_makes_positions",
		build: func(b *fub) {
			ids, mask := b.ids(), b.intInput("attention_mask", bsDims...)
			cs := b.op("CumSum", []*graph.Value{mask, b.i64s(1)})
			p := b.op("Sub", []*graph.Value{b.op("Mul", []*graph.Value{cs, mask}), b.i64s(1)})
			notPad := b.op("Cast", []*graph.Value{b.op("Not", []*graph.Value{b.op("Equal", []*graph.Value{ids, b.i64s(1)})})}, graph.IntAttr("to", int64(graph.Int64)))
			p = b.op("Mul", []*graph.Value{p, notPad})
			b.output(b.op("Add", []*graph.Value{b.embed(ids), b.gather(64, p)}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "attention_mask": work.RoleMask},
	}, {
		// Phi-3 (ee_phi35_mini_longrope_noweights): positions turned into
		// angles, and their largest + 1 compared with the original length:
		// a comparison after arithmetic is not a mask's use.
		name: "positions_compared_after_an_offset",
		build: func(b *fub) {
			ids, pos := b.ids(), b.posIDs()
			long := b.op("Greater", []*graph.Value{b.op("Add", []*graph.Value{pos, b.i64s(1)}), b.i64s(4096)})
			inv := b.op("Where", []*graph.Value{long, b.scalar(0.5), b.scalar(1)})
			a := b.op("Mul", []*graph.Value{b.op("Cast", []*graph.Value{pos}, graph.IntAttr("to", int64(graph.Float))), inv})
			x := b.embed(ids)
			b.output(b.op("Add", []*graph.Value{x, b.op("ReduceSum", []*graph.Value{b.op("Sin", []*graph.Value{a})})}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "position_ids": work.RolePositions},
	}, {
		// A mask combined with a causal mask, then 1 - m (T5's decoder).
		name: "mask_combined_then_inverted",
		build: func(b *fub) {
			ids, mask := b.ids(), b.intInput("attention_mask", bsDims...)
			causal := b.op("Cast", []*graph.Value{b.op("Less", []*graph.Value{b.i64(0, 1), b.i64(1, 2)})}, graph.IntAttr("to", int64(graph.Int64)))
			m := b.op("Cast", []*graph.Value{b.op("Mul", []*graph.Value{causal, mask})}, graph.IntAttr("to", int64(graph.Float)))
			inv := b.op("Sub", []*graph.Value{b.scalar(1), m})
			x := b.embed(ids)
			b.output(b.op("Add", []*graph.Value{x, b.op("ReduceSum", []*graph.Value{inv})}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "attention_mask": work.RoleMask},
	}, {
		// Inputs nothing reads, or only their shape (genai_lfm2_stub_decoder).
		name: "unused_inputs",
		build: func(b *fub) {
			ids, _, shaped := b.ids(), b.posIDs(), b.intInput("attention_mask", bsDims...)
			r := b.op("Range", []*graph.Value{b.i64s(0), b.seqLen(shaped), b.i64s(1)})
			b.output(b.op("Add", []*graph.Value{b.embed(ids), b.gather(64, r)}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "position_ids": work.RoleUnused, "attention_mask": work.RoleUnused},
	}, {
		// A cos/sin cache with as many rows as the vocabulary, gathered by
		// position_ids given before input_ids: its rows multiply q.
		name: "cos_sin_cache_as_large_as_the_vocabulary",
		build: func(b *fub) {
			pos, ids := b.posIDs(), b.ids()
			x := b.embed(ids)
			cos, sin := b.caches(fbVocab, 2*fbHidden, 10000, one, 1)
			c := b.op("Concat", []*graph.Value{b.op("Gather", []*graph.Value{cos, pos}), b.op("Gather", []*graph.Value{cos, pos})}, graph.IntAttr("axis", -1))
			s := b.op("Concat", []*graph.Value{b.op("Gather", []*graph.Value{sin, pos}), b.op("Gather", []*graph.Value{sin, pos})}, graph.IntAttr("axis", -1))
			q := b.proj(x, fbHidden)
			r := b.op("Add", []*graph.Value{b.op("Mul", []*graph.Value{q, c}), b.op("Mul", []*graph.Value{b.op("Neg", []*graph.Value{q}), s})})
			b.output(b.op("Add", []*graph.Value{x, r}))
		},
		want: map[string]work.Role{"input_ids": work.RoleTokens, "position_ids": work.RolePositions},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newFub(onnx(18), ms())
			c.build(b)
			got := rolesOf(t, b.m)
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
