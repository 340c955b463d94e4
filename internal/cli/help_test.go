package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes/scheme/alibi"
	"github.com/onnxpe/onnxpe/passes/scheme/complexorder"
	"github.com/onnxpe/onnxpe/passes/scheme/disentangled"
	"github.com/onnxpe/onnxpe/passes/scheme/floater"
	"github.com/onnxpe/onnxpe/passes/scheme/learned"
	"github.com/onnxpe/onnxpe/passes/scheme/nope"
	"github.com/onnxpe/onnxpe/passes/scheme/relsin"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
	"github.com/onnxpe/onnxpe/passes/scheme/shaw"
	"github.com/onnxpe/onnxpe/passes/scheme/sinusoidal"
	"github.com/onnxpe/onnxpe/passes/scheme/t5"
	"github.com/onnxpe/onnxpe/passes/scheme/unknown"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/verify"
	"github.com/spf13/cobra"
)

// TestRootHelpDescribesTheTool: `onnxpe --help` names every command and
// every scheme of the audit's vocabulary (a new scheme or command must be
// added to it, and to this test's list of how the help names it).
func TestRootHelpDescribesTheTool(t *testing.T) {
	code, out, _ := runCLI(t, "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	long, _, _ := strings.Cut(out, "Exit codes:")
	named := map[string][]string{
		sinusoidal.Name:   {"sinusoidal"},
		learned.Name:      {"learned absolute"},
		rope.Name:         {"RoPE", "scaling rules", "M-RoPE", "2-D RoPE"},
		alibi.Name:        {"ALiBi"},
		t5.Name:           {"T5"},
		shaw.Name:         {"Shaw"},
		nope.Name:         {"NoPE"},
		relsin.Name:       {"Transformer-XL", "XLNet"},
		disentangled.Name: {"DeBERTa"},
		complexorder.Name: {"complex-order"},
		floater.Name:      {"FLOATER"},
		unknown.Name:      {"unknown"},
	}
	for _, s := range schemeNames {
		words, ok := named[s]
		if !ok {
			t.Errorf("scheme %s: say how onnxpe --help names it (and name it there)", s)
		}
		for _, w := range words {
			if !strings.Contains(strings.Join(strings.Fields(long), " "), w) {
				t.Errorf("onnxpe --help does not mention %q (scheme %s)", w, s)
			}
		}
	}
	for _, c := range NewRootCmd(&IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}).Commands() {
		if c.Name() == "help" || c.Name() == "completion" || c.Name() == "version" {
			continue
		}
		if !strings.Contains(long, "\n  "+c.Name()+" ") {
			t.Errorf("onnxpe --help does not describe the command %s", c.Name())
		}
	}
}

// TestHelpExamplesRun runs every example of every command's --help, as
// shown, on bundled models placed under the names the examples use: each
// must succeed (or, for a check, report its result: exit 1), never exit 2
// or 3. Extensions run with --dry-run (their checks run the model at
// thousands of positions); examples that need ONNX Runtime are counted and
// left to builds with it.
func TestHelpExamplesRun(t *testing.T) {
	w := t.TempDir()
	place := func(name, src string) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(w, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	llama := corpusModel("rope_llama")
	ort := corpusFile("rope_llama", "ort_extended.onnx")
	for name, src := range map[string]string{
		"model.onnx": llama, "big.onnx": llama, "llama.onnx": llama, "a.onnx": llama,
		"b.onnx": ort, "rewritten.onnx": ort, "model_rewritten.onnx": ort, "ort_optimized.onnx": ort,
		"llama31.onnx": corpusModel("rope_llama3"), "gpt2.onnx": corpusModel("learned_gpt2"),
		"marian.onnx": corpusModel("sinusoidal_marian"), "model_fp16.onnx": corpusModel("rope_llama_fp16"),
		"models/llama.onnx": llama, "models/gpt2.onnx": corpusModel("learned_gpt2"),
		"model_8k.onnx": corpusModel("rope_linear"),
	} {
		place(name, src)
	}
	data := corpusFile("rope_llama", "test_data_set_0")
	es, _ := os.ReadDir(data)
	for _, e := range es {
		place(filepath.Join("test_data_set_0", e.Name()), filepath.Join(data, e.Name()))
	}
	m, err := graph.Load(llama)
	if err != nil {
		t.Fatal(err)
	}
	feeds, err := kernels.ReadInputs(data, m)
	if err != nil {
		t.Fatal(err)
	}
	writeNPZ(t, filepath.Join(w, "feeds.npz"), feeds)
	os.Mkdir(filepath.Join(w, "internal"), 0o755)
	// Models the examples start from that onnxpe makes: RoPE fused into
	// com.microsoft RotaryEmbedding, weights in a side file.
	for _, args := range [][]string{
		{"rewrite", llama, "-o", filepath.Join(w, "fused.onnx")},
		{"rewrite", llama, "-o", filepath.Join(w, "fused_ms.onnx")},
		{"convert", llama, "-o", filepath.Join(w, "split.onnx"), "--external-data"},
		{"audit", llama, "--json", "-o", filepath.Join(w, "audit-v1.json")},
		{"audit", corpusModel("rope_linear"), "--json", "-o", filepath.Join(w, "audit-v2.json")},
	} {
		if code, _, errOut := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: exit %d %s", args, code, errOut)
		}
	}
	t.Chdir(w)

	outputs := []string{"-o", "--output", "--junit", "--outputs", "--sarif"}
	ran, skipped := 0, 0
	root := NewRootCmd(&IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}})
	for _, c := range append([]*cobra.Command{root}, root.Commands()...) {
		for _, line := range strings.Split(c.Example, "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			ex := line
			// A shell pipe and a comment after two spaces are not onnxpe's.
			line, _, _ = strings.Cut(line, " | ")
			if i := strings.Index(line, "  "); i >= 0 {
				line = line[:i]
			}
			args := strings.Fields(line)
			if args[0] != "onnxpe" {
				t.Errorf("example %q does not start with onnxpe", ex)
				continue
			}
			args = args[1:]
			if slices.Contains(args, "--runtime") && (!verify.ORTAvailable() || os.Getenv("ONNXPE_ORT_LIB") == "") {
				skipped++
				t.Logf("skipped (needs a build with the ort tag and ONNXPE_ORT_LIB): %s", ex)
				continue
			}
			if args[0] == "extend" && !slices.Contains(args, "--dry-run") {
				args = append(args, "--dry-run")
			}
			var expanded []string
			for i, a := range args {
				if len(a) > 2 && strings.HasPrefix(a, "'") && strings.HasSuffix(a, "'") {
					// Quoted: the shell leaves the pattern to onnxpe.
					expanded = append(expanded, strings.Trim(a, "'"))
					continue
				}
				if strings.ContainsAny(a, "*?[") {
					ms, _ := filepath.Glob(a)
					if len(ms) == 0 {
						t.Errorf("example %q: %s matches no bundled file", ex, a)
					}
					expanded = append(expanded, ms...)
					continue
				}
				isOut := i > 0 && slices.Contains(outputs, args[i-1])
				if !isOut && !strings.HasPrefix(a, "-") && (strings.HasSuffix(a, ".onnx") || strings.HasSuffix(a, ".npz") || strings.HasPrefix(a, "test_data")) {
					if _, err := os.Stat(a); err != nil {
						t.Errorf("example %q reads %s, which this test does not provide: place a bundled model under that name", ex, a)
					}
				}
				expanded = append(expanded, a)
			}
			code, _, errOut := runCLI(t, expanded...)
			ran++
			check := code == ExitCheckFailed && (args[0] == "verify" || args[0] == "audit" || args[0] == "diff")
			if code != 0 && !check {
				t.Errorf("example %q: exit %d: %s", ex, code, errOut)
			}
		}
	}
	if ran < 30 {
		t.Errorf("ran %d examples, expected every command's (at least 30)", ran)
	}
	t.Logf("%d examples ran, %d skipped", ran, skipped)
}

// TestCodegenHelpNamesEveryGenerator: `onnxpe codegen --help` lists the
// functions of every scheme that has a code generator (a scheme added to
// the list with one must be added to the help's table).
func TestCodegenHelpNamesEveryGenerator(t *testing.T) {
	code, out, _ := runCLI(t, "codegen", "--help")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, s := range schemes.All {
		if s.Codegen != nil && !strings.Contains(out, "\n  "+s.Name) {
			t.Errorf("codegen --help does not list the functions of %s", s.Name)
		}
	}
}
