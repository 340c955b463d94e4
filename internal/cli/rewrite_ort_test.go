//go:build ort

package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/onnxpe/onnxpe/verify"
)

// ortEqual runs verify's sweep on a and b in ONNX Runtime: at least three
// sets, or two (batches of 1 and 3) for a model of fixed-size images,
// whose only open dimension is the batch.
func ortEqual(t *testing.T, a, b string) {
	t.Helper()
	code, js, errOut := runCLI(t, "verify", a, b, "--runtime", "ort", "--json", "--threads", "1")
	var r verify.Report
	if err := json.Unmarshal([]byte(js), &r); err != nil {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if code != 0 || !r.Equal {
		t.Fatalf("in ONNX Runtime: %s %s", r.Summary, errOut)
	}
	min := 3
	if batchOnly(t, a) {
		min = 2
	}
	if r.Runtime != verify.RuntimeORT || len(r.Sets) < min {
		t.Fatalf("runtime %s, %d sets", r.Runtime, len(r.Sets))
	}
	t.Logf("%s", r.Summary)
}

// TestRewriteORT: every rewritten corpus model (default passes), the
// --rope-op onnx and --attention fused rewrites of the RoPE models (opset
// 17 exports, opset 18 and 20 builds), and every unfused model load in
// ONNX Runtime 1.30 and match their originals there.
func TestRewriteORT(t *testing.T) {
	dir := t.TempDir()
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	var ropes []string
	for _, e := range man.Models {
		if !rewritten[e.Name] {
			continue
		}
		if strings.HasPrefix(e.Name, "rope_") || e.Name == "llama4_nope" {
			ropes = append(ropes, e.ModelPath())
		}
		t.Run(e.Name, func(t *testing.T) {
			out := filepath.Join(dir, e.Name+".onnx")
			if code, stdout, stderr := runCLI(t, "rewrite", e.ModelPath(), "-o", out); code != 0 {
				t.Fatalf("exit %d: %s%s", code, stdout, stderr)
			}
			ortEqual(t, e.ModelPath(), out)
		})
	}
	for _, s := range testmodels.Synthetics() {
		if s.Name == "llama_opset18" || s.Name == "llama_cache_shared" {
			p := filepath.Join(dir, s.Name+".onnx")
			if err := s.Build().Save(p, graph.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			ropes = append(ropes, p)
		}
	}
	// 2-D RoPE over a fixed grid whose cos/sin the graph computes (over
	// images of open size: refused, nothing to run).
	for _, s := range testmodels.AxialSynthetics() {
		t.Run(s.Name, func(t *testing.T) {
			in := filepath.Join(dir, s.Name+".onnx")
			if err := s.Build().Save(in, graph.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, s.Name+"_rewritten.onnx")
			if s.Truth.Findings[0].Params["grid"] == nil {
				if code, stdout, stderr := runCLI(t, "rewrite", in, "-o", out); code != 0 || !strings.Contains(stdout, "not rewritten (axial_rope)") {
					t.Fatalf("exit %d: %s%s", code, stdout, stderr)
				}
				return
			}
			if code, stdout, stderr := runCLI(t, "rewrite", in, "-o", out); code != 0 || !strings.Contains(stdout, "rewrote axial_rope") {
				t.Fatalf("exit %d: %s%s", code, stdout, stderr)
			}
			ortEqual(t, in, out)
		})
	}
	for _, in := range ropes {
		t.Run("rope-op onnx "+filepath.Base(filepath.Dir(in))+filepath.Base(in), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "onnx23.onnx")
			if code, stdout, stderr := runCLI(t, "rewrite", in, "-o", out, "--rope-op", "onnx"); code != 0 {
				t.Fatalf("exit %d: %s%s", code, stdout, stderr)
			}
			ortEqual(t, in, out)
		})
	}
	// --attention fused: the blocks GroupQueryAttention expresses become
	// the op (the others are left, their rotations fused); with --rope-op
	// onnx, RotaryEmbedding and Attention of opset 23.
	for _, in := range ropes {
		for _, form := range [][]string{nil, {"--rope-op", "onnx"}} {
			t.Run("attention fused "+strings.Join(form, " ")+" "+filepath.Base(filepath.Dir(in))+filepath.Base(in), func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "fused.onnx")
				if code, stdout, stderr := runCLI(t, append([]string{"rewrite", in, "-o", out, "--attention", "fused"}, form...)...); code != 0 {
					t.Fatalf("exit %d: %s%s", code, stdout, stderr)
				}
				ortEqual(t, in, out)
			})
		}
	}
	for _, in := range fusedInputs(t) {
		if strings.Contains(in, "alibi") {
			continue // ALiBiBias is onnxpe's op: ONNX Runtime does not have it
		}
		t.Run("unfuse "+filepath.Base(in), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "unfused.onnx")
			if code, stdout, stderr := runCLI(t, "rewrite", in, "-o", out, "--unfuse"); code != 0 {
				t.Fatalf("exit %d: %s%s", code, stdout, stderr)
			}
			ortEqual(t, in, out)
		})
	}
}

// TestRewriteRealModelsORT: the real models (vendored for the audit) whose
// unfused encodings the rewrite changes run in ONNX Runtime rewritten,
// and match their originals there: equal within verify's tolerance, or,
// where ONNX Runtime's result for the original is itself further than
// that from onnxpe's (weights given as inputs, drawn N(0,1), make scores
// large), no further from the original than that.
func TestRewriteRealModelsORT(t *testing.T) {
	for _, c := range []struct {
		name string
		both bool // also run onnxpe, for ONNX Runtime's own difference on the original
	}{{"ee_llama_dort_invfreq_input", false}, {"ee_llama_dynamo_torchlib_functions", true}, {"ort_bert_toy_pytorch", false}} {
		name := c.name
		t.Run(name, func(t *testing.T) {
			in := filepath.Join("..", "..", "passes", "testdata", "realmodels", name, "model.onnx")
			out := filepath.Join(t.TempDir(), "rw.onnx")
			if code, stdout, stderr := runCLI(t, "rewrite", in, "-o", out); code != 0 || !strings.Contains(stdout, "equal to") {
				t.Fatalf("exit %d: %s%s", code, stdout, stderr)
			}
			rt := "ort"
			if c.both {
				rt = "both"
			}
			_, js, errOut := runCLI(t, "verify", in, out, "--runtime", rt, "--json", "--threads", "1")
			var r verify.Report
			if err := json.Unmarshal([]byte(js), &r); err != nil {
				t.Fatalf("%v: %s", err, errOut)
			}
			own := map[string]float64{} // set/output -> |A go - A ort|
			for _, s := range r.Sets {
				if s.Pairing == "A go / A ort" {
					for _, o := range s.Outputs {
						own[s.Name+"/"+o.Name] = o.MaxAbsErr
					}
				}
			}
			n := 0
			for _, s := range r.Sets {
				if s.Pairing != "A ort / B ort" {
					continue
				}
				n++
				for _, o := range s.Outputs {
					if !o.Equal && o.MaxAbsErr > 2*own[s.Name+"/"+o.Name] {
						t.Errorf("%s %s: the rewrite moves ONNX Runtime's result by %.3g, ONNX Runtime differs from onnxpe on the original by %.3g", s.Name, o.Name, o.MaxAbsErr, own[s.Name+"/"+o.Name])
					}
				}
			}
			if n == 0 {
				t.Fatalf("no input set ran in ONNX Runtime: %s", r.Summary)
			}
		})
	}
}

// fusedForms are the two forms of --attention fused: the op the notes
// name and the flags that ask for it.
var fusedForms = []struct{ op, flags string }{{"GroupQueryAttention", ""}, {"Attention (opset 23)", "--rope-op onnx"}}

// TestAttentionFusedHFModelsORT: `rewrite --attention fused` of every
// Hugging Face export (transformers' modeling code, torch.onnx.export),
// in both forms: GroupQueryAttention (the RoPE decoders: Llama, Falcon,
// Gemma, GPT-J, GPT-NeoX, Phi, Phi-3) and, with --rope-op onnx, opset
// 23's Attention (those, and the blocks whose scores an ALiBi or T5 bias
// reaches: MPT, T5, mT5, UMT5). What is fused is verified before writing
// and runs equal to the original in ONNX Runtime, prompt and decode; the
// others are written with their blocks kept or exit 1 with nothing
// written only when the rewrite itself refuses (never a fused model that
// is not equal).
func TestAttentionFusedHFModelsORT(t *testing.T) {
	// The exports ONNX Runtime cannot load, fused or not.
	ortCrashes := map[string]string{"hf-mpt-alibi-6heads": "ONNX Runtime 1.30 crashes (SIGSEGV) creating a session of the original export"}
	paths, _ := filepath.Glob(filepath.Join(testmodels.HFModelsDir(), "hf-*", "model.onnx"))
	if len(paths) != 40 {
		t.Fatalf("%d Hugging Face exports, want 40", len(paths))
	}
	fused := map[string][]string{}
	skipped := 0
	for _, in := range paths {
		name := filepath.Base(filepath.Dir(in))
		for _, form := range fusedForms {
			t.Run(name+" "+form.op, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "fused.onnx")
				code, stdout, stderr := runCLI(t, append([]string{"rewrite", in, "-o", out, "--attention", "fused"}, strings.Fields(form.flags)...)...)
				if !strings.Contains(stdout, "attention fused into "+form.op) {
					if strings.Contains(stdout+stderr, "is not equal") {
						t.Fatalf("a rewrite that fuses nothing is not equal: %s%s", stdout, stderr)
					}
					return
				}
				if code != 0 {
					t.Fatalf("exit %d: %s%s", code, stdout, stderr)
				}
				fused[form.op] = append(fused[form.op], name)
				if why, ok := ortCrashes[name]; ok {
					skipped++
					t.Logf("not run in ONNX Runtime: %s", why)
					return
				}
				ortEqual(t, in, out)
			})
		}
	}
	t.Logf("%d fused rewrites not run in ONNX Runtime (%v)", skipped, ortCrashes)
	// Llama (4), Falcon, Gemma, GPT-J, GPT-NeoX, Phi, Phi-3; and BLOOM,
	// MPT, T5, mT5 and UMT5 in opset 23's form.
	for op, want := range map[string]int{"GroupQueryAttention": 10, "Attention (opset 23)": 17} {
		if len(fused[op]) < want {
			t.Errorf("%d exports fused into %s, want at least %d: %v", len(fused[op]), op, want, fused[op])
		}
		t.Logf("%d of %d exports fused into %s and equal in ONNX Runtime: %v", len(fused[op]), len(paths), op, fused[op])
	}
}

// TestAddKVCacheORT: the Hugging Face exports' and the corpus's RoPE
// decoders rewritten with --attention fused --add-kv-cache (both forms)
// run in ONNX Runtime as a prompt then decode steps, their caches fed
// back, equal to the originals on the whole prompt: Falcon, Gemma, GPT-J,
// GPT-NeoX, Llama (3), Phi, Phi-3 and the corpus's Llama, Qwen2, GPT-J
// and NeoX; the others are refused with the reason (no block fused, a
// cache already).
func TestAddKVCacheORT(t *testing.T) {
	paths, _ := filepath.Glob(filepath.Join(testmodels.HFModelsDir(), "hf-*", "model.onnx"))
	for _, name := range []string{"rope_llama", "rope_qwen2", "rope_gptj", "rope_neox"} {
		paths = append(paths, filepath.Join(testmodels.Dir(), "models", name, "model.onnx"))
	}
	given := map[string][]string{}
	refused := 0
	for _, in := range paths {
		name := filepath.Base(filepath.Dir(in))
		for _, form := range fusedForms {
			t.Run(name+" "+form.op, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "kv.onnx")
				code, stdout, stderr := runCLI(t, append([]string{"rewrite", in, "-o", out, "--attention", "fused", "--add-kv-cache"}, strings.Fields(form.flags)...)...)
				switch {
				case code == 1 && strings.Contains(stdout, "--add-kv-cache: "):
					refused++
					return
				case code != 0:
					t.Fatalf("exit %d: %s%s", code, stdout, stderr)
				}
				given[form.op] = append(given[form.op], name)
				code, js, errOut := runCLI(t, "verify", in, out, "--runtime", "ort", "--json", "--threads", "1")
				var r verify.Report
				if err := json.Unmarshal([]byte(js), &r); err != nil {
					t.Fatalf("exit %d: %s", code, errOut)
				}
				if code != 0 || !r.Equal || r.PromptThenDecode == "" || r.Runtime != verify.RuntimeORT {
					t.Fatalf("in ONNX Runtime (%q): %s %s", r.PromptThenDecode, r.Summary, errOut)
				}
			})
		}
	}
	t.Logf("%d rewrites refused --add-kv-cache (the notes say why)", refused)
	for op, want := range map[string]int{"GroupQueryAttention": 13, "Attention (opset 23)": 13} {
		if len(given[op]) < want {
			t.Errorf("%d models given a cache in the %s form, want at least %d: %v", len(given[op]), op, want, given[op])
		}
		t.Logf("%d models given a cache in the %s form, equal in ONNX Runtime: %v", len(given[op]), op, given[op])
	}
}

// TestVerifyORTCrashIsOneLine: ONNX Runtime 1.30 crashes (SIGSEGV)
// creating a session of MPT's Hugging Face export. It runs in this
// process, so the crash would end it with a signal trace; the session is
// tried in a child process first, and verify says so in one line (exit
// 2).
func TestVerifyORTCrashIsOneLine(t *testing.T) {
	in := filepath.Join(testmodels.HFModelsDir(), "hf-mpt-alibi-6heads", "model.onnx")
	code, stdout, stderr := runCLI(t, "verify", in, in, "--runtime", "ort", "--threads", "1")
	if code != 2 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "ONNX Runtime crashes (SIGSEGV)") {
		t.Fatalf("exit %d: %s%s", code, stdout, stderr)
	}
}

// TestAttentionFusedRealModelsORT: the real models --attention fused
// fuses (either form; today the expanded FlexAttention export, whose
// fixed shapes give verify one input set) run equal in ONNX Runtime.
func TestAttentionFusedRealModelsORT(t *testing.T) {
	paths, err := testmodels.RealModelFiles()
	if err != nil {
		t.Fatal(err)
	}
	var fused []string
	for _, in := range paths {
		for _, flags := range []string{"", "--rope-op onnx"} {
			out := filepath.Join(t.TempDir(), "fused.onnx")
			code, stdout, _ := runCLI(t, append([]string{"rewrite", in, "-o", out, "--attention", "fused"}, strings.Fields(flags)...)...)
			if code != 0 || !strings.Contains(stdout, "attention fused into") {
				continue
			}
			fused = append(fused, filepath.Base(filepath.Dir(in))+" "+flags)
			code, js, errOut := runCLI(t, "verify", in, out, "--runtime", "ort", "--json", "--threads", "1")
			var r verify.Report
			if err := json.Unmarshal([]byte(js), &r); err != nil || code != 0 || !r.Equal || r.Runtime != verify.RuntimeORT || len(r.Sets) == 0 {
				t.Errorf("%s [%s] in ONNX Runtime: exit %d: %s %s", in, flags, code, r.Summary, errOut)
			}
		}
	}
	if len(fused) == 0 {
		t.Fatal("no real model fused")
	}
	t.Logf("fused and equal in ONNX Runtime: %v", fused)
}
