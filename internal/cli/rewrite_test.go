package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/testmodels"
)

// rewritten are the corpus models the default rewrite changes; the others
// have nothing to rewrite.
var rewritten = map[string]bool{
	"rope_llama": true, "rope_llama_opset14": true, "rope_llama_fp16": true, "rope_linear": true, "rope_ntk": true, "rope_llama3": true,
	"rope_yarn": true, "rope_qwen2": true, "rope_kvcache": true, "rope_gptj": true, "rope_neox": true,
	"llama4_nope": true, "sinusoidal_concat": true, "sinusoidal_interleaved_computed": true,
	"sinusoidal_interleaved_scatter": true, "sinusoidal_marian": true, "learned_gpt2": true, "learned_bert": true,
	"alibi_bloom": true, "alibi_mpt": true, "t5_encoder": true, "t5_decoder": true,
	"relative_transfo_xl": true, "relative_xlnet": true, "disentangled_deberta": true, "rope_mrope": true,
	"rope_axial_vit": true, "floater_unrolled": true, "floater_loop": true,
}

// TestRewriteCorpusIsProvenEqual rewrites every corpus model with the
// command: the models with an encoding to rewrite are written and proven
// equal by verify's sweep (single token, padded batch, longest sequence,
// far positions, KV-cache steps); the others are written unchanged.
func TestRewriteCorpusIsProvenEqual(t *testing.T) {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, e := range man.Models {
		t.Run(e.Name, func(t *testing.T) {
			out := filepath.Join(dir, e.Name+".onnx")
			code, stdout, stderr := runCLI(t, "rewrite", e.ModelPath(), "-o", out, "--json")
			if code != 0 {
				t.Fatalf("exit %d: %s%s", code, stdout, stderr)
			}
			var rep rewriteReport
			if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
				t.Fatalf("invalid JSON: %v\n%s", err, stdout)
			}
			if !rep.Written {
				t.Fatalf("not written: %s", rep.Summary)
			}
			if rep.Changed != rewritten[e.Name] {
				t.Fatalf("changed %v, want %v: %s", rep.Changed, rewritten[e.Name], rep.Summary)
			}
			if !rep.Changed {
				a, _ := os.ReadFile(e.ModelPath())
				b, _ := os.ReadFile(out)
				// Findings a pass refused are counted, not "nothing to
				// rewrite".
				left := 0
				for _, ch := range rep.Changes {
					left += len(ch.Skipped)
				}
				want := "nothing to rewrite"
				if left > 0 {
					want = fmt.Sprintf("nothing rewritten (%d finding(s) left", left)
				}
				if !bytes.Equal(a, b) || !strings.HasPrefix(rep.Summary, want) {
					t.Fatalf("nothing rewritten, but the output differs from the input or the summary does not begin %q (%s)", want, rep.Summary)
				}
				return
			}
			// A model of fixed-size images has no sequence to vary: its
			// sets are batches of 1 and 3.
			images := batchOnly(t, e.ModelPath())
			if rep.Verify == nil || !rep.Verify.Equal || len(rep.Verify.Sets) < 3 && !(images && len(rep.Verify.Sets) == 2) {
				t.Fatalf("not proven equal: %+v", rep.Verify)
			}
			seqs := map[int]bool{}
			for _, s := range rep.Verify.Sets {
				if s.Spec != nil {
					seqs[s.Spec.Seq] = true
				}
			}
			if !seqs[1] && !images {
				t.Errorf("verify ran no single-token set: %v", seqs)
			}
			if _, err := graph.Load(out); err != nil {
				t.Fatalf("the output does not load: %v", err)
			}
		})
	}
}

// batchOnly reports whether every input of the model in path has no open
// dimension but its first (fixed-size images).
func batchOnly(t *testing.T, path string) bool {
	m, err := graph.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range m.Graph.Inputs {
		dims, ok := in.Type.Shape()
		if !ok || len(dims) < 3 {
			return false
		}
		for _, d := range dims[1:] {
			if !d.Known {
				return false
			}
		}
	}
	return true
}

// TestRewriteRefusesWhatIsNotEqual makes the rewritten model differ (a
// cos/sin cache entry changed) and checks that nothing is written and the
// command exits 1 with verify's report.
func TestRewriteRefusesWhatIsNotEqual(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.onnx")
	var stdout, stderr bytes.Buffer
	opts := &rewriteOptions{IO: &IOStreams{Out: &stdout, ErrOut: &stderr}, In: corpusFile("rope_llama", "model.onnx"), Out: out,
		Seed: 1, tamper: func(m *graph.Model) {
			for _, v := range m.Graph.Initializers {
				if strings.HasPrefix(v.Name, "onnxpe_rope_cos_cache") {
					vals, _ := v.Const.Float64s()
					vals[50*8+1] += 1e-3
					t2, err := graph.TensorFromFloat64(v.Name, v.Const.DataType(), v.Const.Dims(), vals)
					if err != nil {
						t.Fatal(err)
					}
					v.Const = t2
					return
				}
			}
			t.Fatal("no cos cache to tamper with")
		}}
	err := rewriteRun(opts)
	if exitCode(err) != ExitCheckFailed {
		t.Fatalf("exit %d (%v), want 1:\n%s", exitCode(err), err, stdout.String())
	}
	if _, serr := os.Stat(out); !os.IsNotExist(serr) {
		t.Fatalf("%s was written", out)
	}
	if !strings.Contains(stdout.String(), "not equal") || !strings.Contains(err.Error(), "nothing written") {
		t.Fatalf("the report does not say why:\n%s\n%v", stdout.String(), err)
	}
}

func TestRewriteDryRunWritesNothing(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out.onnx")
	code, stdout, stderr := runCLI(t, "rewrite", corpusFile("sinusoidal_concat", "model.onnx"), "-o", out, "--dry-run", "--no-verify")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatal("--dry-run wrote the model")
	}
	for _, want := range []string{"sinusoidal", "NODES REMOVED", "not verified", "nothing written"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, stdout)
		}
	}
}

// TestRewriteHelpListsThePasses: --help describes every rewrite pass
// --passes takes, and the flag's own text names them all.
func TestRewriteHelpListsThePasses(t *testing.T) {
	code, stdout, stderr := runCLI(t, "rewrite", "--help")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	desc, flags, ok := strings.Cut(stdout, "Flags:")
	if !ok {
		t.Fatalf("no flags in the help:\n%s", stdout)
	}
	_, flagText, _ := strings.Cut(flags, "--passes")
	flagText, _, _ = strings.Cut(flagText, "\n")
	for _, r := range schemes.Rewrites() {
		name := r.Name
		if !regexp.MustCompile(`(?m)^  ` + name + ` `).MatchString(desc) {
			t.Errorf("--help does not describe the pass %s", name)
		}
		if !regexp.MustCompile(`\b` + name + `\b`).MatchString(flagText) {
			t.Errorf("--passes' text does not name %s: %q", name, flagText)
		}
	}
}

// TestRewriteKeepsExternalData rewrites a model whose weights are in a
// side file: the output keeps them in its own side file, with the new
// caches.
func TestRewriteKeepsExternalData(t *testing.T) {
	dir := t.TempDir()
	in, err := testmodels.ExternalDataModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	outDir := t.TempDir()
	out := filepath.Join(outDir, "rw.onnx")
	code, stdout, stderr := runCLI(t, "rewrite", in, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	m, err := graph.Load(out)
	if err != nil {
		t.Fatal(err)
	}
	cache := false
	for _, v := range m.Graph.Initializers {
		if v.Const.ByteSize() >= 1024 && !v.Const.IsExternal() {
			t.Errorf("%s (%d bytes) is inline", v.Name, v.Const.ByteSize())
		}
		if strings.HasPrefix(v.Name, "onnxpe_rope_cos_cache") {
			cache = v.Const.IsExternal() && v.Const.External().Location == "rw.onnx.data"
		}
	}
	if !cache {
		t.Error("the new cos cache is not in rw.onnx.data")
	}
	if fi, err := os.Stat(filepath.Join(outDir, "rw.onnx.data")); err != nil || fi.Size() == 0 {
		t.Errorf("no side file: %v", err)
	}
}

// TestRewriteRoPEOpONNX emits the standard RotaryEmbedding into RoPE
// models exported at opset 17 and built at 18 and 20: the model is
// upgraded to opset 23 and proven equal; rope_llama_opset14 from opset 14.
func TestRewriteRoPEOpONNX(t *testing.T) {
	dir := t.TempDir()
	ins := []string{corpusFile("rope_llama_opset14", "model.onnx"), corpusFile("rope_llama", "model.onnx"), corpusFile("rope_gptj", "model.onnx"), corpusFile("rope_kvcache", "model.onnx")}
	for _, s := range testmodels.Synthetics() {
		if s.Name == "llama_opset18" || s.Name == "llama_cache_shared" {
			p := filepath.Join(dir, s.Name+".onnx")
			if err := s.Build().Save(p, graph.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			ins = append(ins, p)
		}
	}
	for _, in := range ins {
		out := filepath.Join(dir, "onnx23_"+filepath.Base(filepath.Dir(in))+filepath.Base(in))
		code, stdout, stderr := runCLI(t, "rewrite", in, "-o", out, "--rope-op", "onnx")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s%s", in, code, stdout, stderr)
		}
		m, err := graph.Load(out)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		m.Walk(func(nd *graph.Node) {
			if nd.OpType == "RotaryEmbedding" && nd.Domain == "" {
				n++
			}
		})
		if m.OpsetVersion("") != 23 || n == 0 {
			t.Errorf("%s: opset %d, %d ONNX RotaryEmbedding nodes", in, m.OpsetVersion(""), n)
		}
	}
}

// fusedOps counts the fused positional-encoding ops of a model file.
func fusedOps(t *testing.T, path string) map[string]int {
	t.Helper()
	m, err := graph.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	m.Walk(func(n *graph.Node) {
		switch {
		case n.OpType == "RotaryEmbedding", n.OpType == "ALiBiBias":
			out[n.Domain+"."+n.OpType]++
		case n.OpType == "GroupQueryAttention" && n.AttrInt("do_rotary", 0) == 1:
			out["do_rotary"]++
		}
	})
	return out
}

// fusedInputs are models with fused positional-encoding ops: the Go-built
// fused forms (both RotaryEmbedding domains, GroupQueryAttention with
// do_rotary, RotaryEmbedding + MultiHeadAttention) and corpus models
// fused by the rewrite (RoPE of every layout, ALiBi with --alibi fuse).
func fusedInputs(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	var out []string
	for _, s := range testmodels.Synthetics() {
		if s.Name == "llama_fused_ms" || s.Name == "llama_fused_onnx" {
			p := filepath.Join(dir, s.Name+".onnx")
			if err := s.Build().Save(p, graph.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	for _, f := range []testmodels.DeployForm{testmodels.FormGenAIGQA, testmodels.FormRotaryMHA} {
		p := filepath.Join(dir, string(f)+".onnx")
		if err := testmodels.BuildDeploy(f, testmodels.DefaultDeploy).Save(p, graph.SaveOptions{}); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	for _, c := range [][]string{{"rope_gptj"}, {"rope_neox"}, {"rope_kvcache"}, {"rope_llama_fp16"}, {"rope_ntk"}, {"llama4_nope", "--rope-op", "onnx"}, {"alibi_bloom", "--alibi", "fuse"}, {"alibi_mpt", "--alibi", "fuse"}} {
		p := filepath.Join(dir, "fused_"+strings.Join(c, "_")+".onnx")
		code, stdout, stderr := runCLI(t, append([]string{"rewrite", corpusFile(c[0], "model.onnx"), "-o", p}, c[1:]...)...)
		if code != 0 {
			t.Fatalf("fusing %v: exit %d: %s%s", c, code, stdout, stderr)
		}
		out = append(out, p)
	}
	return out
}

// TestRewriteUnfuse lowers every fused op back to primitive ops: the
// result is proven equal to the fused model and holds no fused op.
func TestRewriteUnfuse(t *testing.T) {
	for _, in := range fusedInputs(t) {
		t.Run(filepath.Base(in), func(t *testing.T) {
			if len(fusedOps(t, in)) == 0 {
				t.Fatal("the input has no fused op")
			}
			out := filepath.Join(t.TempDir(), "unfused.onnx")
			code, stdout, stderr := runCLI(t, "rewrite", in, "-o", out, "--unfuse")
			if code != 0 {
				t.Fatalf("exit %d: %s%s", code, stdout, stderr)
			}
			if !strings.Contains(stdout, "equal to") {
				t.Fatalf("not proven equal: %s", stdout)
			}
			if f := fusedOps(t, out); len(f) != 0 {
				t.Errorf("fused ops left: %v", f)
			}
		})
	}
}

// TestRewriteConvertsFusedRoPE converts RotaryEmbedding nodes between the
// two domains when --rope-op names one.
func TestRewriteConvertsFusedRoPE(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ model, op, want string }{
		{"llama_fused_ms", "onnx", ".RotaryEmbedding"},
		{"llama_fused_onnx", "com.microsoft", "com.microsoft.RotaryEmbedding"},
	} {
		var in string
		for _, s := range testmodels.Synthetics() {
			if s.Name == c.model {
				in = filepath.Join(dir, s.Name+".onnx")
				if err := s.Build().Save(in, graph.SaveOptions{}); err != nil {
					t.Fatal(err)
				}
			}
		}
		out := filepath.Join(dir, c.model+"_to_"+c.op+".onnx")
		code, stdout, stderr := runCLI(t, "rewrite", in, "-o", out, "--rope-op", c.op)
		if code != 0 || !strings.Contains(stdout, "equal to") {
			t.Fatalf("%s: exit %d: %s%s", c.model, code, stdout, stderr)
		}
		if f := fusedOps(t, out); len(f) != 1 || f[c.want] == 0 {
			t.Errorf("%s --rope-op %s: fused ops %v", c.model, c.op, f)
		}
	}
}

// TestRewriteRefusesAnOpenGrid rewrites a ViT with axial 2-D RoPE over
// images of open size: rewrite_axial_rope refuses it with the reason (its
// grid follows the image), no other pass claims it, the summary counts it
// as left (not "nothing to rewrite") and the model is written unchanged;
// with --passes rope the one line names the pass that owns the finding.
func TestRewriteRefusesAnOpenGrid(t *testing.T) {
	var open *testmodels.Synthetic
	for _, s := range testmodels.AxialSynthetics() {
		if s.Name == "rope_axial_meshgrid_open" {
			open = &s
		}
	}
	if open == nil {
		t.Fatal("no rope_axial_meshgrid_open")
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.onnx"), filepath.Join(dir, "out.onnx")
	if err := open.Build().Save(in, graph.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "rewrite", in, "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
	for _, want := range []string{"not rewritten (axial_rope): rope (layers [0 1]): grid null: the patch grid follows the image's size",
		"nothing rewritten (1 finding(s) left, see 'not rewritten'): " + out + " is " + in + " unchanged"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "not rewritten (rope)") {
		t.Errorf("rewrite_rope reports rewrite_axial_rope's finding:\n%s", stdout)
	}
	a, _ := os.ReadFile(in)
	b, _ := os.ReadFile(out)
	if !bytes.Equal(a, b) {
		t.Error("the output is not the input unchanged")
	}
	code, stdout, stderr = runCLI(t, "rewrite", in, "-o", out, "--passes", "rope")
	if code != 0 || strings.Count(stdout, "not rewritten (") != 1 ||
		!strings.Contains(stdout, "not rewritten (rope): rope (layers [0 1]): the two axes of 2-D RoPE do not fit RotaryEmbedding (one position turns every pair): the finding is rewrite_axial_rope's, which this run leaves out (--passes axial)") {
		t.Errorf("--passes rope: exit %d:\n%s%s", code, stdout, stderr)
	}
}
