package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// diffJSON runs onnxpe diff A B --json and decodes what it prints.
func diffJSON(t *testing.T, a, b string) (int, *diffReport) {
	t.Helper()
	code, out, errOut := runCLI(t, "diff", a, b, "--json")
	var rep diffReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("diff %s %s: exit %d, %v: %q (stderr %q)", a, b, code, err, out, errOut)
	}
	return code, &rep
}

// changed lists the fields of the differences, with A's and B's values.
func changed(rep *diffReport) map[string][2]string {
	m := map[string][2]string{}
	for _, d := range rep.Differences {
		m[d.Field] = [2]string{string(d.A), string(d.B)}
	}
	return m
}

// TestDiffOfAnExtension is the acceptance test of onnxpe diff: a model
// against its extend --to 4N output shows exactly the params the rule
// changes (linear RoPE 32 -> 128: the factor 1 -> 4 and the scaling none
// -> linear; a learned table 64 -> 256: max_positions), exit 1; a model
// with itself shows no difference, exit 0; saved JSON reports give the
// same differences as the models.
func TestDiffOfAnExtension(t *testing.T) {
	dir := t.TempDir()
	llama, gpt2 := corpusModel("rope_llama"), corpusModel("learned_gpt2")
	llama4, gpt4 := filepath.Join(dir, "llama_128.onnx"), filepath.Join(dir, "gpt2_256.onnx")
	for _, args := range [][]string{
		{"extend", llama, "-o", llama4, "--to", "128", "--method", "linear", "--original-max-positions", "32"},
		{"extend", gpt2, "-o", gpt4, "--to", "256"},
	} {
		if code, _, errOut := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
	}
	for _, tc := range []struct {
		a, b string
		want map[string][2]string
	}{
		{llama, llama4, map[string][2]string{"params.factor": {"1", "4"}, "params.scaling": {`"none"`, `"linear"`}}},
		{gpt2, gpt4, map[string][2]string{"params.max_positions": {"64", "256"}}},
	} {
		code, rep := diffJSON(t, tc.a, tc.b)
		if code != ExitCheckFailed || rep.Equal {
			t.Errorf("%s against %s: exit %d, equal %v", tc.a, tc.b, code, rep.Equal)
		}
		got := changed(rep)
		if len(got) != len(tc.want) {
			t.Errorf("%s against %s: %d differences %v, want exactly %v", tc.a, tc.b, len(got), got, tc.want)
		}
		for f, v := range tc.want {
			if got[f] != v {
				t.Errorf("%s against %s: %s is %v, want %v", tc.a, tc.b, f, got[f], v)
			}
		}
		for _, d := range rep.Differences {
			if d.Kind != "field" || !slices.Equal(d.Layers, []int{0, 1}) {
				t.Errorf("%s against %s: %+v", tc.a, tc.b, d)
			}
		}
		code, table, _ := runCLI(t, "diff", tc.a, tc.b)
		if code != ExitCheckFailed || !strings.Contains(table, "differences: the audits of A and B differ") && !strings.Contains(table, "1 difference: ") {
			t.Errorf("table: exit %d\n%s", code, table)
		}
	}
	code, table, errOut := runCLI(t, "diff", llama, llama)
	if code != 0 || errOut != "" || !strings.Contains(table, "no difference: the audits agree (1 finding, 2 attention layers)") {
		t.Errorf("a model with itself: exit %d, stderr %q\n%s", code, errOut, table)
	}
	code, rep := diffJSON(t, llama4, llama4)
	if code != 0 || !rep.Equal || rep.Differences == nil || len(rep.Differences) != 0 {
		t.Errorf("the extended model with itself: exit %d, %+v", code, rep)
	}

	// Saved reports: the same differences as the models; a report with
	// its own model: none; a list of one report is one report.
	save := func(name, model string, list bool) string {
		t.Helper()
		args := []string{"audit", model, "--json", "-o", filepath.Join(dir, name)}
		if list {
			args = append(args, model) // the same file twice: audited once, a list
		}
		if code, _, errOut := runCLI(t, args...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		return filepath.Join(dir, name)
	}
	aJSON, bJSON, listJSON := save("a.json", llama, false), save("b.json", llama4, false), save("list.json", llama, true)
	_, fromModels := diffJSON(t, llama, llama4)
	for _, pair := range [][2]string{{aJSON, bJSON}, {listJSON, llama4}, {llama, bJSON}} {
		code, rep := diffJSON(t, pair[0], pair[1])
		if code != ExitCheckFailed || !equalJSON(t, rep.Differences, fromModels.Differences) {
			t.Errorf("diff %s %s: exit %d, %v; the models give %v", pair[0], pair[1], code, changed(rep), changed(fromModels))
		}
	}
	if code, rep := diffJSON(t, aJSON, llama); code != 0 || !rep.Equal {
		t.Errorf("a report with its model: exit %d, %v", code, changed(rep))
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestDiffLayersAndFindings: a model whose audit has more layers and a
// scheme the other lacks: the count of attention layers, the scheme of
// each layer that differs, the finding only B has.
func TestDiffLayersAndFindings(t *testing.T) {
	code, rep := diffJSON(t, corpusModel("rope_llama"), corpusModel("llama4_nope"))
	got := changed(rep)
	if code != ExitCheckFailed || got["attention_layers"] != [2]string{"2", "4"} || got["layers[3]"] != [2]string{"", `"nope"`} {
		t.Errorf("exit %d, %v", code, got)
	}
	var added, removed int
	for _, d := range rep.Differences {
		switch d.Kind {
		case "finding_added":
			added++
			if d.Scheme != "nope" || d.A != nil || d.B == nil {
				t.Errorf("added: %+v", d)
			}
		case "finding_removed":
			removed++
		}
	}
	if added != 1 || removed != 0 {
		t.Errorf("%d findings added, %d removed: %v", added, removed, got)
	}
	// The other way round the finding is removed.
	_, back := diffJSON(t, corpusModel("llama4_nope"), corpusModel("rope_llama"))
	kinds := map[string]int{}
	for _, d := range back.Differences {
		kinds[d.Kind]++
	}
	if kinds["finding_removed"] != 1 || kinds["finding_added"] != 0 {
		t.Errorf("B to A: %v", kinds)
	}
}

// TestDiffBadReports: JSON that is not one audit report is refused with
// one line naming the file, exit 2.
func TestDiffBadReports(t *testing.T) {
	dir := t.TempDir()
	g := corpusModel("rope_llama")
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(body), 0o644)
		return p
	}
	for _, tc := range []struct{ path, want string }{
		{write("two.json", `[{"model":"a","schemes":[],"layers":[],"findings":[]},{"model":"b","schemes":[],"layers":[],"findings":[]}]`), "a list of 2 audit reports"},
		{write("err.json", `{"model":"m.onnx","error":{"kind":"bad_input","message":"m.onnx: truncated"}}`), "could not be audited"},
		{write("inspect.json", `{"file":"m.onnx","ir_version":8}`), `no "model" field`},
		{write("broken.json", `{"model": `), "not an audit report"},
	} {
		code, _, errOut := runCLI(t, "diff", tc.path, g)
		if code != ExitBadInput || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, tc.path) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and one line with %q", tc.path, code, errOut, tc.want)
		}
	}
}
