// Package htmlreport writes audit reports as one self-contained HTML page:
// the summary, the scheme of every attention layer, each finding's
// params, notes and nodes, and plots of what the detectors measured
// (heat maps of the encodings, RoPE frequencies against the plain base,
// ALiBi slopes, T5 bucket maps and bias tables, Shaw clipping). The page
// makes no request: its CSS is inline, the plots are inline SVG (heat map
// cells as PNG data), and it needs no script.
//
// The plots draw the findings' evidence, the values the detectors read
// from the graph, never values recomputed from the params; a reference
// curve (the plain base's frequencies) is drawn dashed and named as such.
// It is not the JSON report: that is passes.Report's JSON, which the page
// embeds as it is (script #onnxpe-report).
package htmlreport

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"sort"
	"strings"

	"github.com/onnxpe/onnxpe/internal/htmlreport/plot"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/scheme/nope"
	"github.com/onnxpe/onnxpe/passes/scheme/rope"
)

// Options are the page's settings.
type Options struct {
	// Generator names the program in the page's footer ("onnxpe v1.2.3").
	Generator string
	// Summary, when set, is shown under the table of the models of a
	// page of several (how many models use each scheme, the params that
	// differ across them).
	Summary *Summary
}

// Summary is what an audit of several models says over all of them.
type Summary struct {
	// Models is how many models were given, Failed how many of them
	// could not be audited.
	Models, Failed int
	// Schemes count the models (and findings) of each scheme, most
	// models first.
	Schemes []SchemeCount
	// Differ are the params that take different values in the models
	// that have a scheme, per scheme and param.
	Differ []ParamValues
}

// SchemeCount is how many models have a scheme, in how many findings.
type SchemeCount struct {
	Scheme           string
	Models, Findings int
}

// ParamValues are the values a param of a scheme takes across models.
type ParamValues struct {
	Scheme, Param string
	// Values, most models first; "(absent)" for findings without the
	// param.
	Values []ValueCount
}

// ValueCount is a param's value (JSON) and how many models have it.
type ValueCount struct {
	Value  string
	Models int
}

// A Section is the part of the page about one model, drawn from its
// report when it is made: the report's Evidence is not needed after, so
// a command auditing many models can let each model go once its section
// is made.
type Section struct{ view *modelView }

// NewSection draws the section of report r, the index-th model of the
// page.
func NewSection(index int, r *passes.Report) *Section {
	return &Section{view: modelSection(&plot.IDs{Prefix: fmt.Sprintf("m%d-", index)}, index, r)}
}

// FailedSection is the section of the index-th model of the page, which
// could not be audited: message says why.
func FailedSection(index int, model, message string) *Section {
	return &Section{view: &modelView{Anchor: fmt.Sprintf("model-%d", index), Model: model, Failed: message}}
}

//go:embed report.css
var css string

//go:embed report.html.tmpl
var pageTemplate string

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"svg": func(s string) template.HTML { return template.HTML(s) },
}).Parse(pageTemplate))

type pageView struct {
	Title     string
	CSS       template.CSS
	Multi     bool
	Models    []*modelView
	JSON      template.JS
	Generator string
	Summary   *Summary
}

type modelView struct {
	Anchor string
	Model  string
	// Failed says why the model could not be audited (nothing else is
	// set then).
	Failed   string
	Schemes  []chip
	NLayers  int
	Layers   string // "0-1: rope; 3: nope"
	LayerMap *plot.Figure
	Findings []*findingView
}

type chip struct {
	Scheme, Color, Text string
}

type findingView struct {
	Anchor string
	Chip   chip
	Layers string
	// Subgraph names the graph a generation op runs that holds the finding.
	Subgraph string
	Fused    bool
	Params   []param
	Notes    []string
	// Evidence is how the finding was confirmed (nil when not recorded).
	Evidence *passes.Measured
	Nodes    []string
	// NodesLabel says how many nodes carry the finding.
	NodesLabel string
	Figures    []*plot.Figure
	NoPlot     string
}

type param struct {
	Key, Value string
	Null       bool
	Long       bool
}

// Write writes the page of the reports (one section per model, and a
// summary table when there are several).
func Write(w io.Writer, reports []*passes.Report, opts Options) error {
	var js []byte
	var err error
	if len(reports) == 1 {
		js, err = json.MarshalIndent(reports[0], "", "  ")
	} else {
		js, err = json.MarshalIndent(reports, "", "  ")
	}
	if err != nil {
		return fmt.Errorf("htmlreport: %w", err)
	}
	sections := make([]*Section, len(reports))
	for i, r := range reports {
		sections[i] = NewSection(i, r)
	}
	return WriteSections(w, sections, js, opts)
}

// WriteSections writes the page of the sections, in their order, with
// js, the JSON report of the models, embedded as it is.
func WriteSections(w io.Writer, sections []*Section, js []byte, opts Options) error {
	v := &pageView{CSS: template.CSS(css), Multi: len(sections) > 1, JSON: template.JS(js), Generator: opts.Generator}
	if v.Multi {
		v.Summary = opts.Summary
	}
	if v.Generator == "" {
		v.Generator = "onnxpe"
	}
	for _, s := range sections {
		v.Models = append(v.Models, s.view)
	}
	if len(sections) == 1 {
		v.Title = "onnxpe audit: " + sections[0].view.Model
	} else {
		v.Title = fmt.Sprintf("onnxpe audit: %d models", len(sections))
	}
	var buf bytes.Buffer
	if err := page.Execute(&buf, v); err != nil {
		return fmt.Errorf("htmlreport: %w", err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func schemeChip(s string) chip {
	c := schemeColor(s)
	return chip{Scheme: s, Color: c, Text: textClass(c)}
}

func modelSection(ids *plot.IDs, i int, r *passes.Report) *modelView {
	m := &modelView{Anchor: fmt.Sprintf("model-%d", i), Model: r.Model, NLayers: len(r.Layers), LayerMap: layerMap(ids, r)}
	for _, s := range r.Schemes {
		m.Schemes = append(m.Schemes, schemeChip(s))
	}
	m.Layers = layerRuns(r.Layers)
	for j, fd := range r.Findings {
		fv := &findingView{
			Anchor:   fmt.Sprintf("%s-finding-%d", m.Anchor, j),
			Chip:     schemeChip(fd.Scheme),
			Layers:   layersString(fd.Layers),
			Subgraph: fd.Subgraph,
			Fused:    fd.Fused,
			Notes:    fd.Notes,
			Evidence: fd.Measured,
			Nodes:    fd.Nodes,
		}
		fv.Params = params(fd)
		switch len(fd.Nodes) {
		case 0:
			fv.NodesLabel = "No node of the original graph carries it"
		case 1:
			fv.NodesLabel = "1 node of the original graph carries it"
		default:
			fv.NodesLabel = fmt.Sprintf("%d nodes of the original graph carry it", len(fd.Nodes))
		}
		fv.Figures = findingFigures(ids, fd)
		if len(fv.Figures) == 0 {
			fv.NoPlot = noPlotReason(fd)
		}
		m.Findings = append(m.Findings, fv)
	}
	return m
}

// noPlotReason says why a finding has no plot.
func noPlotReason(fd *passes.Finding) string {
	switch {
	case fd.Scheme == nope.Name && len(fd.Layers) == 0:
		return "Nothing to plot: the graph has no attention layer."
	case fd.Scheme == nope.Name:
		return "Nothing to plot: no position information reaches these layers."
	case fd.Evidence == nil:
		return "Nothing to plot: this finding carries no measured values."
	}
	if ev, ok := fd.Evidence.(*rope.Evidence); ok && ev.Synthetic {
		return "Nothing to plot: the frequencies (or the cos/sin caches) are graph inputs, not in the file."
	}
	return "Nothing to plot: the detector measured no values to draw for this finding."
}

// params lists a finding's params by key, as the JSON report prints them.
func params(fd *passes.Finding) []param {
	if fd.Params == nil {
		return nil
	}
	mp := fd.Params.Map()
	keys := make([]string, 0, len(mp))
	for k := range mp {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []param
	for _, k := range keys {
		s := jsonText(mp[k])
		out = append(out, param{Key: k, Value: s, Null: s == "null", Long: len(s) > 60})
	}
	return out
}

// layersString prints sorted layer indexes as runs: 0–3, 5.
func layersString(ls []int) string { return passes.LayerRanges(ls, "–", ", ") }

// layerRuns prints the layers' schemes in runs: "0–2 rope, 3 nope".
func layerRuns(ls []passes.LayerScheme) string { return passes.SchemeRuns(ls, "–") }

// jsonText prints a value as JSON with a space after commas and colons,
// so that lists and objects wrap in a table cell.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	var x any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&x); err != nil {
		return string(b)
	}
	var sb strings.Builder
	writeJSONText(&sb, x)
	return sb.String()
}

func writeJSONText(sb *strings.Builder, x any) {
	switch v := x.(type) {
	case []any:
		sb.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				sb.WriteString(", ")
			}
			writeJSONText(sb, e)
		}
		sb.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		sb.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				sb.WriteString(", ")
			}
			kb, _ := json.Marshal(k)
			sb.Write(kb)
			sb.WriteString(": ")
			writeJSONText(sb, v[k])
		}
		sb.WriteByte('}')
	default:
		b, _ := json.Marshal(v)
		sb.Write(b)
	}
}
