package passes

import (
	_ "embed"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
)

// Report is the audit of one model: the schemes found, the scheme reaching
// every attention layer, and the findings. Its JSON form is the report of
// `onnxpe audit --json` (see DESIGN.md and report.schema.json).
type Report struct {
	Model    string        `json:"model"`
	Schemes  []string      `json:"schemes"`
	Layers   []LayerScheme `json:"layers"`
	Findings []*Finding    `json:"findings"`
}

// LayerScheme is the scheme one attention layer receives.
type LayerScheme struct {
	Index  int    `json:"index"`
	Scheme string `json:"scheme"`
}

// LayerRanges prints sorted layer indexes as runs of consecutive ones,
// joined by dash within a run and sep between runs: [0 1 2 3 5] with "-"
// and "," is "0-3,5". No layers is "".
func LayerRanges(ls []int, dash, sep string) string {
	var parts []string
	for _, r := range runs(len(ls), func(k int) bool { return ls[k+1] == ls[k]+1 }) {
		parts = append(parts, rangeString(ls[r[0]], ls[r[1]], dash))
	}
	return strings.Join(parts, sep)
}

// SchemeRuns prints the scheme of every layer in runs of consecutive
// layers with one scheme: "0-2 rope, 3 nope" with dash "-".
func SchemeRuns(ls []LayerScheme, dash string) string {
	var parts []string
	for _, r := range runs(len(ls), func(k int) bool { return ls[k+1].Scheme == ls[k].Scheme && ls[k+1].Index == ls[k].Index+1 }) {
		parts = append(parts, rangeString(ls[r[0]].Index, ls[r[1]].Index, dash)+" "+ls[r[0]].Scheme)
	}
	return strings.Join(parts, ", ")
}

// runs splits 0..n-1 into maximal runs [i, j] in which next(k) says that
// k+1 continues k's run.
func runs(n int, next func(k int) bool) [][2]int {
	var out [][2]int
	for i := 0; i < n; {
		j := i
		for j+1 < n && next(j) {
			j++
		}
		out = append(out, [2]int{i, j})
		i = j + 1
	}
	return out
}

// rangeString is "a" or "a<dash>b".
func rangeString(a, b int, dash string) string {
	if a == b {
		return strconv.Itoa(a)
	}
	return strconv.Itoa(a) + dash + strconv.Itoa(b)
}

// Detectors are the passes whose results are findings ([]*Finding). The
// report collects them; adding a detector is adding it here.
var Detectors = []*Pass{RoPE, SinusoidalPass, LearnedPass, ALiBiPass, T5Pass, Shaw, RelativeSinusoidalPass, DisentangledPass, ComplexOrderPass, FloaterPass}

// Audit assembles the report from the detectors' findings.
var Audit = &Pass{
	Name: "audit",
	Doc: `Collect the findings of every detector into the report.

Each attention block gets the scheme of the finding that reaches it
(relative schemes before absolute ones when two do); blocks no finding
reaches get nope. The findings of the graphs generation ops run (audited
as models of their own) join with their layers renumbered and the graph
they live in named. The findings are ordered by their first layer.`,
	Requires: append([]*Pass{Normalize, Generation, Blocks, Sides, Temperatures}, Detectors...),
	Run:      runAudit,
}

// priority orders the schemes a layer may receive from two findings.
var priority = map[string]int{RoPEScheme: 0, ALiBi: 1, T5RelativeBias: 2, RelativeClipped: 3, Sinusoidal: 4, LearnedAbsolute: 5, NoPE: 9,
	RelativeSinusoidal: 3, Disentangled: 3, ComplexOrder: 4, Floater: 4}

func runAudit(c *Context) (any, error) {
	blocks := c.ResultOf[Blocks].([]*Block)
	var all []*Finding
	for _, d := range Detectors {
		if fs, ok := c.ResultOf[d].([]*Finding); ok {
			all = append(all, fs...)
		}
	}
	all = dropSubsumed(all)
	// The graphs of generation ops, with their layers renumbered.
	var subLayers []LayerScheme
	subs, _ := c.ResultOf[Generation].([]*SubAudit)
	for _, sa := range subs {
		for _, f := range sa.Report.Findings {
			g := *f
			g.Layers = make([]int, len(f.Layers))
			for i, l := range f.Layers {
				g.Layers[i] = sa.Base + l
			}
			g.Subgraph = sa.Where
			if f.Subgraph != "" {
				g.Subgraph = sa.Where + "/" + f.Subgraph
			}
			all = append(all, &g)
		}
		for _, l := range sa.Report.Layers {
			subLayers = append(subLayers, LayerScheme{Index: sa.Base + l.Index, Scheme: l.Scheme})
		}
	}
	scheme := map[int]string{}
	for _, f := range all {
		for _, l := range f.Layers {
			if old, ok := scheme[l]; !ok || priority[f.Scheme] < priority[old] {
				scheme[l] = f.Scheme
			}
		}
	}
	var unreached []int
	for _, b := range blocks {
		if _, ok := scheme[b.Index]; !ok {
			unreached = append(unreached, b.Index)
		}
	}
	if len(unreached) > 0 || len(all) == 0 {
		w := c.Work()
		temps := c.ResultOf[Temperatures].(map[int]*Temperature)
		var fs []*Finding
		for _, l := range unreached {
			scheme[l] = NoPE
			p := &NoPEParams{Temperature: temps[l]}
			var f *Finding
			for _, g := range fs {
				if sameParams(g.Params, p) {
					f = g
				}
			}
			if f == nil {
				f = &Finding{Scheme: NoPE, Params: p}
				fs = append(fs, f)
			}
			f.Layers = append(f.Layers, l)
			if p.Temperature != nil {
				for _, b := range blocks {
					if b.Index == l {
						if bs := c.ResultOf[Sides].(map[*Block]*BlockSides)[b]; bs != nil && bs.Q != nil {
							f.Nodes = w.sortOrig(append(f.Nodes, w.origNames(append(bs.Q.Nodes, w.cone(bs.Q.Pos...)...))...))
						}
					}
				}
			}
		}
		if len(fs) == 0 {
			fs = append(fs, &Finding{Scheme: NoPE, Params: &NoPEParams{}})
		}
		all = append(all, fs...)
	}
	for _, f := range all {
		f.Layers = sortedUnique(f.Layers)
		if f.Layers == nil {
			f.Layers = []int{}
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := firstLayer(all[i]), firstLayer(all[j])
		if a != b {
			return a < b
		}
		return priority[all[i].Scheme] < priority[all[j].Scheme]
	})
	r := &Report{Findings: all, Layers: []LayerScheme{}}
	for _, b := range blocks {
		r.Layers = append(r.Layers, LayerScheme{Index: b.Index, Scheme: scheme[b.Index]})
	}
	r.Layers = append(r.Layers, subLayers...)
	sort.Slice(r.Layers, func(i, j int) bool { return r.Layers[i].Index < r.Layers[j].Index })
	for _, f := range all {
		if !slices.Contains(r.Schemes, f.Scheme) {
			r.Schemes = append(r.Schemes, f.Scheme)
		}
	}
	sort.Strings(r.Schemes)
	return r, nil
}

func firstLayer(f *Finding) int {
	if len(f.Layers) == 0 {
		return 1 << 30
	}
	return f.Layers[0]
}

// AuditModel runs the audit of m; name is the report's model field.
func AuditModel(m *graph.Model, name string, opts Options) (*Report, *Context, error) {
	opts.AuditGraph = AuditModel
	ctx, err := Run(m, opts, Audit)
	if err != nil {
		return nil, ctx, err
	}
	r := ctx.ResultOf[Audit].(*Report)
	r.Model = name
	return r, ctx, nil
}

// ReportSchema is the JSON Schema (draft 2020-12) of a Report.
//
//go:embed report.schema.json
var ReportSchema []byte

// dropSubsumed leaves out findings of one scheme whose every node belongs
// to a finding of another scheme reaching the same layers: a part of that
// scheme another detector read as an encoding of its own (Transformer-XL's
// per-head biases u and v, constants added to q, look to the absolute
// detector like a table with a row per head).
func dropSubsumed(all []*Finding) []*Finding {
	var out []*Finding
	for _, f := range all {
		if !subsumed(f, all) {
			out = append(out, f)
		}
	}
	return out
}

func subsumed(f *Finding, all []*Finding) bool {
	if len(f.Nodes) == 0 {
		return false
	}
	for _, g := range all {
		if g == f || g.Scheme == f.Scheme || g.Subgraph != f.Subgraph || len(g.Nodes) <= len(f.Nodes) {
			continue
		}
		if !containsAll(g.Layers, f.Layers) || !containsAll(g.Nodes, f.Nodes) {
			continue
		}
		return true
	}
	return false
}

func containsAll[T comparable](set, sub []T) bool {
	in := make(map[T]bool, len(set))
	for _, x := range set {
		in[x] = true
	}
	for _, x := range sub {
		if !in[x] {
			return false
		}
	}
	return true
}
