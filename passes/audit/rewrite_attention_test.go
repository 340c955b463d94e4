package audit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

// attentionWant is what --attention fused does to each RoPE model: the
// GroupQueryAttention nodes it writes, whether they rotate (do_rotary:
// positions the op counts itself) or RotaryEmbedding nodes turn q and k
// before them (position_ids), or the reason every block is left.
var attentionWant = map[string]struct {
	gqa    int
	rotary bool   // do_rotary
	why    string // the reason the blocks are left
}{
	"rope_llama": {gqa: 2}, "rope_llama_opset14": {gqa: 2}, "rope_llama_fp16": {gqa: 2}, "rope_linear": {gqa: 2},
	"rope_llama3": {gqa: 2}, "rope_yarn": {gqa: 2}, "rope_qwen2": {gqa: 2},
	"rope_kvcache":  {gqa: 2, rotary: true},
	"rope_ntk":      {why: "the cos/sin depend on more than the positions"},
	"rope_gptj":     {why: "the scores go through Where"},
	"rope_neox":     {why: "the scores go through Where"},
	"llama4_nope":   {why: "is normalised after the rotation (l2_after_rope)"},
	"llama_opset18": {gqa: 2}, "llama_cache_shared": {gqa: 2}, "llama_local_function": {gqa: 2},
	"llama_kvcache": {gqa: 2}, "llama_no_ids": {gqa: 2, rotary: true},
}

func attentionCorpus(t *testing.T) []corpusModel {
	var out []corpusModel
	for _, cm := range rewriteCorpus(t) {
		if rewriteWant[cm.name] == "rope" {
			out = append(out, cm)
		}
	}
	cfg := testmodels.DefaultLlama
	cfg.KVCache = true
	out = append(out, corpusModel{"llama_kvcache", testmodels.Llama(cfg)})
	cfg.KVCache, cfg.NoPositionIDs = false, true
	out = append(out, corpusModel{"llama_no_ids", testmodels.Llama(cfg)})
	return out
}

// TestRewriteFusesAttention rewrites every RoPE model with --attention
// fused: the blocks the op expresses become GroupQueryAttention nodes
// (the others keep their blocks, their rotations fused, with the reason
// per block), and verify's sweep (padded rows, decode steps and chunks
// after a cache) finds the rewrite equal.
func TestRewriteFusesAttention(t *testing.T) {
	opts := passes.Options{Rewrite: passes.RewriteOptions{Attention: passes.AttentionFused}}
	seen := 0
	for _, cm := range attentionCorpus(t) {
		want, ok := attentionWant[cm.name]
		if !ok {
			t.Errorf("%s: no expectation (add it to attentionWant)", cm.name)
			continue
		}
		seen++
		t.Run(cm.name, func(t *testing.T) {
			rep, actx, err := audit.AuditModel(cm.m, cm.name, opts)
			if err != nil {
				t.Fatal(err)
			}
			r, _, err := audit.RewriteModel(cm.m, opts, schemes.Rewriters()...)
			if err != nil {
				t.Fatal(err)
			}
			var notes string
			for _, ch := range r.Changes {
				notes += strings.Join(ch.Notes, "\n") + "\n"
			}
			gqa, rotary := 0, 0
			r.M.Walk(func(n *graph.Node) {
				if n.OpType == "GroupQueryAttention" {
					gqa++
					if n.AttrInt("do_rotary", 0) == 1 {
						rotary++
					}
				}
			})
			if gqa != want.gqa || (rotary == gqa) != (want.rotary || gqa == 0) {
				t.Fatalf("%d GroupQueryAttention nodes (%d do_rotary), want %d (do_rotary %v); notes:\n%s", gqa, rotary, want.gqa, want.rotary, notes)
			}
			if want.why != "" && !strings.Contains(notes, "attention not fused into GroupQueryAttention: ") || !strings.Contains(notes, want.why) {
				t.Fatalf("notes do not say %q:\n%s", want.why, notes)
			}
			vo := verify.Options{Seed: 1, Hints: verify.HintsFromAudit(rep, actx)}
			vr, err := verify.Compare(context.Background(), cm.m, r.M, vo)
			if err != nil {
				t.Fatal(err)
			}
			if !vr.Equal {
				t.Fatalf("not equal: %s", vr.Summary)
			}
		})
	}
	if seen != len(attentionWant) {
		t.Errorf("%d models rewritten, %d expected", seen, len(attentionWant))
	}
}

// TestRewriteAttentionCheckRefusesOtherGrouping: a Llama whose grouped KV
// heads are repeated by Tile (query head h reads KV head h mod kv_heads)
// reads like GroupQueryAttention's grouping (h / (heads/kv_heads)) in
// structure, layout ops only; the check on numbers tells them apart, and
// the blocks are left with that reason, their rotations fused.
func TestRewriteAttentionCheckRefusesOtherGrouping(t *testing.T) {
	cfg := testmodels.DefaultLlama
	m := testmodels.Llama(cfg)
	group := int64(cfg.Heads / cfg.KVHeads)
	g := m.Graph
	tiled := 0
	for _, n := range g.Nodes() {
		if n.OpType != "Reshape" || n.Input(0).Producer() == nil || n.Input(0).Producer().OpType != "Expand" {
			continue
		}
		x := n.Input(0).Producer().Input(0).Producer().Input(0) // Unsqueeze's input [B, kv, S, hd]
		reps, err := graph.NewTensor(g.Model().NewName("tile_reps"), graph.Int64, []int64{4}, []int64{1, group, 1, 1})
		if err != nil {
			t.Fatal(err)
		}
		y := g.Op("Tile", []*graph.Value{x, g.AddInitializer(reps)}, 1)[0]
		n.Output(0).ReplaceAllUsesWith(y)
		tiled++
	}
	if tiled != 2*cfg.Layers {
		t.Fatalf("%d repeats of KV heads replaced", tiled)
	}
	if err := g.TopoSort(); err != nil {
		t.Fatal(err)
	}
	opts := passes.Options{Rewrite: passes.RewriteOptions{Attention: passes.AttentionFused}}
	r, _, err := audit.RewriteModel(m, opts, schemes.Rewriters()...)
	if err != nil {
		t.Fatal(err)
	}
	var notes string
	for _, ch := range r.Changes {
		notes += strings.Join(ch.Notes, "\n") + "\n"
	}
	r.M.Walk(func(n *graph.Node) {
		if n.OpType == "GroupQueryAttention" {
			t.Fatalf("a block was fused:\n%s", notes)
		}
	})
	if !strings.Contains(notes, "layer 0: attention not fused into GroupQueryAttention: the op does not compute the block") {
		t.Fatalf("notes:\n%s", notes)
	}
}
