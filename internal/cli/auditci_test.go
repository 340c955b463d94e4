package cli

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/passes"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// sarifSchema compiles the vendored SARIF 2.1.0 schema
// (testdata/sarif, see its NOTICE.md), with format assertions on: a URI
// that is not one fails.
func sarifSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "sarif", "sarif-schema-2.1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("sarif-schema-2.1.0.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("sarif-schema-2.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// validSARIF checks b against the SARIF schema and decodes it.
func validSARIF(t *testing.T, s *jsonschema.Schema, b []byte) map[string]any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(string(b)))
	if err != nil {
		t.Fatalf("the SARIF log is not JSON: %v", err)
	}
	if err := s.Validate(v); err != nil {
		t.Fatalf("the SARIF log does not follow the SARIF 2.1.0 schema: %v\n%s", err, b)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	return m
}

// sarifResults lists a log's results as "ruleId uri".
func sarifResults(log map[string]any) []string {
	var out []string
	run := log["runs"].([]any)[0].(map[string]any)
	for _, r := range run["results"].([]any) {
		r := r.(map[string]any)
		loc := r["locations"].([]any)[0].(map[string]any)["physicalLocation"].(map[string]any)["artifactLocation"].(map[string]any)
		out = append(out, r["ruleId"].(string)+" "+loc["uri"].(string))
	}
	sort.Strings(out)
	return out
}

// junitDoc is what a JUnit reader takes of a report.
type junitDoc struct {
	XMLName xml.Name `xml:"testsuites"`
	Tests   int      `xml:"tests,attr"`
	Fails   int      `xml:"failures,attr"`
	Errors  int      `xml:"errors,attr"`
	Suites  []struct {
		Name  string `xml:"name,attr"`
		Tests int    `xml:"tests,attr"`
		Cases []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// TestAuditSARIFAndJUnit is the acceptance test of the CI formats: the
// audit of a zoo with three policies writes a SARIF log valid against the
// SARIF 2.1.0 schema with exactly one result per policy violation, each
// at its model's file (relative to %SRCROOT%), the unreadable model a
// notification; and JUnit XML with one test case per model and policy:
// failed where the policy is broken, in error for the unreadable model.
func TestAuditSARIFAndJUnit(t *testing.T) {
	schema := sarifSchema(t)
	t.Chdir(t.TempDir())
	makeZoo(t)
	code, _, errOut := runCLI(t, "audit", "zoo", "--require", "rope", "--forbid", "alibi", "--max-positions-at-least", "100",
		"--sarif", "audit.sarif", "--junit", "audit.xml", "--summary")
	if code != ExitBadInput {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile("audit.sarif")
	if err != nil {
		t.Fatal(err)
	}
	log := validSARIF(t, schema, b)
	// The violations, from the zoo's models (zooModels): GPT-2 and BLOOM
	// have no RoPE, BLOOM has ALiBi, GPT-2's table and NeoX's cos/sin
	// cache hold 64 positions; Llama computes its RoPE (no table).
	want := []string{
		"onnxpe/forbid zoo/nested/deeper/bloom.onnx",
		"onnxpe/max-positions-at-least zoo/gpt2.onnx",
		"onnxpe/max-positions-at-least zoo/nested/neox.onnx",
		"onnxpe/require zoo/gpt2.onnx",
		"onnxpe/require zoo/nested/deeper/bloom.onnx",
	}
	if got := sarifResults(log); !slices.Equal(got, want) {
		t.Errorf("SARIF results:\n%v\nwant\n%v", got, want)
	}
	run := log["runs"].([]any)[0].(map[string]any)
	inv := run["invocations"].([]any)[0].(map[string]any)
	notes, _ := inv["toolExecutionNotifications"].([]any)
	if inv["exitCode"] != float64(ExitBadInput) || len(notes) != 1 || !strings.Contains(notes[0].(map[string]any)["message"].(map[string]any)["text"].(string), "zoo/corrupt.onnx") {
		t.Errorf("invocation: %v", inv)
	}
	for _, r := range run["results"].([]any) {
		r := r.(map[string]any)
		loc := r["locations"].([]any)[0].(map[string]any)["physicalLocation"].(map[string]any)["artifactLocation"].(map[string]any)
		if loc["uriBaseId"] != "%SRCROOT%" || r["level"] != "error" || r["message"].(map[string]any)["text"] == "" {
			t.Errorf("result %v", r)
		}
	}

	x, err := os.ReadFile("audit.xml")
	if err != nil {
		t.Fatal(err)
	}
	var doc junitDoc
	if err := xml.Unmarshal(x, &doc); err != nil {
		t.Fatalf("the JUnit file does not parse: %v\n%s", err, x)
	}
	policies := []string{"require rope", "forbid alibi", "max-positions-at-least 100", "known"}
	if len(doc.Suites) != 1 || doc.Tests != len(zooModels)*len(policies) || doc.Suites[0].Tests != doc.Tests || len(doc.Suites[0].Cases) != doc.Tests {
		t.Fatalf("want %d cases, one per model and policy:\n%s", len(zooModels)*len(policies), x)
	}
	cases := map[string]string{}
	for _, c := range doc.Suites[0].Cases {
		state := "pass"
		switch {
		case c.Failure != nil:
			state = "fail"
		case c.Error != nil:
			state = "error"
		}
		cases[c.Name] = state
	}
	failed := map[string]bool{}
	for _, w := range want {
		rule, model, _ := strings.Cut(strings.TrimPrefix(w, "onnxpe/"), " ")
		for _, p := range policies {
			if p == rule || strings.HasPrefix(p, rule+" ") {
				failed[model+": "+p] = true
			}
		}
	}
	for _, m := range zooModels {
		for _, p := range policies {
			name := m.path + ": " + p
			wantState := "pass"
			switch {
			case m.scheme == "":
				wantState = "error"
			case failed[name]:
				wantState = "fail"
			}
			if cases[name] != wantState {
				t.Errorf("case %q is %q, want %q", name, cases[name], wantState)
			}
		}
	}
	if doc.Fails != len(want) || doc.Errors != len(policies) {
		t.Errorf("%d failures, %d errors; want %d and %d", doc.Fails, doc.Errors, len(want), len(policies))
	}

	// No policy: one case per model; no violation, no result.
	os.Remove("zoo/corrupt.onnx")
	if code, _, errOut := runCLI(t, "audit", "zoo", "--sarif", "audit.sarif", "--junit", "audit.xml", "--summary"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, _ = os.ReadFile("audit.sarif")
	if got := sarifResults(validSARIF(t, schema, b)); len(got) != 0 {
		t.Errorf("results without a policy: %v", got)
	}
	x, _ = os.ReadFile("audit.xml")
	doc = junitDoc{}
	if err := xml.Unmarshal(x, &doc); err != nil || doc.Tests != len(zooModels)-1 || doc.Fails+doc.Errors != 0 || !strings.HasSuffix(doc.Suites[0].Cases[0].Name, ": audit") {
		t.Errorf("JUnit without a policy: %v\n%s", err, x)
	}
}

// TestSARIFReportsUnknownFindings: every finding of scheme unknown is a
// result whose message is its notes, at its model's file; the log stays
// valid for a model path that is absolute or has characters a URI
// escapes. The reports are made here (the audit's unknown scheme is the
// issue of its own).
func TestSARIFReportsUnknownFindings(t *testing.T) {
	schema := sarifSchema(t)
	abs := filepath.Join(t.TempDir(), "my models", "vit #2.onnx")
	results := []*auditResult{
		{path: "zoo/odd.onnx", report: &passes.Report{Model: "zoo/odd.onnx", Schemes: []string{"rope", unknownScheme},
			Layers: []passes.LayerScheme{{Index: 0, Scheme: "rope"}, {Index: 1, Scheme: unknownScheme}},
			Findings: []*passes.Finding{
				{Scheme: "rope", Layers: []int{0}},
				{Scheme: unknownScheme, Layers: []int{1}, Notes: []string{"fits_no_scheme: the scores of layer 1 depend on i - j but fit no scheme", "probed at 16 and 64 positions"}},
			}}},
		{path: abs, report: &passes.Report{Model: abs, Schemes: []string{unknownScheme},
			Findings: []*passes.Finding{{Scheme: unknownScheme, Notes: []string{"no_attention_found"}}}}},
		{path: "zoo/fine.onnx", report: &passes.Report{Model: "zoo/fine.onnx", Schemes: []string{"nope"}, Findings: []*passes.Finding{{Scheme: "nope", Layers: []int{0}}}}},
	}
	b, err := auditSARIF(results, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	log := validSARIF(t, schema, b)
	run := log["runs"].([]any)[0].(map[string]any)
	rs := run["results"].([]any)
	if len(rs) != 2 {
		t.Fatalf("%d results, want one per unknown finding (2):\n%s", len(rs), b)
	}
	for i, want := range []struct{ uri, msg string }{
		{"zoo/odd.onnx", "zoo/odd.onnx: layers 1: fits_no_scheme: the scores of layer 1 depend on i - j but fit no scheme; probed at 16 and 64 positions"},
		{"file://" + filepath.ToSlash(filepath.Dir(filepath.Dir(abs))) + "/my%20models/vit%20%232.onnx", abs + ": no attention layer: no_attention_found"},
	} {
		r := rs[i].(map[string]any)
		loc := r["locations"].([]any)[0].(map[string]any)["physicalLocation"].(map[string]any)["artifactLocation"].(map[string]any)
		if r["ruleId"] != "onnxpe/unknown-encoding" || r["level"] != "warning" || loc["uri"] != want.uri || r["message"].(map[string]any)["text"] != want.msg {
			t.Errorf("result %d: %v; want at %s: %s", i, r, want.uri, want.msg)
		}
	}
	// A violation and an unknown finding in one log; an internal error
	// is an execution that did not succeed.
	p := policy{Flag: "require", Arg: "rope", scheme: "rope"}
	v := p.check("zoo/fine.onnx", results[2].report)
	b, _ = auditSARIF(results, v, ExitInternal)
	log = validSARIF(t, schema, b)
	if got := sarifResults(log); len(got) != 3 || !slices.Contains(got, "onnxpe/require zoo/fine.onnx") {
		t.Errorf("results %v", got)
	}
	inv := log["runs"].([]any)[0].(map[string]any)["invocations"].([]any)[0].(map[string]any)
	if inv["executionSuccessful"] != false {
		t.Errorf("invocation %v", inv)
	}
}
