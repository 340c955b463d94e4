package schemetest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/testmodels"
)

// GoldenDir is the folder of the golden reports: golden/testdata, where
// <model>.json is `onnxpe audit --json --name <model>` of every corpus
// model, its ONNX Runtime saves and the models testmodels builds in Go.
func GoldenDir() string { return filepath.Join(testmodels.Dir(), "..", "golden", "testdata") }

// Case is one model of the golden reports: its name and how to get it.
type Case struct {
	Name string
	// Load reads the model as `onnxpe audit` does: the corpus file (an
	// absent external-data file allowed), or the Go-built model saved to
	// a temporary file and read back, as the golden test audits it.
	Load func(t testing.TB) *graph.Model
}

// Cases are the models of the golden reports, by name, found or built as
// golden/golden_test.go finds or builds them.
func Cases(t testing.TB) map[string]Case {
	t.Helper()
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Case{}
	add := func(c Case) {
		if _, dup := out[c.Name]; dup {
			t.Fatalf("two models are named %s", c.Name)
		}
		out[c.Name] = c
	}
	for _, e := range man.Models {
		dir := filepath.Dir(e.ModelPath())
		for _, v := range []struct{ suffix, file string }{{"", "model.onnx"}, {".ort_basic", "ort_basic.onnx"}, {".ort_extended", "ort_extended.onnx"}} {
			p := filepath.Join(dir, v.file)
			add(Case{Name: e.Name + v.suffix, Load: func(t testing.TB) *graph.Model { return load(t, p) }})
		}
	}
	for _, s := range append(testmodels.Synthetics(), testmodels.AxialSynthetics()...) {
		add(Case{Name: s.Name, Load: func(t testing.TB) *graph.Model {
			p := filepath.Join(t.TempDir(), s.Name+".onnx")
			if err := s.Build().Save(p, graph.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			return load(t, p)
		}})
	}
	return out
}

func load(t testing.TB, path string) *graph.Model {
	t.Helper()
	m, err := graph.LoadWith(path, graph.LoadOptions{AllowMissingExternal: true})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Golden are the findings of scheme in the golden report of each model
// whose report has some, as JSON objects in the report's order.
func Golden(t testing.TB, scheme string) map[string][]map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(GoldenDir(), "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden reports in %s (%v)", GoldenDir(), err)
	}
	out := map[string][]map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Findings []map[string]any `json:"findings"`
		}
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range r.Findings {
			if g["scheme"] == scheme {
				name := strings.TrimSuffix(filepath.Base(f), ".json")
				out[name] = append(out[name], g)
			}
		}
	}
	return out
}

// AuditFunc audits a model (audit.AuditModel; the scheme packages' tests
// pass it, as this package does not import the audit).
type AuditFunc func(m *graph.Model, name string, opts passes.Options) (*passes.Report, *passes.Context, error)

// CheckCorpus audits every model whose golden report has findings of
// scheme and checks that its findings of scheme are the golden's, in
// order and field by field (scheme, layers, nodes, fused, params, notes,
// subgraph). It fails when no golden report has findings of scheme.
func CheckCorpus(t *testing.T, scheme string, audit AuditFunc) {
	golden := Golden(t, scheme)
	if len(golden) == 0 {
		t.Fatalf("no golden report has findings of %s", scheme)
	}
	cases := Cases(t)
	names := make([]string, 0, len(golden))
	for n := range golden {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			c, ok := cases[name]
			if !ok {
				t.Fatalf("golden/testdata/%s.json: no model of that name", name)
			}
			r, _, err := audit(c.Load(t), name, passes.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []map[string]any
			for _, f := range r.Findings {
				if f.Scheme == scheme {
					got = append(got, findingJSON(t, f))
				}
			}
			SameFindings(t, golden[name], got)
		})
	}
	t.Logf("%d models of the golden reports have findings of %s", len(names), scheme)
}

// findingJSON is f as the report prints it, decoded.
func findingJSON(t testing.TB, f *passes.Finding) map[string]any {
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// SameFindings checks that got are the findings want, in order, each
// field equal.
func SameFindings(t testing.TB, want, got []map[string]any) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d findings, the golden report has %d:\n got  %s\n want %s", len(got), len(want), compact(got), compact(want))
		return
	}
	for i := range want {
		keys := map[string]bool{}
		for k := range want[i] {
			keys[k] = true
		}
		for k := range got[i] {
			keys[k] = true
		}
		sorted := make([]string, 0, len(keys))
		for k := range keys {
			sorted = append(sorted, k)
		}
		sort.Strings(sorted)
		for _, k := range sorted {
			if !reflect.DeepEqual(want[i][k], got[i][k]) {
				t.Errorf("finding %d (%v %v): %s = %s, the golden report has %s", i, want[i]["scheme"], want[i]["layers"], k, compact(got[i][k]), compact(want[i][k]))
			}
		}
	}
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
