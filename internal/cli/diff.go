package cli

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/onnxpe/onnxpe/graph"
)

type diffOptions struct {
	IO   *IOStreams
	A, B string
	JSON bool
}

// NewCmdDiff builds `onnxpe diff`.
func NewCmdDiff(ios *IOStreams) *cobra.Command {
	opts := &diffOptions{IO: ios}
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare the audits of two models (or two saved audit reports), field by field",
		Long: `Diff audits models A and B (or reads their audit reports, saved with
onnxpe audit MODEL --json) and prints what differs in their positional
encodings: the scheme of each attention layer, the findings of each scheme
(one present in a model and not in the other), and for the findings of
both, their layers, whether the encoding is a fused op, the subgraph of a
generation op holding it, and every param (a value changed, a param
present in one only). Node names and notes are not compared: a rewrite or
an extension renames nodes without changing the encoding.

Findings are paired by scheme (and subgraph), those of one scheme by the
layers they share. Values are compared exactly as the reports print them.
As a CI check that an extension or a rewrite changed exactly what it
should: onnxpe diff model.onnx extended.onnx --json, exit 1 and the
changed params.

A and B are each a model file or a JSON report (a file starting with {,
or a list of one report). --json prints {"a", "b", "equal",
"differences": [{"kind", "scheme", "layers", "field", "a", "b"}]}
(internal/cli/reports.schema.json#/$defs/diff).

Exit codes:
  0  the audits of A and B agree
  1  they differ (the differences are printed)
  2  usage error, or A or B cannot be read (a model that cannot be read,
     a JSON file that is not one audit report)
  3  internal error (a bug: please report it)
` + exitInterruptedHelp,
		Example: `  onnxpe diff model.onnx model_8k.onnx
  onnxpe diff model.onnx rewritten.onnx --json
  onnxpe diff audit-v1.json audit-v2.json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.A, opts.B = args[0], args[1]
			return diffRun(opts)
		},
	}
	cmd.Flags().BoolVar(&opts.JSON, "json", false, "print JSON")
	return cmd
}

// diffReport is what onnxpe diff prints (reports.schema.json#/$defs/diff).
type diffReport struct {
	A           string        `json:"a"`
	B           string        `json:"b"`
	Equal       bool          `json:"equal"`
	Differences []*difference `json:"differences"`
}

// difference is one field in which the audits of A and B differ.
type difference struct {
	// Kind is attention_layers (how many layers the audit found), layer
	// (the scheme of one layer), finding_removed (in A only),
	// finding_added (in B only) or field (of a finding of both).
	Kind string `json:"kind"`
	// Scheme and Layers are the finding's (A's; B's when added); empty
	// for the kinds about layers.
	Scheme string `json:"scheme,omitempty"`
	Layers []int  `json:"layers,omitempty"`
	// Field names what differs: "attention_layers", "layers[3]",
	// "layers", "fused", "subgraph", "params.base", ...
	Field string `json:"field"`
	// A and B are the values (JSON); absent when the field is not there.
	A json.RawMessage `json:"a,omitempty"`
	B json.RawMessage `json:"b,omitempty"`
}

func diffRun(opts *diffOptions) error {
	a, err := diffInput(opts, opts.A)
	if err != nil {
		return err
	}
	b, err := diffInput(opts, opts.B)
	if err != nil {
		return err
	}
	rep := &diffReport{A: opts.A, B: opts.B, Differences: diffReports(a, b)}
	rep.Equal = len(rep.Differences) == 0
	if rep.Differences == nil {
		rep.Differences = []*difference{}
	}
	if opts.JSON {
		if err := writeJSON(opts.IO, rep); err != nil {
			return err
		}
	} else {
		writeDiffTable(opts.IO.Out, rep, a, b)
	}
	if !rep.Equal {
		return &checkFailed{msg: fmt.Sprintf("diff: the audits of %s and %s differ in %s", opts.A, opts.B, count(len(rep.Differences), "field"))}
	}
	return nil
}

// auditJSONReport is an audit report as JSON values (the shape of
// passes/report.schema.json), from a model's audit or a saved report.
type auditJSONReport struct {
	Model  string `json:"model"`
	Layers []struct {
		Index  int    `json:"index"`
		Scheme string `json:"scheme"`
	} `json:"layers"`
	Findings []*jsonFinding `json:"findings"`
}

type jsonFinding struct {
	Scheme   string                     `json:"scheme"`
	Layers   []int                      `json:"layers"`
	Fused    json.RawMessage            `json:"fused"`
	Subgraph string                     `json:"subgraph"`
	Params   map[string]json.RawMessage `json:"params"`
}

// diffInput reads path: a saved JSON report, or a model it audits.
func diffInput(opts *diffOptions, path string) (*auditJSONReport, error) {
	if js, err := readJSONReport(path); js != nil || err != nil {
		return js, err
	}
	res := auditOne(&auditOptions{IO: opts.IO, Format: "json"}, auditFile{path: path, given: true}, 0)
	_, _ = opts.IO.ErrOut.Write(res.warn.Bytes())
	if res.err != nil {
		return nil, res.err
	}
	b, err := json.Marshal(res.report)
	if err != nil {
		return nil, err
	}
	var r auditJSONReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// maxReportBytes bounds a saved report diff reads.
const maxReportBytes = 1 << 30

// readJSONReport reads path as a saved audit report when it holds JSON
// (its first character that is not a space is { or [): one report, or a
// list holding one. It returns nil, nil for other files (models).
func readJSONReport(path string) (*auditJSONReport, error) {
	f, _, err := graph.OpenRegular(path)
	if err != nil {
		return nil, nil // the model's load says what is wrong
	}
	first, err := firstByte(bufio.NewReader(f))
	f.Close()
	if err != nil || first != '{' && first != '[' {
		return nil, nil
	}
	b, err := graph.ReadRegularFile(path, maxReportBytes)
	if err != nil {
		return nil, badInput("%s: %v", path, pathErr(err))
	}
	b = bytes.TrimSpace(b)
	if b[0] == '[' {
		var list []json.RawMessage
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, badInput("%s: not an audit report: %v", path, err)
		}
		if len(list) != 1 {
			return nil, badInput("%s: a list of %d audit reports: diff compares one model's report with another's (save one with onnxpe audit MODEL --json)", path, len(list))
		}
		b = list[0]
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, badInput("%s: not an audit report: %v", path, err)
	}
	if e, ok := probe["error"]; ok {
		return nil, badInput("%s: the report of a model that could not be audited: %s", path, oneLine(string(e)))
	}
	for _, k := range []string{"model", "schemes", "layers", "findings"} {
		if _, ok := probe[k]; !ok {
			return nil, badInput("%s: not an audit report (no %q field; save one with onnxpe audit MODEL --json)", path, k)
		}
	}
	var r auditJSONReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, badInput("%s: not an audit report: %v", path, err)
	}
	return &r, nil
}

func firstByte(r io.ByteReader) (byte, error) {
	for {
		c, err := r.ReadByte()
		if err != nil || !strings.ContainsRune(" \t\r\n", rune(c)) {
			return c, err
		}
	}
}

// diffReports lists the fields in which b differs from a: the number of
// attention layers, the scheme of each layer, then the findings.
func diffReports(a, b *auditJSONReport) []*difference {
	var out []*difference
	js := func(v any) json.RawMessage {
		x, _ := json.Marshal(v)
		return x
	}
	if len(a.Layers) != len(b.Layers) {
		out = append(out, &difference{Kind: "attention_layers", Field: "attention_layers", A: js(len(a.Layers)), B: js(len(b.Layers))})
	}
	la, lb := map[int]string{}, map[int]string{}
	var idx []int
	for _, l := range a.Layers {
		la[l.Index] = l.Scheme
		idx = append(idx, l.Index)
	}
	for _, l := range b.Layers {
		lb[l.Index] = l.Scheme
		if _, ok := la[l.Index]; !ok {
			idx = append(idx, l.Index)
		}
	}
	sort.Ints(idx)
	for _, i := range idx {
		sa, oka := la[i]
		sb, okb := lb[i]
		if oka && okb && sa == sb {
			continue
		}
		d := &difference{Kind: "layer", Field: fmt.Sprintf("layers[%d]", i)}
		if oka {
			d.A = js(sa)
		}
		if okb {
			d.B = js(sb)
		}
		out = append(out, d)
	}
	pairs, removed, added := pairFindings(a.Findings, b.Findings)
	for _, p := range pairs {
		out = append(out, diffFinding(p[0], p[1])...)
	}
	for _, f := range removed {
		out = append(out, &difference{Kind: "finding_removed", Scheme: f.Scheme, Layers: f.Layers, Field: "finding", A: js(f)})
	}
	for _, f := range added {
		out = append(out, &difference{Kind: "finding_added", Scheme: f.Scheme, Layers: f.Layers, Field: "finding", B: js(f)})
	}
	return out
}

// pairFindings pairs the findings of a and b of one scheme and subgraph,
// those sharing the most layers first (in A's order on ties); the rest are
// removed (in a only) or added (in b only).
func pairFindings(a, b []*jsonFinding) (pairs [][2]*jsonFinding, removed, added []*jsonFinding) {
	usedB := make([]bool, len(b))
	pairedA := make([]bool, len(a))
	type cand struct{ i, j, shared int }
	var cands []cand
	for i, fa := range a {
		for j, fb := range b {
			if fa.Scheme == fb.Scheme && fa.Subgraph == fb.Subgraph {
				shared := 0
				for _, l := range fa.Layers {
					if slices.Contains(fb.Layers, l) {
						shared++
					}
				}
				cands = append(cands, cand{i, j, shared})
			}
		}
	}
	sort.SliceStable(cands, func(x, y int) bool { return cands[x].shared > cands[y].shared })
	for _, c := range cands {
		if pairedA[c.i] || usedB[c.j] {
			continue
		}
		pairedA[c.i], usedB[c.j] = true, true
		pairs = append(pairs, [2]*jsonFinding{a[c.i], b[c.j]})
	}
	sort.SliceStable(pairs, func(x, y int) bool {
		return slices.Index(a, pairs[x][0]) < slices.Index(a, pairs[y][0])
	})
	for i, f := range a {
		if !pairedA[i] {
			removed = append(removed, f)
		}
	}
	for j, f := range b {
		if !usedB[j] {
			added = append(added, f)
		}
	}
	return pairs, removed, added
}

// diffFinding compares two paired findings: layers, fused, subgraph and
// every param, in the order of their names.
func diffFinding(a, b *jsonFinding) []*difference {
	var out []*difference
	field := func(name string, va, vb json.RawMessage) {
		if jsonEqual(va, vb) {
			return
		}
		out = append(out, &difference{Kind: "field", Scheme: a.Scheme, Layers: a.Layers, Field: name, A: va, B: vb})
	}
	js := func(v any) json.RawMessage {
		x, _ := json.Marshal(v)
		return x
	}
	field("layers", js(a.Layers), js(b.Layers))
	field("fused", a.Fused, b.Fused)
	if a.Subgraph != b.Subgraph {
		field("subgraph", js(a.Subgraph), js(b.Subgraph))
	}
	var keys []string
	for k := range a.Params {
		keys = append(keys, k)
	}
	for k := range b.Params {
		if _, ok := a.Params[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		field("params."+k, a.Params[k], b.Params[k])
	}
	return out
}

// jsonEqual compares two JSON values (nil: absent) as values: numbers by
// their value, objects whatever the order of their keys.
func jsonEqual(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return bytes.Equal(a, b)
	}
	ca, _ := json.Marshal(va)
	cb, _ := json.Marshal(vb)
	return bytes.Equal(ca, cb)
}

// diffValue prints a value of the table: its JSON, "(absent)", long lists
// cut.
func diffValue(v json.RawMessage) string {
	if v == nil {
		return "(absent)"
	}
	var x any
	if err := json.Unmarshal(v, &x); err == nil {
		if l, ok := x.([]any); ok && len(l) > 6 {
			head, _ := json.Marshal(l[:3])
			return fmt.Sprintf("%s...] (%d values)", strings.TrimSuffix(string(head), "]"), len(l))
		}
		if _, ok := x.(map[string]any); ok {
			if c, err := json.Marshal(x); err == nil && len(c) > 60 {
				return string(c[:57]) + "..."
			}
		}
		c, _ := json.Marshal(x)
		return string(c)
	}
	return string(v)
}

func writeDiffTable(out io.Writer, rep *diffReport, a, b *auditJSONReport) {
	fmt.Fprintf(out, "A %s\nB %s\n", rep.A, rep.B)
	if rep.Equal {
		fmt.Fprintf(out, "no difference: the audits agree (%s, %d attention layers)\n", count(len(a.Findings), "finding"), len(a.Layers))
		return
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEME\tLAYERS\tFIELD\tA\tB")
	for _, d := range rep.Differences {
		va, vb := diffValue(d.A), diffValue(d.B)
		switch d.Kind {
		case "finding_removed":
			va, vb = "present", "(absent)"
		case "finding_added":
			va, vb = "(absent)", "present"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cmp.Or(d.Scheme, "-"), layerRange(d.Layers), d.Field, va, vb)
	}
	tw.Flush()
	fmt.Fprintf(out, "%s: the audits of A and B differ\n", count(len(rep.Differences), "difference"))
}
