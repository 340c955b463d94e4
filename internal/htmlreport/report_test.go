package htmlreport

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/audit"
	"github.com/onnxpe/onnxpe/testmodels"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// auditFile audits one model file.
func auditFile(t testing.TB, path, name string) *passes.Report {
	t.Helper()
	m, err := graph.LoadWith(path, graph.LoadOptions{AllowMissingExternal: true})
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := audit.AuditModel(m, name, passes.Options{})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return r
}

func auditCorpus(t testing.TB, name string) *passes.Report {
	return auditFile(t, filepath.Join(testmodels.Dir(), "models", name, "model.onnx"), name)
}

// longRoPE is a real model (Phi-3.5-mini's LongRoPE graph) vendored by
// passes' tests.
var longRoPE = filepath.Join("..", "..", "passes", "testdata", "realmodels", "ee_phi35_mini_longrope_noweights", "model.onnx")

func render(t testing.TB, reports ...*passes.Report) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, reports, Options{Generator: "onnxpe test"}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// schemePlots are the plots each kind of model must get.
var schemePlots = []struct {
	model string
	plots []string
}{
	{"rope_llama", []string{"layer_map", "rope_cos_sin", "rope_frequencies"}},
	{"rope_llama3", []string{"layer_map", "rope_cos_sin", "rope_frequencies"}},
	{"rope_yarn", []string{"layer_map", "rope_cos_sin", "rope_frequencies"}},
	{"rope_gptj", []string{"layer_map", "rope_cos_sin", "rope_frequencies"}},
	{"sinusoidal_interleaved", []string{"layer_map", "table_heatmap", "sinusoidal_frequencies"}},
	{"sinusoidal_concat", []string{"layer_map", "table_heatmap", "sinusoidal_frequencies"}},
	{"learned_gpt2", []string{"layer_map", "table_heatmap", "position_similarity"}},
	{"learned_vit", []string{"layer_map", "table_heatmap", "position_similarity"}},
	{"alibi_bloom", []string{"layer_map", "alibi_slopes"}},
	{"alibi_mpt", []string{"layer_map", "alibi_slopes"}},
	{"t5_encoder", []string{"layer_map", "t5_bucket_map", "t5_bias", "t5_table"}},
	{"t5_decoder", []string{"layer_map", "t5_bucket_map", "t5_bias", "t5_table"}},
	{"relative_shaw", []string{"layer_map", "shaw_clipping"}},
	{"relative_bert_key", []string{"layer_map", "shaw_clipping"}},
	{"llama4_nope", []string{"layer_map", "rope_cos_sin", "rope_frequencies"}},
	{"nope_causal", []string{"layer_map"}},
	{"relative_transfo_xl", []string{"layer_map", "relative_table", "relative_distances"}},
	{"relative_xlnet", []string{"layer_map", "relative_table", "relative_distances"}},
	{"disentangled_deberta", []string{"layer_map", "disentangled_buckets"}},
	{"disentangled_deberta_unshared", []string{"layer_map", "disentangled_buckets"}},
	{"rope_mrope", []string{"layer_map", "rope_cos_sin", "rope_frequencies", "rope_sections"}},
	{"rope_axial_vit", []string{"layer_map", "rope_cos_sin", "rope_axes"}},
	{"complex_order", []string{"layer_map", "complex_frequencies"}},
	{"floater_unrolled", []string{"layer_map", "floater_states"}},
	{"floater_loop", []string{"layer_map", "floater_states"}},
}

var figKind = regexp.MustCompile(`<figure class="fig-([a-z_0-9]+)">`)

// plotKinds lists the figures of a page, sorted.
func plotKinds(page string) []string {
	var out []string
	for _, m := range figKind.FindAllStringSubmatch(page, -1) {
		out = append(out, m[1])
	}
	sort.Strings(out)
	return out
}

func TestPageOfEveryScheme(t *testing.T) {
	for _, tc := range schemePlots {
		t.Run(tc.model, func(t *testing.T) {
			r := auditCorpus(t, tc.model)
			page := render(t, r)
			want := append([]string{}, tc.plots...)
			sort.Strings(want)
			if got := plotKinds(page); !reflect.DeepEqual(got, want) {
				t.Errorf("plots %v, want %v", got, want)
			}
			checkWellFormed(t, page)
			checkEmbeddedJSON(t, page, r)
			if !strings.Contains(page, "<code data-field=\"model\">"+tc.model+"</code>") {
				t.Error("the model's name is not the section's title")
			}
			for _, f := range r.Findings {
				if !strings.Contains(page, `data-field="scheme">`+f.Scheme+`</span>`) {
					t.Errorf("no section for the %s finding", f.Scheme)
				}
			}
		})
	}
}

// A LongRoPE model's frequency plot shows both measured sets.
func TestPageOfLongRoPE(t *testing.T) {
	r := auditFile(t, longRoPE, "phi35_longrope")
	page := render(t, r)
	for _, s := range []string{"measured, beyond the original length", "beyond the original length", "Scaling rule: longrope", "factor 32"} {
		if !strings.Contains(page, s) {
			t.Errorf("the page does not say %q", s)
		}
	}
	checkWellFormed(t, page)
}

// RoPE whose frequencies are graph inputs has no plot of made-up values.
func TestPageOfRoPEFromInputs(t *testing.T) {
	r := auditFile(t, filepath.Join("..", "..", "passes", "testdata", "realmodels", "ee_llama_dort_invfreq_input", "model.onnx"), "invfreq_input")
	page := render(t, r)
	if got := plotKinds(page); !reflect.DeepEqual(got, []string{"layer_map"}) {
		t.Errorf("plots %v, want the layer map only", got)
	}
	if !strings.Contains(page, "the frequencies (or the cos/sin caches) are graph inputs, not in the file.</p>") {
		t.Error("the page does not say why there is no plot")
	}
}

var svgElem = regexp.MustCompile(`(?s)<svg .*?</svg>`)

// checkWellFormed parses every SVG image of the page as XML (a malformed
// one renders as nothing) and checks the ids of the page are unique.
func checkWellFormed(t *testing.T, page string) {
	t.Helper()
	svgs := svgElem.FindAllString(page, -1)
	if len(svgs) == 0 {
		t.Fatal("no SVG in the page")
	}
	for i, s := range svgs {
		d := xml.NewDecoder(strings.NewReader(s))
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("SVG %d is not well-formed XML: %v\n%.300s", i, err, s)
			}
		}
		if !strings.Contains(s, "<title id=") || !strings.Contains(s, "<desc id=") || !strings.Contains(s, `role="img"`) {
			t.Errorf("SVG %d has no title, description or role", i)
		}
	}
	ids := map[string]bool{}
	for _, m := range regexp.MustCompile(` id="([^"]+)"`).FindAllStringSubmatch(page, -1) {
		if ids[m[1]] {
			t.Errorf("id %q used twice", m[1])
		}
		ids[m[1]] = true
	}
}

var embedded = regexp.MustCompile(`(?s)<script type="application/json" id="onnxpe-report">(.*?)</script>`)

func reportSchema(t testing.TB) *jsonschema.Schema {
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

// checkEmbeddedJSON checks that the page embeds the JSON report of r (as
// --json prints it) and that it validates against the report schema.
func checkEmbeddedJSON(t *testing.T, page string, rs ...*passes.Report) {
	t.Helper()
	m := embedded.FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no embedded JSON report")
	}
	var got any
	if err := json.Unmarshal([]byte(m[1]), &got); err != nil {
		t.Fatalf("embedded report: %v", err)
	}
	var v any = rs
	if len(rs) == 1 {
		v = rs[0]
	}
	b, _ := json.Marshal(v)
	var want any
	json.Unmarshal(b, &want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the embedded report differs from the JSON report")
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	items := []any{inst}
	if arr, ok := inst.([]any); ok {
		items = arr
	}
	s := reportSchema(t)
	for _, it := range items {
		if err := s.Validate(it); err != nil {
			t.Errorf("the embedded report does not validate against the schema: %v", err)
		}
	}
}

// Every field the report schema defines for a report and a finding is
// shown on the page (marked data-field): a field added to the schema
// fails here until the page shows it.
func TestPageShowsEverySchemaField(t *testing.T) {
	var sch struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Defs       struct {
			Finding struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"finding"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(passes.ReportSchema, &sch); err != nil {
		t.Fatal(err)
	}
	if len(sch.Properties) < 4 || len(sch.Defs.Finding.Properties) < 5 {
		t.Fatalf("the schema has %d report and %d finding properties", len(sch.Properties), len(sch.Defs.Finding.Properties))
	}
	// rope_llama3's finding has notes; llama4_nope has two findings; the
	// findings of ort_dummy_t5_beamsearch live in BeamSearch's graphs.
	beam := filepath.Join("..", "..", "passes", "testdata", "realmodels", "ort_dummy_t5_beamsearch", "model.onnx")
	page := render(t, auditCorpus(t, "rope_llama3"), auditCorpus(t, "llama4_nope"), auditFile(t, beam, "ort_dummy_t5_beamsearch"))
	for _, props := range []map[string]json.RawMessage{sch.Properties, sch.Defs.Finding.Properties} {
		for k := range props {
			if !strings.Contains(page, `data-field="`+k+`"`) {
				t.Errorf("the schema's field %q is not on the page", k)
			}
		}
	}
}

// The page makes no request: no links, scripts, images or fonts but
// data: URLs and fragments.
func TestPageIsSelfContained(t *testing.T) {
	page := render(t, auditCorpus(t, "rope_llama"), auditCorpus(t, "t5_encoder"), auditCorpus(t, "learned_bert"))
	for _, m := range regexp.MustCompile(`(?i)\b(src|href|xlink:href|action|srcset|poster|data)\s*=\s*"([^"]*)"`).FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[2], "data:image/png;base64,") && !strings.HasPrefix(m[2], "#") {
			t.Errorf("%s=%q would be requested", m[1], m[2])
		}
	}
	for _, m := range regexp.MustCompile(`url\(([^)]*)\)`).FindAllStringSubmatch(page, -1) {
		if !strings.HasPrefix(m[1], "#") {
			t.Errorf("url(%s) would be requested", m[1])
		}
	}
	for _, bad := range []string{"<link", "@import", "<iframe", "<object", "<embed", "<script src"} {
		if strings.Contains(strings.ToLower(page), bad) {
			t.Errorf("the page contains %s", bad)
		}
	}
}

func TestMultiModelPage(t *testing.T) {
	names := []string{"rope_llama", "alibi_mpt", "sinusoidal_marian"}
	var rs []*passes.Report
	for _, n := range names {
		rs = append(rs, auditCorpus(t, n))
	}
	page := render(t, rs...)
	if !strings.Contains(page, `class="summary-table"`) {
		t.Fatal("no summary table")
	}
	for i, n := range names {
		link := fmt.Sprintf(`<a href="#model-%d"><code>%s</code></a>`, i, n)
		if !strings.Contains(page, link) {
			t.Errorf("the summary has no link %s", link)
		}
		if !strings.Contains(page, fmt.Sprintf(`<section class="model" id="model-%d"`, i)) {
			t.Errorf("no section for %s", n)
		}
	}
	if got := strings.Count(page, `<figure class="fig-layer_map">`); got != 3 {
		t.Errorf("%d layer maps, want 3", got)
	}
	checkWellFormed(t, page)
	checkEmbeddedJSON(t, page, rs...)
	if one := render(t, rs[0]); strings.Contains(one, `class="summary-table"`) {
		t.Error("a page of one model has a summary table")
	}
}

// The plots draw the evidence: changing the measured values changes
// them, and a finding without evidence has none.
func TestPlotsDrawTheEvidence(t *testing.T) {
	for _, name := range []string{"rope_llama3", "sinusoidal_concat", "learned_gpt2", "alibi_bloom", "t5_encoder", "relative_shaw"} {
		t.Run(name, func(t *testing.T) {
			r := auditCorpus(t, name)
			f := r.Findings[0]
			before := figuresSVG(f)
			if before == "" {
				t.Fatal("no plots")
			}
			scaleEvidence(f.Evidence)
			if after := figuresSVG(f); after == before {
				t.Error("the plots did not change with the evidence")
			}
			f.Evidence = nil
			if figuresSVG(f) != "" {
				t.Error("a finding without evidence has plots")
			}
		})
	}
}

func figuresSVG(f *passes.Finding) string {
	var sb strings.Builder
	for _, fg := range findingFigures(&plot.IDs{}, f) {
		sb.WriteString(fg.SVG)
	}
	return sb.String()
}

// scaleEvidence moves every measured value of an evidence struct: floats
// are halved, ints incremented.
func scaleEvidence(ev any) {
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer, reflect.Interface:
			if !v.IsNil() {
				walk(v.Elem())
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				if v.Type().Field(i).IsExported() {
					walk(v.Field(i))
				}
			}
		case reflect.Slice:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Float64:
			v.SetFloat(v.Float() / 2)
		case reflect.Int:
			v.SetInt(v.Int() + 1)
		}
	}
	walk(reflect.ValueOf(ev))
}

func TestScales(t *testing.T) {
	labels := func(ts []plot.Tick) string {
		var out []string
		for _, x := range ts {
			out = append(out, x.Label)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		s    plot.Scale
		want string
	}{
		{plot.LogScaleOf(1e-6, 1, 10), "10⁻⁶ 10⁻⁵ 10⁻⁴ 10⁻³ 10⁻² 10⁻¹ 1"},
		{plot.LogScaleOf(1.0/256, 0.5, 2), "1/256 1/128 1/64 1/32 1/16 1/8 1/4 1/2"},
		{plot.LogScaleOf(0.9, 8, 2), "1/2 1 2 4 8"},
		{plot.RelAxis(511), "0 −1 1 −4 4 −16 16 −64 64 −256 256"},
		{plot.LinScale(0, 31, true), "0 5 10 15 20 25 30 35"},
		{plot.LinScale(-2.6, 3.1, false), "−3 −2 −1 0 1 2 3 4"},
	} {
		if got := labels(tc.s.Ticks()); got != tc.want {
			t.Errorf("ticks of %+v: %q, want %q", tc.s, got, tc.want)
		}
	}
	s := plot.Scale{Kind: plot.LogScale, Base: 10, Min: 1e-4, Max: 1, Lo: 0, Hi: 400}
	if x := s.Px(1e-2); math.Abs(x-200) > 1e-9 {
		t.Errorf("log scale: 1e-2 at %g, want 200", x)
	}
	sl := plot.RelAxis(15)
	sl.Lo, sl.Hi = -100, 100
	if x := sl.Px(0); math.Abs(x) > 1e-9 || sl.Px(-3) != -sl.Px(3) {
		t.Errorf("symlog is not symmetric about 0: %g, %g, %g", sl.Px(0), sl.Px(-3), sl.Px(3))
	}
}

func TestLayerStrings(t *testing.T) {
	if got := layersString([]int{0, 1, 2, 5, 7, 8}); got != "0–2, 5, 7–8" {
		t.Errorf("layersString = %q", got)
	}
	ls := []passes.LayerScheme{{Index: 0, Scheme: "rope"}, {Index: 1, Scheme: "rope"}, {Index: 2, Scheme: "rope"}, {Index: 3, Scheme: "nope"}, {Index: 4, Scheme: "rope"}}
	if got := layerRuns(ls); got != "0–2 rope, 3 nope, 4 rope" {
		t.Errorf("layerRuns = %q", got)
	}
	if got := jsonText(map[string]any{"b": []float64{1, 2.5}, "a": nil}); got != `{"a": null, "b": [1, 2.5]}` {
		t.Errorf("jsonText = %s", got)
	}
}

// TestSectionsOfManyModels: a page made of sections drawn apart (as the
// audit's workers draw them) has unique element ids, a row and a section
// for a model that could not be audited, and the summary's scheme counts
// and params that differ.
func TestSectionsOfManyModels(t *testing.T) {
	r := auditCorpus(t, "rope_llama")
	sections := []*Section{NewSection(0, r), FailedSection(1, "zoo/corrupt.onnx", "not an ONNX model: proto: cannot parse"), NewSection(2, r)}
	sum := &Summary{Models: 3, Failed: 1, Schemes: []SchemeCount{{"rope", 2, 2}},
		Differ: []ParamValues{{"rope", "base", []ValueCount{{"10000", 1}, {"500000", 1}}}}}
	var buf bytes.Buffer
	if err := WriteSections(&buf, sections, []byte("[]"), Options{Summary: sum}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	ids := map[string]int{}
	for _, m := range regexp.MustCompile(` id="([^"]+)"`).FindAllStringSubmatch(page, -1) {
		ids[m[1]]++
	}
	for id, n := range ids {
		if n > 1 {
			t.Errorf("id %q appears %d times", id, n)
		}
	}
	if len(ids) < 10 {
		t.Errorf("only %d ids in the page", len(ids))
	}
	for _, want := range []string{
		`<tr class="failed"><td><a href="#model-1"><code>zoo/corrupt.onnx</code></a></td><td colspan="3">could not be audited</td></tr>`,
		`<section class="model" id="model-1"`,
		`Could not be audited: not an ONNX model: proto: cannot parse</p>`,
		`<p class="counts">3 models: 1 could not be audited.</p>`,
		`<tr><td>rope</td><td class="num">2</td><td class="num">2</td></tr>`,
		`<td><code>base</code></td><td><code>10000</code> (1), <code>500000</code> (1)</td>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page has no %s", want)
		}
	}
}
