package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/testmodels"
)

func corpusModel(name string) string {
	return filepath.Join(testmodels.Dir(), "models", name, "model.onnx")
}

type auditJSON struct {
	Model    string   `json:"model"`
	Schemes  []string `json:"schemes"`
	Findings []struct {
		Scheme string         `json:"scheme"`
		Layers []int          `json:"layers"`
		Nodes  []string       `json:"nodes"`
		Params map[string]any `json:"params"`
	} `json:"findings"`
}

func TestAuditJSON(t *testing.T) {
	code, out, errOut := runCLI(t, "audit", corpusModel("rope_llama"), "--json", "--name", "rope_llama")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r auditJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("invalid JSON: %v\n%s", err, out)
	}
	if r.Model != "rope_llama" || len(r.Schemes) != 1 || r.Schemes[0] != "rope" || r.Findings[0].Params["base"] != float64(10000) {
		t.Fatalf("unexpected report: %+v", r)
	}
	if len(r.Findings[0].Nodes) == 0 {
		t.Fatal("a RoPE finding without nodes")
	}
}

func TestAuditSeveralModels(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "audit.json")
	code, stdout, errOut := runCLI(t, "audit", corpusModel("rope_llama"), corpusModel("nope_causal"), "--json", "-o", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if stdout != "" {
		t.Errorf("with -o nothing goes to standard output, got %q", stdout)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rs []auditJSON
	if err := json.Unmarshal(b, &rs); err != nil || len(rs) != 2 {
		t.Fatalf("want a JSON array of 2 reports: %v\n%s", err, b)
	}
	if rs[0].Schemes[0] != "rope" || rs[1].Schemes[0] != "nope" {
		t.Errorf("reports out of order or wrong: %v %v", rs[0].Schemes, rs[1].Schemes)
	}
	code, table, _ := runCLI(t, "audit", corpusModel("rope_llama"), corpusModel("nope_causal"))
	if code != 0 || !strings.Contains(table, "MODEL") || !strings.Contains(table, "half_split") {
		t.Errorf("exit %d, table:\n%s", code, table)
	}
	code, md, _ := runCLI(t, "audit", corpusModel("rope_llama"), "--format", "markdown")
	if code != 0 || !strings.Contains(md, "| scheme | layers |") {
		t.Errorf("exit %d, markdown:\n%s", code, md)
	}
}

func TestAuditPolicies(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--require", "rope"}, 0, ""},
		{[]string{"--require", "alibi"}, 1, "required scheme alibi not found"},
		{[]string{"--forbid", "rope"}, 1, "forbidden scheme rope found"},
		{[]string{"--max-positions-at-least", "100"}, 0, ""},
		{[]string{"--max-positions-at-least", "4096"}, 1, "holds 128 positions, fewer than 4096"},
		{[]string{"--require", "wavelets"}, 2, "unknown scheme"},
		{[]string{"--format", "yaml"}, 2, "--format must be"},
	} {
		args := append([]string{"audit", corpusModel("rope_linear")}, tc.args...)
		code, out, errOut := runCLI(t, args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d with %q", tc.args, code, errOut, tc.code, tc.msg)
		}
		if code == 1 && !strings.Contains(out, "rope") {
			t.Errorf("%v: a violated policy still prints the report, got %q", tc.args, out)
		}
	}
}

// TestPoliciesFailClosedOnUnknown: a model the audit cannot tell (here
// one without attention: unknown, no_attention) breaks every policy,
// under the implicit policy "known", unless --allow-unknown is given; the
// audit alone, without a policy, exits 0 and says unknown.
func TestPoliciesFailClosedOnUnknown(t *testing.T) {
	stub := filepath.Join("..", "..", "passes", "testdata", "realmodels", "genai_lfm2_stub_decoder", "model.onnx")
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 0, ""},
		{[]string{"--forbid", "sinusoidal"}, 1, "model.onnx: the audit cannot tell the encoding (unknown: no_attention); policies fail on it unless --allow-unknown"},
		{[]string{"--forbid", "sinusoidal", "--allow-unknown"}, 0, ""},
		{[]string{"--max-positions-at-least", "10"}, 1, "(unknown: no_attention)"},
		{[]string{"--require", "unknown", "--allow-unknown"}, 0, ""},
	} {
		code, out, errOut := runCLI(t, append([]string{"audit", stub}, tc.args...)...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) || !strings.Contains(out, "unknown") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d with %q", tc.args, code, out, errOut, tc.code, tc.msg)
		}
	}
}

// TestAuditBadModelExits2: of two models given, one cannot be read: the
// other is still audited and reported (the list in the -o file holds its
// report and the unreadable one's entry), one line on stderr names the
// bad file, exit 2; standard output holds the error object of --json.
// One model alone that cannot be read is an error as for every command:
// nothing written.
func TestAuditBadModelExits2(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.onnx")
	os.WriteFile(bad, []byte("not a model"), 0o644)
	out := filepath.Join(dir, "out.json")
	code, stdout, errOut := runCLI(t, "audit", corpusModel("rope_llama"), bad, "--json", "-o", out)
	if code != 2 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, "bad.onnx") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, errOut)
	}
	checkErrorJSON(t, compileSchema(t, "error.schema.json", ErrorSchema), []string{"audit"}, code, stdout, errOut)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var entries []map[string]any
	if err := json.Unmarshal(b, &entries); err != nil || len(entries) != 2 {
		t.Fatalf("want a list of 2 entries: %v\n%s", err, b)
	}
	if entries[0]["schemes"] == nil || entries[1]["model"] != bad || entries[1]["error"] == nil {
		t.Errorf("entries: %s", b)
	}
	os.Remove(out)
	code, _, errOut = runCLI(t, "audit", bad, "--json", "-o", out)
	if code != 2 || !strings.Contains(errOut, "bad.onnx") {
		t.Fatalf("one bad model: exit %d, stderr %q", code, errOut)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Error("the failed audit of one model wrote its output file")
	}
}

func TestAuditTrace(t *testing.T) {
	code, _, errOut := runCLI(t, "audit", corpusModel("llama4_nope"), "--trace")
	if code != 0 || !strings.Contains(errOut, "trace:") || !strings.Contains(errOut, "no dimensions of q are paired") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut)
	}
}

func TestAuditHTML(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "audit.html")
	code, stdout, errOut := runCLI(t, "audit", corpusModel("rope_llama"), corpusModel("alibi_bloom"), "--format", "html", "-o", out)
	if code != 0 || stdout != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, errOut)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, s := range []string{"<!DOCTYPE html>", `class="summary-table"`, `<figure class="fig-rope_frequencies">`, `<figure class="fig-alibi_slopes">`, `id="onnxpe-report"`} {
		if !strings.Contains(page, s) {
			t.Errorf("the page has no %s", s)
		}
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("the report's mode is %v, want -rw-r--r--", st.Mode().Perm())
	}
	// Without -o the page goes to standard output; a policy still applies.
	code, stdout, errOut = runCLI(t, "audit", corpusModel("nope_causal"), "--format", "html", "--require", "rope")
	if code != 1 || !strings.HasPrefix(stdout, "<!DOCTYPE html>") || !strings.Contains(errOut, "required scheme rope not found") {
		t.Errorf("exit %d, stderr %q, stdout %.40q", code, errOut, stdout)
	}
}

// The table wraps long params (LongRoPE's factor lists) and keeps every
// pair; markdown puts each pair in code and notes under their own head.
func TestAuditTableAndMarkdownReadWell(t *testing.T) {
	longrope := filepath.Join("..", "..", "passes", "testdata", "realmodels", "ee_phi35_mini_longrope_noweights", "model.onnx")
	models := []string{corpusModel("rope_yarn"), corpusModel("t5_decoder"), longrope}
	code, js, _ := runCLI(t, append([]string{"audit", "--json"}, models...)...)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	var reports []auditJSON
	if err := json.Unmarshal([]byte(js), &reports); err != nil {
		t.Fatal(err)
	}
	code, table, _ := runCLI(t, append([]string{"audit"}, models...)...)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, l := range strings.Split(table, "\n") {
		if len(l) > 120 && !strings.HasPrefix(l, "note (") && !strings.HasPrefix(l, "MODEL") && !strings.Contains(l, "model.onnx") {
			t.Errorf("a table line of %d characters: %q", len(l), l)
		}
	}
	flat := strings.Join(strings.Fields(table), " ")
	for _, r := range reports {
		for _, f := range r.Findings {
			for k := range f.Params {
				if !strings.Contains(flat, " "+k+"=") {
					t.Errorf("%s: the table leaves out %s", r.Model, k)
				}
			}
		}
	}
	if !strings.Contains(table, "short_factor=[1,1.02,") || !strings.Contains(table, "\n  ") {
		t.Errorf("LongRoPE's factors are not wrapped in the table:\n%s", table)
	}
	code, md, _ := runCLI(t, append([]string{"audit", "--format", "markdown"}, models...)...)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if strings.Contains(md, "\n\n\n") {
		t.Error("markdown with two blank lines in a row")
	}
	if !strings.Contains(md, "| rope | 0-1 | false | 54 | `attention_factor=1.138629436111989` `base=10000`") {
		t.Errorf("rope_yarn's row:\n%s", md)
	}
	if strings.Count(md, "\nNotes:\n") != 1 || !strings.Contains(md, "(0-1 t5_relative_bias).") {
		t.Errorf("notes or layers:\n%s", md)
	}
}
