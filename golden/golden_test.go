package golden_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/onnxpe/onnxpe/testmodels"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// report is the audit report's shape (DESIGN.md) as far as the ground
// truth knows it: node lists come with the audit.
type report struct {
	Model    string                    `json:"model"`
	Schemes  []string                  `json:"schemes"`
	Layers   []testmodels.LayerScheme  `json:"layers"`
	Findings []testmodels.FindingTruth `json:"findings"`
}

func expected(t *testing.T) map[string]report {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]report{}
	for _, e := range man.Models {
		out[e.Name] = report{Model: e.Name, Schemes: e.Schemes, Layers: e.Layers, Findings: e.Findings}
	}
	for _, s := range testmodels.Synthetics() {
		if _, dup := out[s.Name]; dup {
			t.Fatalf("synthetic model %s has the name of an exported one", s.Name)
		}
		out[s.Name] = report{Model: s.Name, Schemes: s.Truth.Schemes, Layers: s.Truth.Layers, Findings: s.Truth.Findings}
	}
	return out
}

func TestGoldenReports(t *testing.T) {
	want := expected(t)
	names := make([]string, 0, len(want))
	for n := range want {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		r := want[name]
		if len(r.Schemes) == 0 || len(r.Layers) == 0 || len(r.Findings) == 0 {
			t.Errorf("%s: empty ground truth", name)
		}
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, '\n')
		path := filepath.Join("testdata", name+".json")
		if *update {
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v (run go test ./golden -update)", name, err)
			continue
		}
		if !bytes.Equal(got, b) {
			t.Errorf("%s: golden file differs from the ground truth (run go test ./golden -update after checking why)", path)
		}
	}
	// No stale files for models that are gone.
	files, _ := filepath.Glob("testdata/*.json")
	for _, f := range files {
		if _, ok := want[filepath.Base(f[:len(f)-len(".json")])]; ok {
			continue
		}
		if *update {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
			continue
		}
		t.Errorf("%s: no model of that name (go test ./golden -update removes it)", f)
	}
}
