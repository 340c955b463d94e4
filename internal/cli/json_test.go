package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/verify"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/spf13/cobra"
)

// schemaCompiler is a compiler holding the schema doc as resource name.
func schemaCompiler(t *testing.T, name string, doc []byte) *jsonschema.Compiler {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(name, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

// compileSchema compiles one of the JSON Schemas the command line
// promises.
func compileSchema(t *testing.T, name string, doc []byte) *jsonschema.Schema {
	t.Helper()
	s, err := schemaCompiler(t, name, doc).Compile(name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

// compileDefs compiles the definitions names of the schema doc.
func compileDefs(t *testing.T, name string, doc []byte, names ...string) map[string]*jsonschema.Schema {
	t.Helper()
	c := schemaCompiler(t, name, doc)
	out := map[string]*jsonschema.Schema{}
	for _, n := range names {
		s, err := c.Compile(name + "#/$defs/" + n)
		if err != nil {
			t.Fatalf("%s: %s: %v", name, n, err)
		}
		out[n] = s
	}
	return out
}

// TestPanicInAuditWorkerExits3: a panic on one of the audit's worker
// goroutines (several models audited at once) comes back to the command
// as an error wrapping kernels.ErrInternal: exit 3 with one line on
// stderr, not Go's crash with every goroutine's trace; with --json, the
// error object of kind internal.
func TestPanicInAuditWorkerExits3(t *testing.T) {
	bad := corpusModel("nope_causal")
	hook := func(path string) {
		if path == bad {
			var m map[string]int
			m["x"]++ // assignment to a nil map: a runtime panic
		}
	}
	withHook := func(ios *IOStreams) *cobra.Command {
		root := NewRootCmd(ios)
		for _, c := range root.Commands() {
			if c.Name() == "audit" {
				root.RemoveCommand(c)
			}
		}
		root.AddCommand(newCmdAudit(&auditOptions{IO: ios, workerHook: hook}))
		return root
	}
	checkPanicExits3(t, withHook, "onnxpe: internal error: audit: panic: assignment to entry in nil map\n",
		[]string{"audit", corpusModel("rope_llama"), bad, "--jobs", "2"},
		[]string{"audit", bad, corpusModel("rope_llama"), "--jobs", "1", "--json"})
	// What the command gets back.
	_, err := auditModels(&auditOptions{IO: &IOStreams{ErrOut: io.Discard}, workerHook: hook}, []auditFile{{path: bad}})
	if !errors.Is(err, kernels.ErrInternal) {
		t.Errorf("auditModels: %v, want an error wrapping kernels.ErrInternal", err)
	}
}

// oneJSON decodes out, which must hold exactly one JSON value
// (jsonschema.UnmarshalJSON refuses anything after it).
func oneJSON(out string) (any, error) { return jsonschema.UnmarshalJSON(strings.NewReader(out)) }

// checkErrorJSON checks the error object a command given --json prints
// when it fails: valid against error.schema.json, with the exit code, the
// command's name and the message of the line on stderr.
func checkErrorJSON(t *testing.T, s *jsonschema.Schema, args []string, code int, out, errOut string) {
	t.Helper()
	v, err := oneJSON(out)
	if err != nil {
		t.Errorf("%v: exit %d, stdout is not one JSON document (%v): %q", args, code, err, out)
		return
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("%v: the error object does not follow error.schema.json: %v\n%s", args, err, out)
		return
	}
	var r errorReport
	json.Unmarshal([]byte(out), &r)
	line := strings.TrimSuffix(errOut, "\n")
	line = strings.TrimPrefix(strings.TrimPrefix(line, "onnxpe: "), "internal error: ")
	if r.Error.ExitCode != code || r.Error.Message != line {
		t.Errorf("%v: exit %d, stderr %q; the error object says exit %d, %q", args, code, errOut, r.Error.ExitCode, r.Error.Message)
	}
	if cmd, _, err := NewRootCmd(&IOStreams{}).Find(args); err == nil && cmd.Parent() != nil && r.Error.Command != cmd.Name() {
		t.Errorf("%v: the error object names the command %q", args, r.Error.Command)
	}
}

// TestJSONOnEveryOutcome runs every command that takes --json on success
// and on failures (exit 1) with --json: standard output holds exactly one
// JSON document, the command's report (the audit's valid against
// passes/report.schema.json) or, when the command failed before it had
// one, the error object of error.schema.json; verify's reports (also the
// one inside rewrite's) valid against verify/report.schema.json, the other
// commands' against their definition in reports.schema.json. Every command
// with a --json flag has a successful case here and a schema.
func TestJSONOnEveryOutcome(t *testing.T) {
	reportSchema := compileSchema(t, "report.schema.json", passes.ReportSchema)
	verifySchema := compileSchema(t, "verify.schema.json", verify.ReportSchema)
	precisionSchema := compileSchema(t, "precision.schema.json", verify.PrecisionSchema)
	commandSchemas := compileDefs(t, "reports.schema.json", ReportsSchema, "inspect", "convert", "run", "codegen", "rewrite", "extend", "version", "audit_error", "diff")
	errorSchema := compileSchema(t, "error.schema.json", ErrorSchema)
	dir := t.TempDir()
	o := func(name string) string { return filepath.Join(dir, name) }
	g := corpusModel("rope_llama")
	data := corpusFile("rope_llama", "test_data_set_0")
	// A copy of GPT-2 whose last position's row differs: verify finds it.
	differs := saveEdited(t, "learned_gpt2", func(m *graph.Model) {
		for _, v := range m.Graph.Initializers {
			if v.Name == "wpe.weight" {
				d, _ := v.Const.Data()
				w := append([]float32(nil), d.([]float32)...)
				w[63*32+5] += 0.01
				v.Const, _ = graph.NewTensor(v.Name, graph.Float, v.Const.Dims(), w)
				return
			}
		}
		t.Fatal("no wpe.weight")
	})
	// A folder of two models, one of them unreadable.
	zoo := o("zoo")
	os.MkdirAll(zoo, 0o755)
	if b, err := os.ReadFile(g); err == nil {
		os.WriteFile(filepath.Join(zoo, "a.onnx"), b, 0o644)
		os.WriteFile(filepath.Join(zoo, "b.onnx"), b[:100], 0o644)
	}
	const (
		report  = "report"    // passes/report.schema.json: one report, or an array of them (reports.schema.json#/$defs/audit_error for unreadable models)
		verRep  = "verify"    // verify/report.schema.json (rewrite: its "verify" object)
		precRep = "precision" // verify/precision.schema.json
		errObj  = "error"     // error.schema.json
		anyJSON = "object"    // one JSON object (the command's report; no schema published)
	)
	cases := []struct {
		args []string
		code int
		kind string
	}{
		{[]string{"audit", g, "--json"}, 0, report},
		{[]string{"audit", g, "--format", "json"}, 0, report},
		{[]string{"audit", g, corpusModel("nope_causal"), "--json"}, 0, report},
		{[]string{"audit", g, "--json", "--forbid", "rope"}, 1, report},
		{[]string{"audit", zoo, "--json"}, 2, report},
		{[]string{"inspect", g, "--json"}, 0, anyJSON},
		{[]string{"convert", g, "-o", o("c.onnx"), "--json"}, 0, anyJSON},
		{[]string{"convert", g, "-o", o("x.onnx"), "--external-data", "--json"}, 0, anyJSON},
		{[]string{"rewrite", corpusModel("nope_causal"), "--dry-run", "--json"}, 0, anyJSON},
		{[]string{"extend", g, "--to", "128", "--method", "linear", "--original-max-positions", "32", "--dry-run", "--json"}, 0, anyJSON},
		{[]string{"rewrite", g, "-o", o("r.onnx"), "--json"}, 0, verRep},
		{[]string{"extend", g, "-o", o("e.onnx"), "--to", "128", "--method", "linear", "--original-max-positions", "32", "--json"}, 0, anyJSON},
		{[]string{"codegen", g, "--lang", "go", "--package", "pe", "-o", o("pe"), "--json"}, 0, anyJSON},
		{[]string{"codegen", corpusModel("nope_causal"), "--lang", "go", "--package", "pe", "-o", o("nope"), "--json"}, 1, errObj},
		{[]string{"verify", g, g, "--json"}, 0, verRep},
		{[]string{"verify", g, "--against", data, "--json"}, 0, verRep},
		{[]string{"verify", corpusModel("learned_gpt2"), differs, "--json"}, 1, verRep},
		{[]string{"verify", "--precision", g, "--json", "--bound", "1e-3"}, 0, precRep},
		{[]string{"verify", "--precision", g, "--json"}, 1, precRep},
		{[]string{"verify", "--precision", corpusModel("sinusoidal_interleaved_computed"), "--json", "--as", "float16"}, 0, precRep},
		{[]string{"run", g, "--inputs", data, "--json"}, 0, anyJSON},
		{[]string{"version", "--json"}, 0, anyJSON},
		{[]string{"diff", g, g, "--json"}, 0, anyJSON},
		{[]string{"diff", g, corpusModel("rope_llama3"), "--json"}, 1, anyJSON},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		code, out, errOut := runCLI(t, c.args...)
		if code != c.code {
			t.Errorf("%v: exit %d, want %d (stderr %q)", c.args, code, c.code, errOut)
			continue
		}
		if code == 0 {
			covered[c.args[0]] = true
		}
		if code != 0 && strings.Count(errOut, "\n") < 1 {
			t.Errorf("%v: exit %d and nothing on stderr", c.args, code)
		}
		if c.kind == errObj {
			checkErrorJSON(t, errorSchema, c.args, code, out, errOut)
			continue
		}
		v, err := oneJSON(out)
		if err != nil {
			t.Errorf("%v: stdout is not one JSON document (%v): %q", c.args, err, out)
			continue
		}
		if obj, ok := v.(map[string]any); ok {
			if _, isErr := obj["error"]; isErr && len(obj) == 1 {
				t.Errorf("%v: printed the error object, want its report: %s", c.args, out)
			}
		} else if c.kind != report {
			t.Errorf("%v: stdout is not a JSON object: %s", c.args, out)
		}
		if s := commandSchemas[c.args[0]]; s != nil {
			if err := s.Validate(v); err != nil {
				t.Errorf("%v: the report does not follow reports.schema.json#/$defs/%s: %v", c.args, c.args[0], err)
			}
		}
		if c.kind == precRep {
			if err := precisionSchema.Validate(v); err != nil {
				t.Errorf("%v: the precision report does not follow verify/precision.schema.json: %v", c.args, err)
			}
		}
		if c.kind == verRep {
			rep := v
			if c.args[0] == "rewrite" {
				rep = v.(map[string]any)["verify"]
			}
			if err := verifySchema.Validate(rep); err != nil {
				t.Errorf("%v: the verify report does not follow verify/report.schema.json: %v", c.args, err)
			}
		}
		if c.kind == report {
			reports := []any{v}
			if a, ok := v.([]any); ok {
				reports = a
			}
			for _, r := range reports {
				if m, ok := r.(map[string]any); ok && m["error"] != nil {
					if err := commandSchemas["audit_error"].Validate(r); err != nil {
						t.Errorf("%v: the entry does not follow reports.schema.json#/$defs/audit_error: %v", c.args, err)
					}
					continue
				}
				if err := reportSchema.Validate(r); err != nil {
					t.Errorf("%v: the report does not follow passes/report.schema.json: %v", c.args, err)
				}
			}
		}
	}
	for _, cmd := range NewRootCmd(&IOStreams{}).Commands() {
		if cmd.Flags().Lookup("json") == nil {
			continue
		}
		if !covered[cmd.Name()] {
			t.Errorf("onnxpe %s takes --json but no successful case here runs it", cmd.Name())
		}
		if commandSchemas[cmd.Name()] == nil && cmd.Name() != "audit" && cmd.Name() != "verify" {
			t.Errorf("onnxpe %s takes --json but no JSON Schema describes what it prints", cmd.Name())
		}
	}
	t.Logf("%d command lines", len(cases))
}

// TestBadInputWithJSON runs every command line of
// TestBadInputExits2WithOneLine again with --json (those whose command
// takes it, and unknown commands): each still exits 2 with one line on
// stderr and writes nothing, and standard output holds the error object
// (error.schema.json) with that line's message.
func TestBadInputWithJSON(t *testing.T) {
	errorSchema := compileSchema(t, "error.schema.json", ErrorSchema)
	b := newBadInputs(t)
	root := NewRootCmd(&IOStreams{})
	n, skipped := 0, map[string]int{}
	for _, c := range badInputCases(t, b) {
		if cmd, _, err := root.Find(c.args); err == nil && cmd != root && cmd.Flags().Lookup("json") == nil {
			skipped[cmd.Name()]++
			continue
		}
		args := append(slices.Clone(c.args), "--json")
		code, out, errOut := runCLI(t, args...)
		n++
		if code != ExitBadInput || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and one line mentioning %q", args, code, errOut, c.want)
		}
		checkErrorJSON(t, errorSchema, args, code, out, errOut)
		if got := listDir(t, b.out); len(got) != 0 {
			t.Errorf("%v: left %v in the output folder", args, got)
			for _, n := range got {
				os.RemoveAll(filepath.Join(b.out, n))
			}
		}
	}
	t.Logf("%d bad inputs with --json; skipped (no --json flag): %v", n, skipped)
	if n < 100 {
		t.Errorf("only %d bad inputs with --json", n)
	}
}

// TestPanicExits3 runs a command that panics (as a detector meeting a
// model it did not expect would): exit 3 with one line saying it is an
// internal error, not Go's crash (exit 2, which says bad input, and a
// stack on stderr); with --json, the error object of kind internal.
func TestPanicExits3(t *testing.T) {
	withBoom := func(ios *IOStreams) *cobra.Command {
		root := NewRootCmd(ios)
		boom := &cobra.Command{Use: "boom", RunE: func(*cobra.Command, []string) error {
			var m map[string]int
			m["x"]++ // assignment to a nil map: a runtime panic
			return nil
		}}
		boom.Flags().Bool("json", false, "print JSON")
		root.AddCommand(boom)
		return root
	}
	checkPanicExits3(t, withBoom, "onnxpe: internal error: panic: assignment to entry in nil map\n",
		[]string{"boom"}, []string{"boom", "--json"})
}

// checkPanicExits3 runs each command line through the root command that
// newRoot builds and checks what a panic gives: exit 3 and exactly the
// line want on stderr; without --json nothing on stdout, with it the error
// object of kind internal.
func checkPanicExits3(t *testing.T, newRoot func(*IOStreams) *cobra.Command, want string, cmds ...[]string) {
	t.Helper()
	errorSchema := compileSchema(t, "error.schema.json", ErrorSchema)
	for _, args := range cmds {
		var out, errOut bytes.Buffer
		ctx, guard := withGuard(context.Background())
		code := runRoot(ctx, guard, &IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, args, newRoot)
		if code != ExitInternal || errOut.String() != want {
			t.Errorf("%v: exit %d, stderr %q; want 3 and %q", args, code, errOut.String(), want)
		}
		if !slices.Contains(args, "--json") {
			if out.Len() != 0 {
				t.Errorf("%v: stdout %q", args, out.String())
			}
			continue
		}
		checkErrorJSON(t, errorSchema, args, code, out.String(), errOut.String())
		if !strings.Contains(out.String(), `"kind": "internal"`) {
			t.Errorf("%v: %s", args, out.String())
		}
	}
}
