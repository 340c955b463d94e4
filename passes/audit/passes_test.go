package audit_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/passes/internal/schemetest"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// schema compiles the report's JSON Schema.
func schema(t testing.TB) *jsonschema.Schema {
	t.Helper()
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

func validate(t testing.TB, s *jsonschema.Schema, r *passes.Report) {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(v); err != nil {
		t.Errorf("%s: report does not follow the schema: %v", r.Model, err)
	}
}

func TestSchemaRejectsWrongReports(t *testing.T) {
	s := schema(t)
	for _, bad := range []string{
		`{"model":"m","schemes":["rope"],"layers":[]}`,
		`{"model":"m","schemes":["nope"],"layers":[{"index":0,"scheme":"nope"}],"findings":[{"scheme":"nope","layers":[0],"nodes":[],"fused":false,"params":{}}]}`,
		`{"model":"m","schemes":["rope"],"layers":[],"findings":[{"scheme":"rope","layers":[],"nodes":[],"fused":false,"params":{"layout":"diagonal"}}]}`,
		`{"model":"m","schemes":["wavelet"],"layers":[],"findings":[]}`,
	} {
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(bad))
		if err != nil {
			t.Fatalf("the test's report is not JSON: %v", err)
		}
		if s.Validate(v) == nil {
			t.Errorf("schema accepts %s", bad)
		}
	}
}

func loadCorpus(t *testing.T, e testmodels.Entry) *graph.Model {
	t.Helper()
	m, err := graph.Load(e.ModelPath())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAuditLeavesTheModelAlone audits every corpus model and Go-built model
// (functions inlined, If branches taken, constants folded on the copy) and
// compares the caller's model byte for byte before and after.
func TestAuditLeavesTheModelAlone(t *testing.T) {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	models := map[string]*graph.Model{}
	for _, e := range man.Models {
		models[e.Name] = loadCorpus(t, e)
	}
	for _, s := range testmodels.Synthetics() {
		models[s.Name] = s.Build()
	}
	for name, m := range models {
		before, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := audit.AuditModel(m, name, passes.Options{}); err != nil {
			t.Fatal(err)
		}
		after, err := m.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(before, after) {
			t.Errorf("%s: the audit changed the caller's model", name)
		}
	}
}

// truthGaps are manifest params the graph does not determine, per scheme
// and key, with the reason; the audit may leave them out.
var truthGaps = map[string]string{
	"rope/rotary_pct": "the graph holds the rotary dimension, not the configuration's fraction of the head",
}

// compareTruth checks a report's schemes, layers and every truth param
// (the audit may print more params than the truth lists).
func compareTruth(t *testing.T, name string, truth testmodels.Truth, r *passes.Report, schemes map[string]bool) {
	t.Helper()
	for _, l := range truth.Layers {
		if !schemes[l.Scheme] {
			continue
		}
		if l.Index >= len(r.Layers) || r.Layers[l.Index].Scheme != l.Scheme {
			t.Errorf("%s: layer %d: want %s, report has %v", name, l.Index, l.Scheme, r.Layers)
		}
	}
	for _, tf := range truth.Findings {
		if !schemes[tf.Scheme] {
			continue
		}
		var got *passes.Finding
		for _, f := range r.Findings {
			if f.Scheme == tf.Scheme && fmt.Sprint(f.Layers) == fmt.Sprint(tf.Layers) {
				got = f
			}
		}
		if got == nil {
			t.Errorf("%s: no %s finding for layers %v", name, tf.Scheme, tf.Layers)
			continue
		}
		gp := schemetest.JSONParams(got)
		keys := make([]string, 0, len(tf.Params))
		for k := range tf.Params {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			g, ok := gp[k]
			if !ok {
				if _, gap := truthGaps[tf.Scheme+"/"+k]; gap {
					continue
				}
				t.Errorf("%s: %s: param %s missing (want %v)", name, tf.Scheme, k, tf.Params[k])
				continue
			}
			if !schemetest.Agree(tf.Params[k], g) {
				t.Errorf("%s: %s: param %s = %v, want %v", name, tf.Scheme, k, g, tf.Params[k])
			}
		}
	}
}

// implemented are the schemes the detectors of this package find so far.
var implemented = map[string]bool{"rope": true, "nope": true, "sinusoidal": true, "learned_absolute": true, "alibi": true, "t5_relative_bias": true, "relative_clipped": true,
	"relative_sinusoidal": true, "disentangled": true, "complex_order": true, "floater": true}

// TestCorpusMatchesTheManifest audits every exported model (and its ONNX
// Runtime optimised saves) and every Go-built model whose schemes are
// implemented, and compares with the ground truth.
func TestCorpusMatchesTheManifest(t *testing.T) {
	man, err := testmodels.Load()
	if err != nil {
		t.Fatal(err)
	}
	s := schema(t)
	checked := 0
	check := func(t *testing.T, name string, m *graph.Model, truth testmodels.Truth) {
		r, _, err := audit.AuditModel(m, name, passes.Options{})
		if err != nil {
			t.Fatal(err)
		}
		validate(t, s, r)
		if fmt.Sprint(r.Schemes) != fmt.Sprint(truth.Schemes) {
			t.Errorf("schemes %v, want %v", r.Schemes, truth.Schemes)
		}
		if len(r.Layers) != len(truth.Layers) {
			t.Errorf("%d layers, want %d", len(r.Layers), len(truth.Layers))
		}
		compareTruth(t, name, truth, r, implemented)
		checked++
	}
	supported := func(tr testmodels.Truth) bool {
		for _, sc := range tr.Schemes {
			if !implemented[sc] {
				return false
			}
		}
		return true
	}
	var skipped []string
	for _, e := range man.Models {
		if !supported(e.Truth) {
			skipped = append(skipped, e.Name)
			continue
		}
		for _, file := range []string{"model.onnx", "ort_basic.onnx", "ort_extended.onnx"} {
			t.Run(e.Name+"/"+file, func(t *testing.T) {
				m, err := graph.Load(filepath.Join(filepath.Dir(e.ModelPath()), file))
				if err != nil {
					t.Fatal(err)
				}
				check(t, e.Name, m, e.TruthOf(file))
			})
		}
	}
	for _, sy := range append(testmodels.Synthetics(), testmodels.AxialSynthetics()...) {
		if !supported(sy.Truth) {
			skipped = append(skipped, sy.Name)
			continue
		}
		t.Run(sy.Name, func(t *testing.T) { check(t, sy.Name, sy.Build(), sy.Truth) })
	}
	if len(skipped) > 0 {
		t.Logf("skipped %d models whose schemes no detector of this package finds yet: %v", len(skipped), skipped)
	}
	if checked < 60 {
		t.Errorf("only %d models checked", checked)
	}
}

// TestLayerRanges: layer indexes print as runs of consecutive ones, with
// the caller's dash and separator.
func TestLayerRanges(t *testing.T) {
	for _, c := range []struct {
		ls        []int
		dash, sep string
		want      string
	}{
		{nil, "-", ",", ""},
		{[]int{4}, "-", ",", "4"},
		{[]int{0, 1}, "-", ",", "0-1"},
		{[]int{0, 1, 2, 3, 5}, "-", ",", "0-3,5"},
		{[]int{0, 1, 2, 5, 7, 8}, "–", ", ", "0–2, 5, 7–8"},
		{[]int{1, 3, 5}, "-", ",", "1,3,5"},
		{[]int{2, 3, 3, 4}, "-", ",", "2-3,3-4"}, // not a set: runs as given
	} {
		if got := passes.LayerRanges(c.ls, c.dash, c.sep); got != c.want {
			t.Errorf("LayerRanges(%v, %q, %q) = %q, want %q", c.ls, c.dash, c.sep, got, c.want)
		}
	}
}

// TestSchemeRuns: the scheme of every layer prints in runs of consecutive
// layers with one scheme.
func TestSchemeRuns(t *testing.T) {
	ls := []passes.LayerScheme{{Index: 0, Scheme: "rope"}, {Index: 1, Scheme: "rope"}, {Index: 2, Scheme: "rope"}, {Index: 3, Scheme: "nope"}, {Index: 4, Scheme: "rope"}, {Index: 6, Scheme: "rope"}, {Index: 7, Scheme: "rope"}}
	if got, want := passes.SchemeRuns(ls, "-"), "0-2 rope, 3 nope, 4 rope, 6-7 rope"; got != want {
		t.Errorf("SchemeRuns = %q, want %q", got, want)
	}
	if got := passes.SchemeRuns(nil, "-"); got != "" {
		t.Errorf("SchemeRuns(nil) = %q", got)
	}
}
