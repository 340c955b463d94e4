package golden_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/cli"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var update = flag.Bool("update", false, "rewrite the golden files from `onnxpe audit --json`")

// goldenCase is one model with its ground truth.
type goldenCase struct {
	name  string
	path  func(t *testing.T) string
	truth testmodels.Truth
}

func cases(t *testing.T) []goldenCase {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	var out []goldenCase
	for _, e := range man.Models {
		dir := filepath.Dir(e.ModelPath())
		for _, v := range []struct{ suffix, file string }{{"", "model.onnx"}, {".ort_basic", "ort_basic.onnx"}, {".ort_extended", "ort_extended.onnx"}} {
			p := filepath.Join(dir, v.file)
			out = append(out, goldenCase{name: e.Name + v.suffix, path: func(*testing.T) string { return p }, truth: e.TruthOf(v.file)})
		}
	}
	for _, s := range append(testmodels.Synthetics(), testmodels.AxialSynthetics()...) {
		out = append(out, goldenCase{name: s.Name, truth: s.Truth, path: func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), s.Name+".onnx")
			if err := s.Build().Save(p, graphSave()); err != nil {
				t.Fatal(err)
			}
			return p
		}})
	}
	names := map[string]bool{}
	for _, c := range out {
		if names[c.name] {
			t.Fatalf("two models are named %s", c.name)
		}
		names[c.name] = true
	}
	return out
}

// auditJSON runs `onnxpe audit --json --name NAME PATH`.
func auditJSON(t *testing.T, name, path string) []byte {
	t.Helper()
	var out, errOut bytes.Buffer
	code := cli.Run(&cli.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}, []string{"audit", "--json", "--name", name, path})
	if code != 0 {
		t.Fatalf("onnxpe audit %s: exit %d: %s", path, code, errOut.String())
	}
	return out.Bytes()
}

func TestGoldenReports(t *testing.T) {
	cs := cases(t)
	want := map[string]bool{}
	for _, c := range cs {
		t.Run(c.name, func(t *testing.T) {
			want[c.name] = true
			got := auditJSON(t, c.name, c.path(t))
			path := filepath.Join("testdata", c.name+".json")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./golden -update)", err)
			}
			if !bytes.Equal(b, got) {
				t.Errorf("%s: the audit differs from the golden file (go test ./golden -update after checking why):\n%s", c.name, firstDiff(b, got))
			}
		})
	}
	// No stale files for models that are gone.
	files, _ := filepath.Glob("testdata/*.json")
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		if want[name] {
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

// firstDiff shows the first differing line of two texts.
func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  golden: %s\n  audit:  %s", i+1, x, y)
		}
	}
	return ""
}

// truthGaps are manifest params the graph does not determine: the audit
// may leave them out. Each says why.
var truthGaps = map[string]string{
	"rope/rotary_pct": "the graph holds the rotary dimension, not the configuration's fraction of the head",
}

// TestGoldenAgreesWithManifest checks every golden file against the ground
// truth, independently of the code that wrote it.
func TestGoldenAgreesWithManifest(t *testing.T) {
	sch := compileSchema(t)
	for _, c := range cases(t) {
		t.Run(c.name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", c.name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(v); err != nil {
				t.Errorf("does not follow the report schema: %v", err)
			}
			var r report
			if err := json.Unmarshal(b, &r); err != nil {
				t.Fatal(err)
			}
			if r.Model != c.name {
				t.Errorf("model %q, want %q", r.Model, c.name)
			}
			if fmt.Sprint(r.Schemes) != fmt.Sprint(c.truth.Schemes) {
				t.Errorf("schemes %v, want %v", r.Schemes, c.truth.Schemes)
			}
			if fmt.Sprint(r.Layers) != fmt.Sprint(c.truth.Layers) {
				t.Errorf("layers %v, want %v", r.Layers, c.truth.Layers)
			}
			for _, tf := range c.truth.Findings {
				var got *finding
				for i, f := range r.Findings {
					if f.Scheme == tf.Scheme && fmt.Sprint(f.Layers) == fmt.Sprint(tf.Layers) {
						got = &r.Findings[i]
					}
				}
				if got == nil {
					t.Errorf("no %s finding for layers %v", tf.Scheme, tf.Layers)
					continue
				}
				if got.Fused != tf.Fused {
					t.Errorf("%s: fused %v, want %v", tf.Scheme, got.Fused, tf.Fused)
				}
				if tf.Scheme != "nope" && len(got.Nodes) == 0 {
					t.Errorf("%s: no nodes", tf.Scheme)
				}
				keys := make([]string, 0, len(tf.Params))
				for k := range tf.Params {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					g, ok := got.Params[k]
					if !ok {
						if _, gap := truthGaps[tf.Scheme+"/"+k]; !gap {
							t.Errorf("%s: param %s missing (want %v)", tf.Scheme, k, tf.Params[k])
						}
						continue
					}
					if !agree(tf.Params[k], g) {
						t.Errorf("%s: param %s = %v, want %v", tf.Scheme, k, g, tf.Params[k])
					}
				}
			}
			if len(r.Findings) != len(c.truth.Findings) {
				t.Errorf("%d findings, want %d", len(r.Findings), len(c.truth.Findings))
			}
		})
	}
}

type report struct {
	Model    string                   `json:"model"`
	Schemes  []string                 `json:"schemes"`
	Layers   []testmodels.LayerScheme `json:"layers"`
	Findings []finding                `json:"findings"`
}

type finding struct {
	Scheme string         `json:"scheme"`
	Layers []int          `json:"layers"`
	Nodes  []string       `json:"nodes"`
	Fused  bool           `json:"fused"`
	Params map[string]any `json:"params"`
}

// agree compares a truth value with a reported one: numbers within 0.1%,
// lists and objects elementwise, the rest exactly.
func agree(want, got any) bool {
	switch w := want.(type) {
	case float64:
		g, ok := got.(float64)
		return ok && (w == g || math.Abs(w-g) <= 1e-3*math.Abs(w))
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !agree(w[i], g[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k := range w {
			if !agree(w[k], g[k]) {
				return false
			}
		}
		return true
	}
	return fmt.Sprint(want) == fmt.Sprint(got)
}

func compileSchema(t *testing.T) *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(passes.ReportSchema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("report.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("report.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func graphSave() graph.SaveOptions { return graph.SaveOptions{} }
