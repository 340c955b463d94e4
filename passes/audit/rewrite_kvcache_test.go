package audit_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/verify"
)

// kvCacheWant: the corpus models --add-kv-cache is tried on, and for
// each form ("gqa", "onnx") "" when the cache is added, else what the
// refusal says.
var kvCacheWant = map[string]map[string]string{
	"rope_llama": {"gqa": "", "onnx": ""},
	"rope_qwen2": {"gqa": "", "onnx": ""},
	"rope_gptj":  {"gqa": "", "onnx": ""},
	// NeoX counts its positions in the graph from 0: with a cache they are
	// the cache's length onwards (RotaryEmbedding before the op; do_rotary
	// does not take its caches of 4 columns).
	"rope_neox":    {"gqa": "", "onnx": ""},
	"rope_kvcache": {"gqa": "the model has a KV cache already"},
	// Learned absolute positions, read at 0..S-1 in every call.
	"learned_gpt2": {"gqa": "the model's learned_absolute encoding counts the positions"},
	// ALiBi's bias is computed for the prompt's positions.
	"alibi_mpt": {"onnx": "the model's alibi encoding counts the positions"},
}

// TestRewriteAddsKVCache: rewrite --attention fused --add-kv-cache gives
// the corpus's RoPE decoders without a cache one (past_key_values.L.key/
// value inputs, present.L.key/value outputs, the attention mask over past
// and new tokens), and verify finds the result equal as a prompt then
// decode steps, its caches fed back, against the original on the whole
// prompt (padded rows included); models that cannot decode so are
// refused with the reason.
func TestRewriteAddsKVCache(t *testing.T) {
	for _, cm := range listed(t, rewriteCorpus(t), corpusName, kvCacheWant) {
		for form, why := range kvCacheWant[cm.name] {
			t.Run(cm.name+"/"+form, func(t *testing.T) {
				ro := passes.RewriteOptions{Attention: passes.AttentionFused, AddKVCache: true}
				if form == "onnx" {
					ro.RoPEOp = passes.RoPEOpONNX
				}
				opts := passes.Options{Rewrite: ro}
				rep, actx, r, notes := fusedRewrite(t, cm.m, cm.name, opts)
				got := r.FinishKVCache(len(passes.Result(actx, attn.Blocks)), rep.Findings)
				if why != "" {
					if !strings.Contains(got+"\n"+notes, why) {
						t.Fatalf("want a refusal saying %q; got %q, notes:\n%s", why, got, notes)
					}
					return
				}
				if got != "" {
					t.Fatalf("refused: %s; notes:\n%s", got, notes)
				}
				layers := len(r.KV.Layers)
				for l := range layers {
					for _, kind := range []string{"key", "value"} {
						in, out := r.M.Graph.Lookup(fmt.Sprintf("past_key_values.%d.%s", l, kind)), r.M.Graph.Lookup(fmt.Sprintf("present.%d.%s", l, kind))
						if in == nil || !in.IsGraphInput() || out == nil || !out.IsGraphOutput() {
							t.Fatalf("layer %d: no past/present %s", l, kind)
						}
					}
				}
				vr, err := verify.Compare(context.Background(), cm.m, r.M, verify.Options{Seed: 1, Hints: verify.HintsFromAudit(rep, actx)})
				if err != nil {
					t.Fatal(err)
				}
				if !vr.Equal || vr.PromptThenDecode == "" {
					t.Fatalf("not equal as a prompt then decode (%q): %s", vr.PromptThenDecode, vr.Summary)
				}
				padded := false
				for _, s := range vr.Sets {
					padded = padded || s.Spec != nil && len(s.Spec.Padding) > 0 && s.Spec.Pads > 0
				}
				if !padded {
					t.Errorf("no padded set was compared")
				}
				// Decode steps at the wrong positions (the prompt's own
				// kept): position_ids less the cache's length.
				m := r.M.Clone()
				g := m.Graph
				tampered := false
				for _, n := range g.Nodes() {
					at := map[string]int{"com.microsoft": 1, "": 3}
					i, ok := at[n.Domain]
					if n.OpType != "RotaryEmbedding" || !ok || n.Input(i) == nil || !n.Input(i).IsGraphInput() {
						continue
					}
					shape := g.NewNode("Shape", "", []*graph.Value{g.Lookup("past_key_values.0.key")}, 1)
					two, _ := graph.NewTensor("tamper_two", graph.Int64, nil, []int64{2})
					past := g.NewNode("Gather", "", []*graph.Value{shape.Output(0), g.AddInitializer(two)}, 1)
					sub := g.NewNode("Sub", "", []*graph.Value{n.Input(i), past.Output(0)}, 1)
					for _, x := range []*graph.Node{shape, past, sub} {
						g.Append(x)
					}
					n.SetInput(i, sub.Output(0))
					tampered = true
				}
				if !tampered {
					t.Logf("no RotaryEmbedding at position_ids: the decode steps' positions are the op's own")
					return
				}
				vr, err = verify.Compare(context.Background(), cm.m, m, verify.Options{Seed: 1, Hints: verify.HintsFromAudit(rep, actx)})
				if err != nil {
					t.Fatal(err)
				}
				if vr.Equal {
					t.Errorf("decode steps at positions less the cache's length: verify finds the model equal")
				}
			})
		}
	}
}

// TestAddKVCacheRefusesAnotherPadding: a Llama whose masks read its
// attention_mask reversed along the tokens hides other keys than the
// mask marks 0; with every token valid it reads as any padding mask, so
// only the check on padded rows tells, and the cache is refused.
func TestAddKVCacheRefusesAnotherPadding(t *testing.T) {
	m := corpusClone(t, "rope_llama")
	g := m.Graph
	mask := g.Lookup("attention_mask")
	uses := mask.Uses()
	c := func(name string, v int64) *graph.Value {
		tt, err := graph.NewTensor(name, graph.Int64, []int64{1}, []int64{v})
		if err != nil {
			t.Fatal(err)
		}
		return g.AddInitializer(tt)
	}
	rev := g.NewNode("Slice", "", []*graph.Value{mask, c("rev_start", -1), c("rev_end", math.MinInt64), c("rev_axis", 1), c("rev_step", -1)}, 1)
	g.Append(rev)
	for _, u := range uses {
		u.Node.SetInput(u.Index, rev.Output(0))
	}
	opts := passes.Options{Rewrite: passes.RewriteOptions{Attention: passes.AttentionFused, AddKVCache: true}}
	rep, actx, r, notes := fusedRewrite(t, m, "rope_llama reversed mask", opts)
	got := r.FinishKVCache(len(passes.Result(actx, attn.Blocks)), rep.Findings)
	if got == "" || !strings.Contains(notes, "a KV cache cannot be added: with attention mask row") {
		t.Fatalf("not refused for the mask: %q; notes:\n%s", got, notes)
	}
	// Without the cache the same model is fused (every key valid reads as
	// a padding mask).
	opts.Rewrite.AddKVCache = false
	if _, _, _, notes := fusedRewrite(t, m, "rope_llama reversed mask", opts); !strings.Contains(notes, "attention fused into GroupQueryAttention") {
		t.Fatalf("not fused without --add-kv-cache; notes:\n%s", notes)
	}
}
