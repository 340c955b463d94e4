package codegen_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onnxpe/onnxpe/codegen"
	"github.com/onnxpe/onnxpe/codegen/emit"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/scheme/nope"
	"github.com/onnxpe/onnxpe/testmodels"
)

// model is one model of testmodels/ to generate code for.
type model struct {
	name  string
	build func() (*graph.Model, error)
	// nope: the model has no positional encoding (codegen must refuse it).
	nope bool
}

// models lists every model of testmodels/: the PyTorch exports and ONNX
// Runtime's optimised saves of them, the Go-built forms (axial 2-D RoPE's
// included) and the deployment forms.
func models(t *testing.T) []model {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	var out []model
	for _, e := range man.Models {
		none := true
		for _, s := range e.Truth.Schemes {
			if s != nope.Name {
				none = false
			}
		}
		out = append(out, model{name: e.Name, nope: none, build: func() (*graph.Model, error) { return graph.Load(e.ModelPath()) }})
		// ONNX Runtime's optimised saves beside it (fused ops, casts to
		// float32 around float16 arithmetic).
		for _, v := range []string{"ort_basic", "ort_extended"} {
			p := filepath.Join(filepath.Dir(e.ModelPath()), v+".onnx")
			if _, err := os.Stat(p); err == nil {
				out = append(out, model{name: e.Name + "_" + v, nope: none, build: func() (*graph.Model, error) { return graph.Load(p) }})
			}
		}
	}
	for _, s := range append(testmodels.Synthetics(), testmodels.AxialSynthetics()...) {
		out = append(out, model{name: s.Name, build: func() (*graph.Model, error) { return s.Build(), nil }})
	}
	for _, f := range testmodels.DeployForms {
		out = append(out, model{name: "deploy_" + string(f), build: func() (*graph.Model, error) {
			return testmodels.BuildDeploy(f, testmodels.DefaultDeploy), nil
		}})
	}
	return out
}

// realModels are the files of other people's tools vendored for the
// audit (passes/testdata/realmodels, with their licences): the ones with a
// positional encoding codegen reproduces, and the others with the reason
// codegen leaves them out (their cos/sin are graph inputs, or no
// encoding).
var realModels = map[string]string{
	"ee_phi35_mini_longrope_noweights": "", "ort_bert_toy_pytorch": "", "ort_gpt2_megatron_embedlayernorm": "",
	"ort_gpt2_megatron_unfused": "", "onnx_flexattention_relative_positional_expanded": "", "ort_embed_layer_norm_fragment": "",
	"ee_llama_dort_invfreq_input":            "graph inputs",
	"ee_llama_dort_rotary_customop":          "graph inputs",
	"ee_llama_dynamo_torchlib_functions":     "graph inputs",
	"ee_phi_partial_rotary":                  "graph inputs",
	"onnx_rotary_embedding_3d_input":         "graph inputs",
	"onnx_flexattention_relative_positional": "main graph", // the bias of FlexAttention's score_mod subgraph
	"ort_bloom_alibi_training":               "not the slopes times the positions",
	"genai_lfm2_stub_decoder":                "nothing",
	"genai_tiny_gqa_no_rotary":               "nothing",
	"ort_dmmha_self_attn":                    "nothing",
	"ort_dummy_t5_beamsearch":                "nothing",
	"ort_gemma3_vision_attention_fragment":   "nothing",
	"ort_phi35v_vision_attention_fragment":   "nothing",
	"ort_whisper_decoder_layer_fragment":     "nothing",
}

// pending are models whose encoding codegen leaves out, with the reason
// (printed as skips, never silent).
var pending = map[string]string{}

func pkgName(model string) string { return strings.ReplaceAll(strings.ToLower(model), "_", "") }

// generate audits a model and generates its code in both languages.
func generate(t *testing.T, m model) (goRes, cRes *codegen.Result, err error) {
	g, err := m.build()
	if err != nil {
		t.Fatal(err)
	}
	rep, ctx, err := audit.AuditModel(g, m.name, passes.Options{})
	if err != nil {
		t.Fatalf("%s: audit: %v", m.name, err)
	}
	opts := emit.Options{Package: pkgName(m.name), Model: m.name + ".onnx", SHA256: strings.Repeat("0", 64)}
	opts.Lang = "go"
	goRes, err = codegen.Generate(rep, ctx, opts)
	if err != nil {
		return goRes, nil, err
	}
	opts.Lang = "c"
	cRes, err = codegen.Generate(rep, ctx, opts)
	return goRes, cRes, err
}

func writeFiles(t *testing.T, dir string, files []codegen.File) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.Name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGeneratedCodeMatchesTheModel is the acceptance test of codegen: for
// every model of testmodels/ with a positional encoding, the Go package
// passes go vet and go test (its golden vectors come from onnxpe's
// executor on the model's own subgraph, at positions up to the model's
// largest or 4096), and the C header compiles with gcc -std=c99 -Wall
// -Wextra -Werror and its test program passes. The Go packages are built
// in one temporary module (one go vet and one go test for all); the C
// programs are compiled two at a time.
func TestGeneratedCodeMatchesTheModel(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles and runs the generated code of every model (minutes; -short): make test runs it, TestGoldenCodegen checks the generated text")
	}
	goBin := goTool()
	cc, ccErr := exec.LookPath("gcc")
	root := t.TempDir()
	mod := filepath.Join(root, "gomod")
	writeFiles(t, mod, []codegen.File{{Name: "go.mod", Data: []byte("module example.com/onnxpecodegen\n\ngo 1.21\n")}})
	type cJob struct{ name, dir, pkg string }
	var cJobs []cJob
	t0 := time.Now()
	emitted, skipped := 0, 0
	for _, m := range models(t) {
		goRes, cRes, err := generate(t, m)
		if m.nope {
			if !errors.Is(err, codegen.ErrNothing) {
				t.Errorf("%s: a model without positional encoding: %v, want ErrNothing", m.name, err)
			}
			continue
		}
		if why, ok := pending[m.name]; ok {
			skipped++
			t.Logf("SKIP %s: %s", m.name, why)
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", m.name, err)
			continue
		}
		for _, s := range goRes.Skipped {
			t.Errorf("%s: %s (layers %v) left out: %s", m.name, s.Scheme, s.Layers, s.Reason)
		}
		checkApply(t, m.name, goRes)
		emitted++
		writeFiles(t, filepath.Join(mod, pkgName(m.name)), goRes.Files)
		cdir := filepath.Join(root, "c", pkgName(m.name))
		writeFiles(t, cdir, cRes.Files)
		cJobs = append(cJobs, cJob{m.name, cdir, pkgName(m.name)})
	}
	// The real models: each as expected.
	dirs, _ := filepath.Glob(filepath.Join("..", "passes", "testdata", "realmodels", "*"))
	seenReal := 0
	for _, dir := range dirs {
		name := filepath.Base(dir)
		files, _ := filepath.Glob(filepath.Join(dir, "*.onnx"))
		if len(files) == 0 {
			continue
		}
		want, ok := realModels[name]
		if !ok {
			t.Errorf("real model %s: no expectation (add it to realModels)", name)
			continue
		}
		seenReal++
		m := model{name: "real_" + name, build: func() (*graph.Model, error) {
			return graph.LoadWith(files[0], graph.LoadOptions{AllowMissingExternal: true})
		}}
		goRes, cRes, err := generate(t, m)
		switch {
		case want == "nothing":
			if !errors.Is(err, codegen.ErrNothing) {
				t.Errorf("%s: %v, want nothing to generate", name, err)
			}
			continue
		case want != "":
			reasons := ""
			if goRes != nil {
				for _, s := range goRes.Skipped {
					reasons += s.Reason + "; "
				}
			}
			if !errors.Is(err, codegen.ErrNothing) || !strings.Contains(reasons, want) {
				t.Errorf("%s: %v (left out: %s), want it left out for %q", name, err, reasons, want)
			}
			skipped++
			t.Logf("SKIP %s (real model): %s", name, reasons)
			continue
		case err != nil:
			t.Errorf("%s: %v", name, err)
			continue
		}
		emitted++
		writeFiles(t, filepath.Join(mod, pkgName(m.name)), goRes.Files)
		cdir := filepath.Join(root, "c", pkgName(m.name))
		writeFiles(t, cdir, cRes.Files)
		cJobs = append(cJobs, cJob{m.name, cdir, pkgName(m.name)})
	}
	if seenReal != len(realModels) {
		t.Errorf("%d of the %d real models found", seenReal, len(realModels))
	}
	t.Logf("generated %d models in both languages (%d left out, printed above) in %v", emitted, skipped, time.Since(t0).Round(time.Millisecond))
	if emitted < 80 {
		t.Fatalf("only %d models generated", emitted)
	}
	// A package whose rotation forgets to round the angles to float32 must
	// fail its own test: the golden vectors can tell.
	tampered := []string{tamper(t, mod, "ropellama", "tampered", "t := round32(x * RoPEInvFreq[k])", "t := x * RoPEInvFreq[k]"),
		// An M-RoPE rotation turning the wrong way, and an axial one that
		// rotates the class token and leaves the last patch.
		tamper(t, mod, "ropemrope", "tamperedmrope", "row[pr[0]] = float32(round32(round32(a*c) - round32(b*s)))", "row[pr[0]] = float32(round32(round32(a*c) + round32(b*s)))"),
		tamper(t, mod, "ropeaxialvit", "tamperedaxial", "i := (AxialRoPEOffset+t)*heads + h", "i := t*heads + h")}

	t1 := time.Now()
	if out, err := run(mod, goBin, "vet", "./..."); err != nil {
		t.Fatalf("go vet: %v\n%s", err, out)
	}
	pkgs := []string{}
	for _, j := range cJobs {
		pkgs = append(pkgs, "./"+j.pkg)
	}
	if out, err := run(mod, goBin, append([]string{"test", "-count=1", "-vet=off"}, pkgs...)...); err != nil {
		t.Errorf("go test: %v\n%s", err, out)
	}
	for _, tp := range tampered {
		if out, err := run(mod, goBin, "test", "-count=1", "-vet=off", "./"+tp); err == nil || !strings.Contains(out, "the model") {
			t.Errorf("the tampered package %s passed its test (%v):\n%s", tp, err, out)
		}
	}
	t.Logf("go vet and go test of %d packages: %v", len(pkgs), time.Since(t1).Round(time.Millisecond))

	if ccErr != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no C compiler: %v", ccErr)
		}
		t.Skipf("SKIP the C half: no gcc (%v)", ccErr)
	}
	t2 := time.Now()
	var mu sync.Mutex
	sem := make(chan bool, 2)
	var wg sync.WaitGroup
	for _, j := range cJobs {
		wg.Add(1)
		sem <- true
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			msg := ""
			if out, err := run(j.dir, cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", j.pkg+"_test", j.pkg+"_test.c", "-lm"); err != nil {
				msg = fmt.Sprintf("%s: gcc: %v\n%s", j.name, err, out)
			} else if out, err := run(j.dir, "./"+j.pkg+"_test"); err != nil || !strings.Contains(out, "ok") {
				msg = fmt.Sprintf("%s: C test program: %v\n%s", j.name, err, out)
			}
			if msg != "" {
				mu.Lock()
				t.Error(msg)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("gcc and the test programs of %d models: %v", len(cJobs), time.Since(t2).Round(time.Millisecond))
}

// checkApply fails the test when the code of an M-RoPE or axial 2-D RoPE
// finding leaves out its rotation (ApplyMRoPE, ApplyAxialRoPE): the
// generated package documentation says why.
func checkApply(t *testing.T, name string, res *codegen.Result) {
	t.Helper()
	for _, e := range res.Emitted {
		for cs, apply := range map[string]string{"MRoPECosSin": "ApplyMRoPE", "AxialRoPECosSin": "ApplyAxialRoPE"} {
			has := func(fn string) bool {
				for _, f := range e.Functions {
					if strings.HasPrefix(f, fn) {
						return true
					}
				}
				return false
			}
			if has(cs) && !has(apply) {
				why := ""
				for _, f := range res.Files {
					text := strings.ReplaceAll(string(f.Data), "\n// ", " ")
					if i := strings.Index(text, apply+" is not written"); i >= 0 && why == "" {
						why, _, _ = strings.Cut(text[i:], "\n")
					}
				}
				t.Errorf("%s: %s without %s (%s)", name, cs, apply, why)
			}
		}
	}
}

// tamper copies package pkg of the module into a new package name with old
// replaced by new in its source, and returns the new package's folder name.
func tamper(t *testing.T, mod, pkg, name, old, new string) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(mod, pkg, pkg+".go"))
	if err != nil {
		t.Fatal(err)
	}
	test, err := os.ReadFile(filepath.Join(mod, pkg, pkg+"_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte(old)) {
		t.Fatalf("%s.go does not hold %q", pkg, old)
	}
	src = bytes.Replace(src, []byte(old), []byte(new), 1)
	src = bytes.Replace(src, []byte("package "+pkg), []byte("package "+name), 1)
	test = bytes.Replace(test, []byte("package "+pkg), []byte("package "+name), 1)
	writeFiles(t, filepath.Join(mod, name), []codegen.File{{Name: name + ".go", Data: src}, {Name: name + "_test.go", Data: test}})
	return name
}

// TestTwoFindingsOfAScheme generates a package from two findings of one
// scheme (as a model whose layers use two RoPE settings gives): the second
// one's names are numbered, and both languages still build and pass.
func TestTwoFindingsOfAScheme(t *testing.T) {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	var path string
	for _, e := range man.Models {
		if e.Name == "rope_gptj" {
			path = e.ModelPath()
		}
	}
	g, err := graph.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, ctx, err := audit.AuditModel(g, "rope_gptj", passes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	second := *rep.Findings[0]
	second.Layers = []int{7}
	rep.Findings = append(rep.Findings, &second)
	root := t.TempDir()
	for _, lang := range emit.Languages {
		res, err := codegen.Generate(rep, ctx, emit.Options{Lang: lang, Package: "two", Model: "rope_gptj.onnx", SHA256: strings.Repeat("0", 64)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Emitted) != 2 || !strings.HasSuffix(res.Emitted[1].Functions[0], "2") {
			t.Fatalf("%s: emitted %+v, want the second finding's functions numbered", lang, res.Emitted)
		}
		writeFiles(t, filepath.Join(root, lang), res.Files)
	}
	writeFiles(t, filepath.Join(root, "go"), []codegen.File{{Name: "go.mod", Data: []byte("module example.com/two\n\ngo 1.21\n")}})
	goBin := goTool()
	for _, args := range [][]string{{"vet", "."}, {"test", "-count=1", "-vet=off", "."}} {
		cmd := exec.Command(goBin, args...)
		cmd.Dir = filepath.Join(root, "go")
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, out)
		}
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no C compiler: %v", err)
		}
		t.Skipf("SKIP the C half: no gcc (%v)", err)
	}
	cmd := exec.Command(cc, "-std=c99", "-Wall", "-Wextra", "-Werror", "-o", "two_test", "two_test.c", "-lm")
	cmd.Dir = filepath.Join(root, "c")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	cmd = exec.Command("./two_test")
	cmd.Dir = filepath.Join(root, "c")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the C test program: %v\n%s", err, out)
	}
}

// goTool is the go command the tests build generated packages with: the
// one on PATH, else the one of the Go installation running the test.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// run runs the command name in dir, modules resolved from the generated
// go.mod alone (no workspace), and returns its combined output.
func run(dir string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
