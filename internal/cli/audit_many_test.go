package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// makeZoo writes, in the current folder, a folder zoo of models as a
// model zoo holds them: good models at three depths, one with its weights
// in a side file named *.onnx, one with a side file .data; a truncated
// model; test data, notes and a hidden folder holding a model.
func makeZoo(t *testing.T) {
	t.Helper()
	copyTo := func(dst, src string) {
		t.Helper()
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		os.MkdirAll(filepath.Dir(dst), 0o755)
		if err := os.WriteFile(dst, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyTo("zoo/llama.onnx", corpusModel("rope_llama"))
	copyTo("zoo/nested/deeper/bloom.onnx", corpusModel("alibi_bloom"))
	copyTo("zoo/.cache/hidden.onnx", corpusModel("t5_encoder"))
	for _, args := range [][]string{
		{"convert", corpusModel("learned_gpt2"), "-o", "zoo/gpt2.onnx", "--external-data", "--threshold", "1024"},
		{"convert", corpusModel("rope_neox"), "-o", "zoo/nested/neox.onnx", "--external-data", "--threshold", "1024", "--location", "neox_weights.onnx"},
	} {
		if code, _, errOut := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
	}
	for _, side := range []string{"zoo/gpt2.onnx.data", "zoo/nested/neox_weights.onnx"} {
		if _, err := os.Stat(side); err != nil {
			t.Fatalf("the side file %s was not written: %v", side, err)
		}
	}
	llama, _ := os.ReadFile("zoo/llama.onnx")
	os.WriteFile("zoo/corrupt.onnx", llama[:len(llama)/3], 0o644)
	copyTo("zoo/test_data_set_0/input_0.pb", corpusFile("rope_llama", "test_data_set_0/input_0.pb"))
	os.WriteFile("zoo/notes.txt", []byte("models of the zoo\n"), 0o644)
}

// zooModels are the entries an audit of the zoo gives, in order, with
// the scheme of each ("" for the unreadable one).
var zooModels = []struct{ path, scheme string }{
	{"zoo/corrupt.onnx", ""},
	{"zoo/gpt2.onnx", "learned_absolute"},
	{"zoo/llama.onnx", "rope"},
	{"zoo/nested/deeper/bloom.onnx", "alibi"},
	{"zoo/nested/neox.onnx", "rope"},
}

// TestAuditFolderGlobAndJobs is the acceptance test of auditing a zoo:
// the folder gives every good model (at any depth) and the truncated one
// with its error, never a side file (.data, test data, a side file named
// *.onnx, a hidden folder's model); exit 2 with one line; the same JSON
// through a quoted ** pattern and with --jobs 1; every entry valid
// against its schema; the table has a row for the unreadable model and
// the summary; without it exit 0, and a policy exits 1.
func TestAuditFolderGlobAndJobs(t *testing.T) {
	t.Chdir(t.TempDir())
	makeZoo(t)
	reportSchema := compileSchema(t, "report.schema.json", passes.ReportSchema)
	failSchema := compileDefs(t, "reports.schema.json", ReportsSchema, "audit_error")["audit_error"]

	code, folderJSON, errOut := runCLI(t, "audit", "zoo", "--json", "--jobs", "2")
	if code != ExitBadInput || strings.Count(errOut, "\n") != 1 ||
		!strings.Contains(errOut, "onnxpe: audit: 1 model of 5 could not be read: zoo/corrupt.onnx: ") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	v, err := oneJSON(folderJSON)
	if err != nil {
		t.Fatalf("not one JSON document: %v\n%s", err, folderJSON)
	}
	entries, ok := v.([]any)
	if !ok || len(entries) != len(zooModels) {
		t.Fatalf("want a list of %d entries:\n%s", len(zooModels), folderJSON)
	}
	for i, e := range entries {
		m := e.(map[string]any)
		want := zooModels[i]
		if m["model"] != want.path {
			t.Errorf("entry %d is %v, want %s", i, m["model"], want.path)
			continue
		}
		if want.scheme == "" {
			if err := failSchema.Validate(e); err != nil {
				t.Errorf("%s: not an audit_error entry: %v", want.path, err)
			}
			body := m["error"].(map[string]any)
			if body["kind"] != "bad_input" || !strings.Contains(body["message"].(string), "zoo/corrupt.onnx: ") {
				t.Errorf("%s: error %v", want.path, body)
			}
			continue
		}
		if err := reportSchema.Validate(e); err != nil {
			t.Errorf("%s: not a report: %v", want.path, err)
		}
		if s := m["schemes"].([]any); len(s) != 1 || s[0] != want.scheme {
			t.Errorf("%s: schemes %v, want [%s]", want.path, s, want.scheme)
		}
	}
	for _, args := range [][]string{
		{"audit", "zoo/**/*.onnx", "--json", "--jobs", "2"},
		{"audit", "zoo", "--json", "--jobs", "1"},
		{"audit", "zoo/", "--json"},
		{"audit", "zoo/*.onnx", "zoo/nested", "--json"},
	} {
		code, out, _ := runCLI(t, args...)
		if code != ExitBadInput || out != folderJSON {
			t.Errorf("%v: exit %d, JSON differs from the folder's:\n%s", args, code, out)
		}
	}

	code, table, _ := runCLI(t, "audit", "zoo")
	flat := strings.Join(strings.Fields(table), " ")
	for _, want := range []string{
		"zoo/corrupt.onnx: could not be audited: not an ONNX model: ",
		"zoo/llama.onnx: rope (2 attention layers)",
		"zoo/corrupt.onnx (could not be audited) - -",
		"5 models: 4 audited, 1 could not be audited",
		"MODELS FINDINGS rope 2 2",
		"rope rotary_dim 16 (1), 8 (1)",
	} {
		if code != ExitBadInput || !strings.Contains(flat, want) {
			t.Errorf("exit %d; the table has no %q:\n%s", code, want, table)
		}
	}
	if strings.Contains(table, "neox_weights") || strings.Contains(table, "hidden") || strings.Contains(table, ".data") {
		t.Errorf("a side file or hidden model was audited:\n%s", table)
	}

	os.Remove("zoo/corrupt.onnx")
	if code, out, errOut := runCLI(t, "audit", "zoo", "--summary"); code != 0 || errOut != "" || !strings.Contains(out, "4 models audited") {
		t.Errorf("without the corrupt model: exit %d, stderr %q:\n%s", code, errOut, out)
	}
	code, _, errOut = runCLI(t, "audit", "zoo", "--require", "rope")
	if code != ExitCheckFailed || !strings.Contains(errOut, "zoo/gpt2.onnx: required scheme rope not found") ||
		!strings.Contains(errOut, "zoo/nested/deeper/bloom.onnx: required scheme rope not found") {
		t.Errorf("--require rope: exit %d, stderr %q", code, errOut)
	}
	os.WriteFile("zoo/corrupt.onnx", []byte("not a model"), 0o644)
	code, _, errOut = runCLI(t, "audit", "zoo", "--require", "rope")
	if code != ExitBadInput || !strings.Contains(errOut, "could not be read: zoo/corrupt.onnx") || !strings.Contains(errOut, "2 policy violations: ") {
		t.Errorf("unreadable model and a policy: exit %d, stderr %q", code, errOut)
	}
}

// TestAuditSummary: the summary counts the models of each scheme and
// lists the params that differ across the models of a scheme, with how
// many models have each value; markdown says the same.
func TestAuditSummary(t *testing.T) {
	models := []string{corpusModel("rope_llama"), corpusModel("rope_qwen2"), corpusModel("rope_llama3"), corpusModel("learned_gpt2")}
	code, out, errOut := runCLI(t, append([]string{"audit", "--summary"}, models...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"4 models audited",
		"SCHEME MODELS FINDINGS rope 3 3 learned_absolute 1 1",
		"rope base 10000 (1), 1000000 (1), 500000 (1)",
		"rope num_heads 2 (2), 4 (1)",
		"rope scaling \"none\" (2), \"llama3\" (1)",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("the summary has no %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "rope  head_dim") || strings.Contains(out, "SCHEME  LAYERS  FUSED") {
		t.Errorf("--summary lists a param all models share, or a model's findings:\n%s", out)
	}
	code, md, _ := runCLI(t, append([]string{"audit", "--format", "markdown"}, models...)...)
	if code != 0 || !strings.Contains(md, "| rope | `base` | `10000` (1), `1000000` (1), `500000` (1) |") || !strings.Contains(md, "| rope | 3 | 3 |") {
		t.Errorf("markdown summary:\n%s", md)
	}
}

// TestAuditProgress: on a terminal (standard error) the audit of several
// models draws a line with the count, the model and the time taken, and
// clears it; piped, it prints nothing.
func TestAuditProgress(t *testing.T) {
	models := []string{corpusModel("rope_llama"), corpusModel("nope_causal")}
	for _, term := range []bool{true, false} {
		var out, errOut bytes.Buffer
		opts := &auditOptions{IO: &IOStreams{Out: &out, ErrOut: &errOut, ErrIsTerminal: term}, Models: models, Format: "table", Jobs: 1, quickProgress: true}
		if err := auditRun(opts); err != nil {
			t.Fatal(err)
		}
		got := errOut.String()
		if !term {
			if got != "" {
				t.Errorf("piped: %q on stderr", got)
			}
			continue
		}
		// The model's path keeps its end when the line is too long for
		// 80 columns (the temporary folder of a fresh clone makes it so).
		for i, m := range models {
			want := fmt.Sprintf("\r\033[Kaudit %d/2: %s (0s)", i+1, fitLeft(m, progressWidth-len("audit 1/2: ")-len(" (0s)")))
			if !strings.Contains(got, want) {
				t.Errorf("on a terminal: no %q in %q", want, got)
			}
		}
		for _, line := range strings.Split(got, "\r\033[K") {
			if n := len([]rune(line)); n > progressWidth {
				t.Errorf("a progress line of %d runes, over %d: %q", n, progressWidth, line)
			}
		}
		if !strings.HasSuffix(got, "\r\033[K") {
			t.Errorf("the line is not cleared at the end: %q", got)
		}
	}
}

// TestAuditMemoryIsPerModel: what the audit keeps of a model once it is
// audited (its report, the HTML section) holds none of its tensors, so
// that memory is that of the models being audited, not of all of them.
// Each model's initializers are watched through weak pointers: after the
// audit of all, with the results alive, a collection frees every one.
func TestAuditMemoryIsPerModel(t *testing.T) {
	models := []string{corpusModel("rope_llama"), corpusModel("alibi_bloom"), corpusModel("learned_gpt2"), corpusModel("t5_encoder")}
	files := make([]auditFile, len(models))
	for i, m := range models {
		files[i] = auditFile{path: m}
	}
	for _, format := range []string{"json", "html"} {
		var watched []weak.Pointer[graph.Tensor]
		var mu = make(chan struct{}, 1)
		mu <- struct{}{}
		opts := &auditOptions{IO: &IOStreams{Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, Format: format, Jobs: 2,
			loadedHook: func(_ string, m *graph.Model) {
				<-mu
				for _, v := range m.Graph.Initializers {
					watched = append(watched, weak.Make(v.Const))
				}
				mu <- struct{}{}
			}}
		results, err := auditModels(opts, files)
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		runtime.GC()
		alive := 0
		for _, w := range watched {
			if w.Value() != nil {
				alive++
			}
		}
		if alive > 0 || len(watched) == 0 {
			t.Errorf("--format %s: %d of %d initializers of the audited models are still reachable from the results", format, alive, len(watched))
		}
		for _, r := range results {
			if r.err != nil || r.report == nil || format == "html" && r.section == nil {
				t.Errorf("--format %s: %s: %v", format, r.path, r.err)
			}
		}
		runtime.KeepAlive(results)
	}
}

// TestAuditPanicOnOneModel: a model whose audit panics is an entry of
// kind internal; the others are reported; exit 3 with one line.
func TestAuditPanicOnOneModel(t *testing.T) {
	bad := corpusModel("nope_causal")
	var out, errOut bytes.Buffer
	opts := &auditOptions{IO: &IOStreams{Out: &out, ErrOut: &errOut}, Models: []string{corpusModel("rope_llama"), bad}, Format: "json",
		loadedHook: func(path string, _ *graph.Model) {
			if path == bad {
				var m map[string]int
				m["x"]++ // a runtime panic
			}
		}}
	err := auditRun(opts)
	if exitCode(err) != ExitInternal || !errors.Is(err, kernels.ErrInternal) ||
		!strings.HasPrefix(err.Error(), "audit: 1 model of 2 failed with an internal error: "+bad+": audit: panic: assignment to entry in nil map") {
		t.Fatalf("exit %d: %v", exitCode(err), err)
	}
	var entries []map[string]any
	if err := json.Unmarshal(out.Bytes(), &entries); err != nil || len(entries) != 2 {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if entries[0]["schemes"] == nil || entries[1]["error"].(map[string]any)["kind"] != "internal" {
		t.Errorf("entries:\n%s", out.String())
	}
	failSchema := compileDefs(t, "reports.schema.json", ReportsSchema, "audit_error")["audit_error"]
	v, _ := jsonschema.UnmarshalJSON(strings.NewReader(out.String()))
	if err := failSchema.Validate(v.([]any)[1]); err != nil {
		t.Error(err)
	}
}
