package audit_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
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
	"rope_gptj":     {gqa: 2}, // a Where mask; rotary_dim 8 of 16: RotaryEmbedding before the op
	"rope_neox":     {gqa: 2}, // a Where mask after reshaped scores; as GPT-J
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

// fusedRewrite audits and rewrites m with opts: the audit (and its
// context, for verify's hints), the rewrite and its changes' notes.
func fusedRewrite(t *testing.T, m *graph.Model, name string, opts passes.Options) (*passes.Report, *passes.Context, *rewrite.Rewrite, string) {
	t.Helper()
	rep, actx, err := audit.AuditModel(m, name, opts)
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := audit.RewriteModel(m, opts, schemes.Rewriters()...)
	if err != nil {
		t.Fatal(err)
	}
	var notes string
	for _, ch := range r.Changes {
		notes += strings.Join(ch.Notes, "\n") + "\n"
	}
	return rep, actx, r, notes
}

// mustEqual fails unless verify's sweep finds b equal to a.
func mustEqual(t *testing.T, a, b *graph.Model, rep *passes.Report, actx *passes.Context) {
	t.Helper()
	vr, err := verify.Compare(context.Background(), a, b, verify.Options{Seed: 1, Hints: verify.HintsFromAudit(rep, actx)})
	if err != nil {
		t.Fatal(err)
	}
	if !vr.Equal {
		t.Fatalf("not equal: %s", vr.Summary)
	}
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
			rep, actx, r, notes := fusedRewrite(t, cm.m, cm.name, opts)
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
			mustEqual(t, cm.m, r.M, rep, actx)
		})
	}
	if seen != len(attentionWant) {
		t.Errorf("%d models rewritten, %d expected", seen, len(attentionWant))
	}
}

// TestRewriteFusesAttentionONNX: with --rope-op onnx the blocks
// GroupQueryAttention expresses become the standard ops of opset 23
// instead (RotaryEmbedding on q and k, then Attention with is_causal),
// the same blocks; the rewrite is equal, and its audit reads the same
// RoPE, fused, with the same parameters.
func TestRewriteFusesAttentionONNX(t *testing.T) {
	opts := passes.Options{Rewrite: passes.RewriteOptions{Attention: passes.AttentionFused, RoPEOp: passes.RoPEOpONNX}}
	for _, cm := range attentionCorpus(t) {
		want, ok := attentionWant[cm.name]
		if !ok {
			continue // TestRewriteFusesAttention says so
		}
		t.Run(cm.name, func(t *testing.T) {
			rep, actx, r, notes := fusedRewrite(t, cm.m, cm.name, opts)
			att, gqa := 0, 0
			r.M.Walk(func(n *graph.Node) {
				switch {
				case n.OpType == "Attention" && (n.Domain == "" || n.Domain == "ai.onnx"):
					att++
				case n.OpType == "GroupQueryAttention":
					gqa++
				}
			})
			if att != want.gqa || gqa != 0 {
				t.Fatalf("%d Attention and %d GroupQueryAttention nodes, want %d and 0; notes:\n%s", att, gqa, want.gqa, notes)
			}
			if att > 0 && (r.M.OpsetVersion("") < 23 || !strings.Contains(notes, "attention fused into Attention (opset 23) (q and k rows turned before it by RotaryEmbedding")) {
				t.Fatalf("opset %d; notes:\n%s", r.M.OpsetVersion(""), notes)
			}
			if want.why != "" && (!strings.Contains(notes, "attention not fused into Attention (opset 23): ") || !strings.Contains(notes, want.why)) {
				t.Fatalf("notes do not give the reason %q:\n%s", want.why, notes)
			}
			mustEqual(t, cm.m, r.M, rep, actx)
			if att == 0 {
				return
			}
			after, _, err := audit.AuditModel(r.M, cm.name, passes.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ropes := func(rep *passes.Report) (out []*passes.Finding) {
				for _, f := range rep.Findings {
					if f.Scheme == "rope" {
						out = append(out, f)
					}
				}
				return out
			}
			before, now := ropes(rep), ropes(after)
			if len(before) != 1 || len(now) != 1 {
				t.Fatalf("%d RoPE findings before, %d after", len(before), len(now))
			}
			b, a := before[0], now[0]
			bp, ap := b.Params.(*rope.Params), a.Params.(*rope.Params)
			if !a.Fused || fmt.Sprint(a.Layers) != fmt.Sprint(b.Layers) || ap.Layout != bp.Layout || ap.RotaryDim != bp.RotaryDim ||
				ap.HeadDim != bp.HeadDim || fmt.Sprint(deref(ap.Base)) != fmt.Sprint(deref(bp.Base)) || fmt.Sprint(deref(ap.Scaling)) != fmt.Sprint(deref(bp.Scaling)) {
				t.Errorf("the rewrite's audit: fused %v layers %v %+v; the original's: layers %v %+v", a.Fused, a.Layers, *ap, b.Layers, *bp)
			}
		})
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
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
	_, _, r, notes := fusedRewrite(t, m, "llama_tiled_kv", opts)
	r.M.Walk(func(n *graph.Node) {
		if n.OpType == "GroupQueryAttention" {
			t.Fatalf("a block was fused:\n%s", notes)
		}
	})
	if !strings.Contains(notes, "layer 0: attention not fused into GroupQueryAttention: the op does not compute the block") {
		t.Fatalf("notes:\n%s", notes)
	}
}

// paddedKVCacheLlama is the Llama with a KV cache given an attention_mask
// input [batch, past + seq] as Hugging Face's exports have it: (1 - mask)
// · -1e9 as [batch, 1, 1, keys] (one row for every query), added to the
// scores after the causal mask, and expanded to the keys' count read from
// the first layer's present key (Shape of the concatenation the op's
// present replaces).
func paddedKVCacheLlama(t *testing.T) *graph.Model {
	t.Helper()
	cfg := testmodels.DefaultLlama
	cfg.KVCache = true
	m := testmodels.Llama(cfg)
	g := m.Graph
	init := func(name string, dt graph.DataType, dims []int64, data any) *graph.Value {
		x, err := graph.NewTensor(g.Model().NewName(name), dt, dims, data)
		if err != nil {
			t.Fatal(err)
		}
		return g.AddInitializer(x)
	}
	var present *graph.Value
	for _, o := range g.Outputs {
		if o.Name == "present.0.key" {
			present = o
		}
	}
	if present == nil {
		t.Fatal("no present.0.key")
	}
	mask := g.AddInput("attention_mask", graph.TensorType(graph.Int64, []graph.Dim{{Param: "batch"}, {Param: "total"}}))
	one := func(v *graph.Value) *graph.Value {
		return g.Op("Cast", []*graph.Value{v}, 1, graph.IntAttr("to", int64(graph.Float)))[0]
	}
	pad := g.Op("Sub", []*graph.Value{init("one", graph.Float, nil, []float32{1}), one(mask)}, 1)[0]
	pad = g.Op("Mul", []*graph.Value{pad, init("neg_big", graph.Float, nil, []float32{-1e9})}, 1)[0]
	pad = g.Op("Unsqueeze", []*graph.Value{pad, init("axes", graph.Int64, []int64{2}, []int64{1, 2})}, 1)[0]
	keys := g.Op("Shape", []*graph.Value{present}, 1, graph.IntAttr("start", 2), graph.IntAttr("end", 3))[0]
	sizes := g.Op("Concat", []*graph.Value{init("ones", graph.Int64, []int64{3}, []int64{1, 1, 1}), keys}, 1, graph.IntAttr("axis", 0))[0]
	pad = g.Op("Expand", []*graph.Value{pad, sizes}, 1)[0]
	added := 0
	for _, n := range g.Nodes() {
		if n.OpType == "Softmax" {
			n.SetInput(0, g.Op("Add", []*graph.Value{n.Input(0), pad}, 1)[0])
			added++
		}
	}
	if added != cfg.Layers {
		t.Fatalf("%d softmaxes", added)
	}
	if err := g.TopoSort(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRewriteAttentionPaddingMask: a padding mask from an input becomes
// GroupQueryAttention's attention_bias, expanded to [.., queries, keys]
// as the op takes it (ONNX Runtime does not broadcast a single query's
// row); the concatenation the mask reads its size from stays for it (the
// op's present comes after the mask: reading that would be a cycle); a
// block with padding masks but no causal one is left, its reason that the
// op is causal (before the one attention_bias it takes). verify's sweep (padded rows, decode after a cache)
// finds the fused rewrite equal.
func TestRewriteAttentionPaddingMask(t *testing.T) {
	opts := passes.Options{Rewrite: passes.RewriteOptions{Attention: passes.AttentionFused}}
	m := paddedKVCacheLlama(t)
	rep, actx, r, notes := fusedRewrite(t, m, "llama_kvcache_padded", opts)
	gqa := 0
	r.M.Walk(func(n *graph.Node) {
		if n.OpType != "GroupQueryAttention" {
			return
		}
		gqa++
		if len(n.Inputs()) < 11 || n.Input(10) == nil || n.Input(10).Producer() == nil || n.Input(10).Producer().OpType != "Expand" {
			t.Errorf("%s: attention_bias not expanded to the queries", n.Name)
		}
	})
	if gqa != 2 {
		t.Fatalf("%d GroupQueryAttention nodes; notes:\n%s", gqa, notes)
	}
	if err := r.M.Graph.TopoSort(); err != nil {
		t.Fatalf("the rewrite has a cycle: %v", err)
	}
	vr, err := verify.Compare(context.Background(), m, r.M, verify.Options{Seed: 1, Hints: verify.HintsFromAudit(rep, actx)})
	if err != nil {
		t.Fatal(err)
	}
	if !vr.Equal || len(vr.Sets) < 3 {
		t.Fatalf("not equal (%d sets): %s", len(vr.Sets), vr.Summary)
	}

	// The padding mask in place of the causal one: two masks from inputs,
	// neither causal; the reason is the first the op has.
	m = paddedKVCacheLlama(t)
	for _, n := range m.Graph.Nodes() {
		if n.OpType == "Softmax" {
			add := n.Input(0).Producer()     // + padding
			inner := add.Input(0).Producer() // scores + causal
			inner.SetInput(1, add.Input(1))
		}
	}
	r, _, err = audit.RewriteModel(m, opts, schemes.Rewriters()...)
	if err != nil {
		t.Fatal(err)
	}
	notes = ""
	for _, ch := range r.Changes {
		notes += strings.Join(ch.Notes, "\n") + "\n"
	}
	if !strings.Contains(notes, "layer 0: attention not fused into GroupQueryAttention: no causal mask") {
		t.Fatalf("notes:\n%s", notes)
	}
}

// TestRewriteFusesInterleavedAttention: Cohere's rotation of pairs (2i,
// 2i+1), written with repeat_interleave (a generality form), becomes the
// op's do_rotary with rotary_interleaved, its padding mask the op's
// attention_bias; verify's sweep finds the rewrite equal.
func TestRewriteFusesInterleavedAttention(t *testing.T) {
	opts := passes.Options{Rewrite: passes.RewriteOptions{Attention: passes.AttentionFused}}
	for _, f := range testmodels.GeneralityForms() {
		if f.Name != "rope_cohere_repeat_interleave" {
			continue
		}
		m, err := f.Build(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		rep, actx, err := audit.AuditModel(m, f.Name, opts)
		if err != nil {
			t.Fatal(err)
		}
		r, _, err := audit.RewriteModel(m, opts, schemes.Rewriters()...)
		if err != nil {
			t.Fatal(err)
		}
		interleaved := 0
		r.M.Walk(func(n *graph.Node) {
			if n.OpType == "GroupQueryAttention" && n.AttrInt("do_rotary", 0) == 1 && n.AttrInt("rotary_interleaved", 0) == 1 &&
				len(n.Inputs()) > 10 && n.Input(10) != nil {
				interleaved++
			}
		})
		if interleaved != 2 {
			var notes string
			for _, ch := range r.Changes {
				notes += strings.Join(ch.Notes, "\n") + "\n"
			}
			t.Fatalf("%d interleaved GroupQueryAttention nodes with attention_bias, want 2; notes:\n%s", interleaved, notes)
		}
		vr, err := verify.Compare(context.Background(), m, r.M, verify.Options{Seed: 1, Hints: verify.HintsFromAudit(rep, actx)})
		if err != nil {
			t.Fatal(err)
		}
		if !vr.Equal {
			t.Fatalf("not equal: %s", vr.Summary)
		}
		return
	}
	t.Fatal("no generality form rope_cohere_repeat_interleave")
}

// TestRewriteFusesBiasedAttention: with --attention fused --rope-op onnx
// the blocks whose scores an ALiBi or T5 bias reaches become Attention of
// opset 23 whose attn_mask is that bias with the model's masks (MPT's
// padding Where, T5's decoder causal mask inside its bias; T5's encoder
// not causal; BLOOM's scores and weights of [batch·heads, queries, keys],
// its bias added before they are viewed as 4-D); the rewrite is equal and
// audits as the same scheme, fused; without --rope-op onnx none is fused,
// and the note says why.
func TestRewriteFusesBiasedAttention(t *testing.T) {
	want := map[string]struct {
		scheme string
		att    int
		why    string
	}{
		"alibi_mpt":   {scheme: "alibi", att: 2},
		"t5_encoder":  {scheme: "t5_relative_bias", att: 2},
		"t5_decoder":  {scheme: "t5_relative_bias", att: 2},
		"alibi_bloom": {scheme: "alibi", att: 2},
	}
	for _, cm := range listed(t, rewriteCorpus(t), corpusName, want) {
		w := want[cm.name]
		t.Run(cm.name, func(t *testing.T) {
			gqa := passes.Options{Rewrite: passes.RewriteOptions{Attention: passes.AttentionFused}}
			if _, _, _, n := fusedRewrite(t, cm.m, cm.name, gqa); !strings.Contains(n, "is fused with --rope-op onnx only, into Attention of opset 23") {
				t.Errorf("GroupQueryAttention form: notes do not say why nothing is fused:\n%s", n)
			}
			opts := passes.Options{Rewrite: passes.RewriteOptions{Attention: passes.AttentionFused, RoPEOp: passes.RoPEOpONNX}}
			rep, actx, r, notes := fusedRewrite(t, cm.m, cm.name, opts)
			att := 0
			r.M.Walk(func(n *graph.Node) {
				if n.OpType == "Attention" && n.Domain == "" {
					att++
				}
			})
			if att != w.att || w.why != "" && !strings.Contains(notes, w.why) {
				t.Fatalf("%d Attention nodes, want %d; notes:\n%s", att, w.att, notes)
			}
			mustEqual(t, cm.m, r.M, rep, actx)
			after, _, err := audit.AuditModel(r.M, cm.name, passes.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(after.Schemes) != fmt.Sprint(rep.Schemes) || !slices.Contains(after.Schemes, w.scheme) {
				t.Errorf("the rewrite audits as %v, the original as %v", after.Schemes, rep.Schemes)
			}
			// Fused blocks: the same scheme, layers and parameters, now
			// fused (the bias is the op's attn_mask).
			var before, now []*passes.Finding
			for _, f := range rep.Findings {
				if f.Scheme == w.scheme {
					before = append(before, f)
				}
			}
			for _, f := range after.Findings {
				if f.Scheme == w.scheme {
					now = append(now, f)
				}
			}
			if len(before) != 1 || len(now) != 1 {
				t.Fatalf("%d findings of %s in the original, %d in the rewrite", len(before), w.scheme, len(now))
			}
			b, a := before[0], now[0]
			if a.Fused != (w.att > 0) || b.Fused || fmt.Sprint(a.Layers) != fmt.Sprint(b.Layers) || !passes.SameParams(a.Params, b.Params) {
				t.Errorf("the rewrite's audit: fused %v layers %v %+v; the original's: fused %v layers %v %+v", a.Fused, a.Layers, a.Params, b.Fused, b.Layers, b.Params)
			}
		})
	}
}

// TestRewriteRefusesASmallFillByInputs: MPT's Where that masks by the
// attention_mask fills with float32's lowest, which swamps any score when
// added; with a fill of -1e4 an addition would leave the scores in (a row
// whose keys are all hidden would not stay uniform), and the block is left.
func TestRewriteRefusesASmallFillByInputs(t *testing.T) {
	m := corpusClone(t, "alibi_mpt")
	small, err := graph.NewTensor("small_fill", graph.Float, nil, []float32{-1e4})
	if err != nil {
		t.Fatal(err)
	}
	fill := m.Graph.AddInitializer(small)
	changed := 0
	for _, n := range m.Graph.Nodes() {
		if n.OpType != "Where" {
			continue
		}
		// masked_fill(mask, lowest): Where(mask, Constant, scores).
		if p := n.Input(1).Producer(); p != nil && p.OpType == "Constant" {
			n.SetInput(1, fill)
			changed++
		}
	}
	if changed == 0 {
		t.Fatal("no Where fills with a Constant")
	}
	opts := passes.Options{Rewrite: passes.RewriteOptions{Attention: passes.AttentionFused, RoPEOp: passes.RoPEOpONNX}}
	_, _, r, notes := fusedRewrite(t, m, "alibi_mpt_small_fill", opts)
	r.M.Walk(func(n *graph.Node) {
		if n.OpType == "Attention" && n.Domain == "" {
			t.Fatalf("a block was fused:\n%s", notes)
		}
	})
	if !strings.Contains(notes, "with a fill of -10000: as an addition it would leave the scores in") {
		t.Fatalf("notes:\n%s", notes)
	}
}
