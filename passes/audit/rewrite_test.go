package audit_test

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/scheme/floater"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/passes/scheme/sinusoidal"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/testmodels"
)

// rewriteWant is what the default rewrite does to each corpus model: the
// passes that change it ("" for nothing to rewrite).
var rewriteWant = map[string]string{
	"rope_llama": "rope", "rope_llama_opset14": "rope", "rope_llama_fp16": "rope", "rope_linear": "rope", "rope_ntk": "rope",
	"rope_llama3": "rope", "rope_yarn": "rope", "rope_qwen2": "rope", "rope_kvcache": "rope",
	"rope_gptj": "rope", "rope_neox": "rope", "llama4_nope": "rope",
	"sinusoidal_concat": "sinusoidal", "sinusoidal_interleaved_computed": "sinusoidal",
	"sinusoidal_interleaved_scatter": "sinusoidal", "sinusoidal_marian": "sinusoidal",
	"sinusoidal_fairseq": "", "sinusoidal_interleaved": "",
	"learned_gpt2": "learned", "learned_bert": "learned", "learned_vit": "",
	"alibi_bloom": "alibi", "alibi_mpt": "alibi",
	"t5_encoder": "t5", "t5_decoder": "t5",
	"relative_bert_key": "", "relative_shaw": "", "nope_causal": "",
	"relative_transfo_xl": "relative_sinusoidal", "relative_xlnet": "relative_sinusoidal",
	"disentangled_deberta": "disentangled", "rope_mrope": "mrope",
	// Unbucketed relative positions are q - k and a Clip: nothing to
	// store (rewriteSkips holds the reason printed).
	"disentangled_deberta_unshared": "",
	// rope_axial_vit computes its grid's cos/sin from the image's fixed
	// size (Shape, Range, Div, Floor, Einsum, Cos, Sin); complex-order
	// phases depend on the tokens; FLOATER's states on weights only.
	"rope_axial_vit": "axial_rope", "complex_order": "", "floater_unrolled": "floater", "floater_loop": "floater",
	// rope_axial_vit exported with an open image size: its grid's cos/sin
	// are computed per call (rewriteSkips holds the reason printed).
	"rope_axial_vit_open": "",
	// Go-built models.
	"llama_opset18": "rope", "llama_cache_shared": "rope", "llama_local_function": "rope",
	"llama_fused_ms": "", "llama_fused_onnx": "",
	"sinusoidal_if": "sinusoidal", "sinusoidal_loop": "sinusoidal",
	"rope_axial_divmod": "axial_rope", "rope_axial_meshgrid": "axial_rope",
	// Images of open size: the grid's cos/sin are computed per call
	// (rewriteSkips holds the reason printed).
	"rope_axial_divmod_open": "", "rope_axial_meshgrid_open": "",
}

// rewriteSkips are the findings the default rewrite leaves, by model: the
// reason it must print.
var rewriteSkips = map[string]string{
	"disentangled_deberta_unshared": "position_buckets null: the relative positions are q - k clamped",
	"rope_axial_vit_open":           "rope (layers [0 1]): grid null: the patch grid follows the image's size",
	"rope_axial_divmod_open":        "rope (layers [0 1]): grid null: the patch grid follows the image's size",
	"rope_axial_meshgrid_open":      "rope (layers [0 1]): grid null: the patch grid follows the image's size",
}

type corpusModel struct {
	name string
	m    *graph.Model
}

func rewriteCorpus(t *testing.T) []corpusModel {
	t.Helper()
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	var out []corpusModel
	for _, e := range man.Models {
		out = append(out, corpusModel{e.Name, loadCorpus(t, e)})
	}
	for _, s := range append(testmodels.Synthetics(), testmodels.AxialSynthetics()...) {
		out = append(out, corpusModel{s.Name, s.Build()})
	}
	return out
}

// listed are the items want names, in their order (name gives an item's
// name); the test fails for each name of want the items lack.
func listed[T, W any](t *testing.T, items []T, name func(T) string, want map[string]W) []T {
	t.Helper()
	var out []T
	found := map[string]bool{}
	for _, it := range items {
		if _, ok := want[name(it)]; ok {
			out = append(out, it)
			found[name(it)] = true
		}
	}
	for _, n := range slices.Sorted(maps.Keys(want)) {
		if !found[n] {
			t.Errorf("%s is not in the corpus", n)
		}
	}
	return out
}

func corpusName(cm corpusModel) string    { return cm.name }
func entryName(e testmodels.Entry) string { return e.Name }

// corpusClone is a copy of the corpus model name (to change it).
func corpusClone(t *testing.T, name string) *graph.Model {
	t.Helper()
	for _, cm := range rewriteCorpus(t) {
		if cm.name == name {
			return cm.m.Clone()
		}
	}
	t.Fatalf("no %s in the corpus", name)
	return nil
}

// TestRewriteCorpus rewrites every corpus model with the default passes
// and checks what changed: the passes that rewrote it, the forms that are
// gone (the rotate-half chain, Sin/Cos, the bucket logarithm), the fused
// nodes that came, and that every node outside the encodings' subgraphs
// is as it was.
func TestRewriteCorpus(t *testing.T) {
	models := rewriteCorpus(t)
	seen := 0
	for _, cm := range models {
		want, ok := rewriteWant[cm.name]
		if !ok {
			t.Errorf("%s: no expectation (add it to rewriteWant)", cm.name)
			continue
		}
		seen++
		t.Run(cm.name, func(t *testing.T) {
			r, ctx, err := audit.RewriteModel(cm.m, passes.Options{}, schemes.Rewriters()...)
			if err != nil {
				t.Fatal(err)
			}
			var changed []string
			skipped := ""
			for _, ch := range r.Changes {
				if len(ch.Added)+len(ch.Removed) > 0 {
					changed = append(changed, strings.TrimPrefix(ch.Pass, "rewrite_"))
				}
				for _, s := range ch.Skipped {
					t.Logf("skipped: %s", s)
					skipped += s + "\n"
					// Every pass runs: the owner of an M-RoPE or 2-D RoPE
					// finding says what it did, rewrite_rope says nothing.
					if ch.Pass == "rewrite_rope" && (strings.Contains(s, "M-RoPE") || strings.Contains(s, "2-D RoPE")) {
						t.Errorf("rewrite_rope reports a finding another pass of the run owns: %s", s)
					}
				}
			}
			if why, ok := rewriteSkips[cm.name]; ok && !strings.Contains(skipped, why) {
				t.Errorf("skipped %q, want the reason %q", skipped, why)
			}
			if got := strings.Join(changed, ","); got != want {
				t.Fatalf("rewritten by %q, want %q", got, want)
			}
			if r.Changed() != (want != "") {
				t.Errorf("Changed() = %v", r.Changed())
			}
			ops := opCounts(r.M)
			switch want {
			case "rope":
				if ops["com.microsoft.RotaryEmbedding"] == 0 {
					t.Errorf("no RotaryEmbedding: %v", ops)
				}
				if ops["Neg"] > 0 {
					t.Errorf("a rotate-half Neg is left: %v", ops)
				}
				if cm.name != "rope_ntk" && ops["Sin"]+ops["Cos"] > 0 {
					t.Errorf("cos/sin are still computed: %v", ops)
				}
			case "sinusoidal":
				if ops["Sin"]+ops["Cos"]+ops["ScatterND"]+ops["Loop"]+ops["If"] > 0 {
					t.Errorf("the encoding is still computed: %v", ops)
				}
			case "t5":
				if ops["Log"] > 0 {
					t.Errorf("the bucket logarithm is still computed: %v", ops)
				}
			case "relative_sinusoidal", "mrope":
				if ops["Sin"]+ops["Cos"] > 0 {
					t.Errorf("the sinusoid is still computed: %v", ops)
				}
			case "disentangled":
				if ops["Log"]+ops["Ceil"]+ops["Sign"] > 0 {
					t.Errorf("the bucket function is still computed: %v", ops)
				}
			case "axial_rope":
				if ops["Sin"]+ops["Cos"] > 0 {
					t.Errorf("the grid's cos/sin are still computed: %v", ops)
				}
			case "floater":
				if ops["Loop"] > 0 {
					t.Errorf("the integration's Loop is left: %v", ops)
				}
				// The states are read from a stored table: no solver step is
				// left for the audit to read.
				rep, _, err := audit.AuditModel(r.M, cm.name, passes.Options{})
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range rep.Findings {
					if p := f.Params.Map(); f.Scheme == floater.Name && (p["form"] != "table" || p["solver"] != nil) {
						t.Errorf("the rewritten model's states are %v (solver %v), want a stored table", p["form"], p["solver"])
					}
				}
			}
			if err := graphDiff(cm.m, r.M, ctx); err != nil {
				t.Error(err)
			}
			if _, err := r.M.Marshal(); err != nil {
				t.Errorf("the rewritten model does not encode: %v", err)
			}
		})
	}
	if seen != len(rewriteWant) {
		t.Errorf("%d of %d expected models found", seen, len(rewriteWant))
	}
}

func opCounts(m *graph.Model) map[string]int {
	ops := map[string]int{}
	m.Walk(func(n *graph.Node) {
		k := n.OpType
		if n.Domain != "" && n.Domain != "ai.onnx" {
			k = n.Domain + "." + k
		}
		ops[k]++
	})
	return ops
}

// nodeSig prints a node as the file holds it: op, inputs, outputs and
// attributes by name.
func nodeSig(n *graph.Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s|%s.%s|", n.Name, n.Domain, n.OpType)
	for _, v := range n.Inputs() {
		if v == nil {
			b.WriteString("_,")
		} else {
			b.WriteString(v.Name + ",")
		}
	}
	b.WriteString("|")
	for _, v := range n.Outputs() {
		b.WriteString(v.Name + ",")
	}
	for _, a := range n.Attrs {
		switch a.Type() {
		case graph.AttrTensor:
			raw, err := graph.EncodeTensor(a.Tensor)
			fmt.Fprintf(&b, "|%s=%x%v", a.Name(), sha256.Sum256(raw), err)
		case graph.AttrGraph:
			fmt.Fprintf(&b, "|%s=graph(%d nodes)", a.Name(), a.Graph.Len())
		default:
			fmt.Fprintf(&b, "|%s=%v", a.Name(), a.Value())
		}
	}
	return b.String()
}

// graphDiff checks that every node of the original main graph is in the
// rewritten one exactly as it was, unless a finding of a scheme that was
// rewritten names it, it is a Constant, or every node reading it was
// removed (it only fed the encoding).
func graphDiff(orig, rw *graph.Model, ctx *passes.Context) error {
	own := map[string]bool{}
	for _, d := range schemes.Detectors() {
		fs, _ := passes.Ran(ctx, d)
		for _, f := range fs {
			for _, n := range f.Nodes {
				own[n] = true
			}
		}
	}
	after := map[string]string{}
	for _, n := range rw.Graph.Nodes() {
		after[name(n)] = nodeSig(n)
	}
	removed := map[*graph.Node]bool{}
	for _, n := range orig.Graph.Nodes() {
		if _, ok := after[name(n)]; !ok {
			removed[n] = true
		}
	}
	var bad []string
	for _, n := range orig.Graph.Nodes() {
		sig, kept := after[name(n)]
		switch {
		case kept && sig == nodeSig(n):
		case own[name(n)]:
		case !kept && n.OpType == "Constant":
		case !kept && onlyFeedsRemoved(n, removed):
		case kept:
			bad = append(bad, fmt.Sprintf("%s changed:\n  %s\n  %s", name(n), nodeSig(n), sig))
		default:
			bad = append(bad, name(n)+" was removed but is not part of an encoding")
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return fmt.Errorf("nodes outside the encodings changed:\n%s", strings.Join(bad[:min(len(bad), 10)], "\n"))
	}
	// New nodes only: every node of the rewritten model is an original or
	// one the rewrite added under its own name.
	before := map[string]bool{}
	for _, n := range orig.Graph.Nodes() {
		before[name(n)] = true
	}
	for _, n := range rw.Graph.Nodes() {
		if !before[name(n)] && !strings.HasPrefix(n.Name, "onnxpe/") {
			return fmt.Errorf("node %s is neither original nor named by the rewrite", name(n))
		}
	}
	return nil
}

func name(n *graph.Node) string {
	if n.Name != "" {
		return n.Name
	}
	return n.Output(0).Name
}

// onlyFeedsRemoved reports whether every reader of n's outputs was
// removed, recursively (n only computed something for the encoding).
func onlyFeedsRemoved(n *graph.Node, removed map[*graph.Node]bool) bool {
	for _, o := range n.Outputs() {
		if o.IsGraphOutput() {
			return false
		}
		for _, c := range o.Consumers() {
			// A node of a subgraph (a Loop's body reading an outer value)
			// goes with the node holding that subgraph.
			for c.Graph() != nil && c.Graph().Owner() != nil {
				c = c.Graph().Owner()
			}
			if !removed[c] {
				return false
			}
		}
	}
	return true
}

// TestRewriteLeavesTheModelAlone checks that rewriting does not change
// the caller's model.
func TestRewriteLeavesTheModelAlone(t *testing.T) {
	for _, cm := range rewriteCorpus(t)[:6] {
		before, _ := cm.m.Marshal()
		if _, _, err := audit.RewriteModel(cm.m, passes.Options{}, schemes.Rewriters()...); err != nil {
			t.Fatal(err)
		}
		after, _ := cm.m.Marshal()
		if !slices.Equal(before, after) {
			t.Errorf("%s: the rewrite changed the caller's model", cm.name)
		}
	}
}

// realRewrites is what the default rewrite does to each vendored real
// model (testdata/realmodels): the passes that change it, "" for nothing
// to rewrite, or "skip: <reason>" for an encoding refused with a reason.
var realRewrites = map[string]string{
	"ee_llama_dort_invfreq_input":        "rope", // inv_freq is an input: the rotation fused, cos/sin computed
	"ee_llama_dynamo_torchlib_functions": "rope", // every op a torch_lib function
	"ee_phi_partial_rotary":              "skip: the two dimensions of pair 0 are turned by different cos/sin",
	"ort_bert_toy_pytorch":               "learned",
	"ort_bloom_alibi_training":           "alibi",
	"ee_llama_dort_rotary_customop":      "", "genai_lfm2_stub_decoder": "", "genai_tiny_gqa_no_rotary": "",
	"onnx_flexattention_relative_positional": "", "onnx_flexattention_relative_positional_expanded": "",
	"onnx_rotary_embedding_3d_input": "", "ort_dmmha_self_attn": "", "ort_dummy_t5_beamsearch": "",
	"ort_gemma3_vision_attention_fragment": "",
	// Its sequence length is fixed (3) and its 4-row table's rows are
	// equal: positions read by probing at that length, confirmed by the
	// Gather that reads the table at them.
	"ort_embed_layer_norm_fragment":    "learned",
	"ort_gpt2_megatron_embedlayernorm": "", "ort_gpt2_megatron_unfused": "", "ort_phi35v_vision_attention_fragment": "",
	"ort_whisper_decoder_layer_fragment": "",
}

// TestRewriteRealModels rewrites the real models other tools made: those
// with an unfused encoding are rewritten (or refused with the reason),
// the others have nothing to rewrite.
func TestRewriteRealModels(t *testing.T) {
	dirs, err := testmodels.RealModelFiles()
	if err != nil {
		t.Fatal(err)
	}
	unloadable := 0
	for _, p := range dirs {
		name := filepath.Base(filepath.Dir(p))
		t.Run(name, func(t *testing.T) {
			m, err := graph.Load(p)
			if err != nil {
				// ee_phi35_mini_longrope_noweights: its external data file
				// is not in its source repository.
				unloadable++
				t.Logf("not loadable (counted): %v", err)
				return
			}
			want, ok := realRewrites[name]
			if !ok {
				t.Fatalf("no expectation for %s", name)
			}
			r, ctx, err := audit.RewriteModel(m, passes.Options{}, schemes.Rewriters()...)
			if err != nil {
				t.Fatal(err)
			}
			var changed, skipped []string
			for _, ch := range r.Changes {
				if len(ch.Added)+len(ch.Removed) > 0 {
					changed = append(changed, strings.TrimPrefix(ch.Pass, "rewrite_"))
				}
				skipped = append(skipped, ch.Skipped...)
			}
			if reason, ok := strings.CutPrefix(want, "skip: "); ok {
				if len(changed) != 0 || len(skipped) != 1 || !strings.Contains(skipped[0], reason) {
					t.Fatalf("changed %v, skipped %q; want %q refused", changed, skipped, reason)
				}
				return
			}
			if got := strings.Join(changed, ","); got != want {
				t.Fatalf("rewritten by %q (skipped %q), want %q", got, skipped, want)
			}
			if err := graphDiff(m, r.M, ctx); err != nil {
				t.Error(err)
			}
		})
	}
	if unloadable != 1 {
		t.Errorf("%d real models did not load, want 1 (the one whose weights are absent)", unloadable)
	}
}

// formParams are params that say how an encoding is stored, which the
// rewrite changes on purpose: a RoPE cache or a sinusoidal table
// precomputed for max_positions positions.
var formParams = map[string][]string{
	rope.Name:       {"max_positions"},
	sinusoidal.Name: {"computed", "max_positions"},
	// FLOATER's states stored: no solver is left to read (form table).
	floater.Name: {"form", "solver", "step"},
}

// TestRewriteAuditsTheSame audits every rewritten corpus model: the same
// schemes in the same layers, the same params (but those saying how the
// encoding is stored), and fused where the rewrite fused it; the RoPE
// models also rewritten with --attention fused (GroupQueryAttention's
// do_rotary, or RotaryEmbedding before it).
func TestRewriteAuditsTheSame(t *testing.T) {
	// rope_ntk's cos/sin stay computed beside the fused rotation: the
	// fused detector measures them at several lengths (dynamic: true).
	ntk := false
	type run struct {
		cm        corpusModel
		attention string
	}
	var runs []run
	for _, cm := range rewriteCorpus(t) {
		if rewriteWant[cm.name] != "" {
			runs = append(runs, run{cm, passes.AttentionKeep})
		}
	}
	for _, cm := range attentionCorpus(t) {
		runs = append(runs, run{cm, passes.AttentionFused})
	}
	fusedAttention := 0
	for _, rn := range runs {
		cm, attention := rn.cm, rn.attention
		name := cm.name
		if attention == passes.AttentionFused {
			name += "/attention_fused"
		}
		t.Run(name, func(t *testing.T) {
			opts := passes.Options{Rewrite: passes.RewriteOptions{Attention: attention}}
			r, _, err := audit.RewriteModel(cm.m, opts, schemes.Rewriters()...)
			if err != nil {
				t.Fatal(err)
			}
			before, _, err := audit.AuditModel(cm.m, cm.name, passes.Options{})
			if err != nil {
				t.Fatal(err)
			}
			after, _, err := audit.AuditModel(r.M, cm.name, passes.Options{})
			if err != nil {
				t.Fatal(err)
			}
			ntk = ntk || cm.name == "rope_ntk"
			r.M.Walk(func(n *graph.Node) {
				if n.OpType == "GroupQueryAttention" {
					fusedAttention++
				}
			})
			if fmt.Sprint(before.Schemes, before.Layers) != fmt.Sprint(after.Schemes, after.Layers) {
				t.Fatalf("schemes %v %v, rewritten %v %v", before.Schemes, before.Layers, after.Schemes, after.Layers)
			}
			for _, fb := range before.Findings {
				var fa *passes.Finding
				for _, f := range after.Findings {
					if f.Scheme == fb.Scheme && slices.Equal(f.Layers, fb.Layers) {
						fa = f
					}
				}
				if fa == nil {
					t.Errorf("%s %v: no finding in the rewritten model", fb.Scheme, fb.Layers)
					continue
				}
				// RoPE is fused, but multimodal and 2-D RoPE (their caches
				// stored).
				pm := fb.Params.Map()
				if want := fb.Scheme == rope.Name && pm["multimodal_sections"] == nil && pm["axes"] == nil; fa.Fused != want {
					t.Errorf("%s: fused %v, want %v", fb.Scheme, fa.Fused, want)
				}
				pb, pa := fb.Params.Map(), fa.Params.Map()
				for _, k := range formParams[fb.Scheme] {
					delete(pb, k)
					delete(pa, k)
				}
				if b, a := fmt.Sprint(pb), fmt.Sprint(pa); b != a {
					t.Errorf("%s params:\n  original  %s\n  rewritten %s", fb.Scheme, b, a)
				}
			}
		})
	}
	if !ntk {
		t.Error("rope_ntk was not rewritten: its dynamic NTK, kept computed beside a fused rotation, is not checked")
	}
	if fusedAttention == 0 {
		t.Error("no rewrite fused attention into GroupQueryAttention: the audit of those is not checked")
	}
}

// TestRewriteNamesTheOwnerLeftOut runs rewrite_rope alone on M-RoPE and
// 2-D RoPE models: the finding is not rewritten, and the line says whose
// it is (rewrite_mrope, rewrite_axial_rope) and that the run leaves that
// pass out.
func TestRewriteNamesTheOwnerLeftOut(t *testing.T) {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]*graph.Model{}
	for _, e := range man.Models {
		if e.Name == "rope_mrope" || e.Name == "rope_axial_vit" {
			models[e.Name] = loadCorpus(t, e)
		}
	}
	for _, s := range testmodels.AxialSynthetics() {
		if s.Name == "rope_axial_meshgrid_open" {
			models[s.Name] = s.Build()
		}
	}
	owner := map[string]string{"rope_mrope": "rewrite_mrope's, which this run leaves out (--passes mrope)",
		"rope_axial_vit":           "rewrite_axial_rope's, which this run leaves out (--passes axial)",
		"rope_axial_meshgrid_open": "rewrite_axial_rope's, which this run leaves out (--passes axial)"}
	if len(models) != len(owner) {
		t.Fatalf("found %d of the %d models", len(models), len(owner))
	}
	for name, m := range models {
		r, _, err := audit.RewriteModel(m, passes.Options{}, rope.Rewrite)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		for _, ch := range r.Changes {
			if ch.Pass == "rewrite_rope" {
				lines = append(lines, ch.Skipped...)
			}
		}
		if r.Changed() || len(lines) != 1 || !strings.Contains(lines[0], owner[name]) {
			t.Errorf("%s: changed %v, rewrite_rope's lines %q, want one naming %q", name, r.Changed(), lines, owner[name])
		}
	}
}
