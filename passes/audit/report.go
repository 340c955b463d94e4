package audit

import (
	_ "embed"
	"slices"
	"sort"
	"sync/atomic"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/scheme/nope"
	"github.com/onnxpe/onnxpe/passes/schemes"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Audit assembles the report from the detectors' findings.
var Audit = &passes.Pass[*passes.Report]{
	Name: "audit",
	Doc: `Collect the findings of every detector into the report.

Each attention block gets the scheme of the finding that reaches it
(relative schemes before absolute ones when two do). A block no finding
reaches gets nope only where it is measured: with its q and k held fixed
its scores are the same over every key (or, fused, its op's contract
takes no positions), and no value that changes with the position joins
the activations before it; otherwise unknown, with the reason. A model
with no block and no finding is unknown (no attention found). The findings of the graphs generation ops run (audited
as models of their own) join with their layers renumbered and the graph
they live in named. The findings are ordered by their first layer.`,
	Requires: append([]passes.Analyzer{work.Normalize, attn.Generation, attn.Blocks, attn.Sides, attn.Scores, attn.Entries, nope.Temperatures}, passes.Analyzers(schemes.Detectors()...)...),
	Run:      runAudit,
}

// rank orders the schemes a layer may receive from two findings: the
// scheme's Rank, then its place in the list.
func rank(name string) int {
	for i, sc := range schemes.All {
		if sc.Name == name {
			return sc.Rank*len(schemes.All) + i
		}
	}
	return len(schemes.All) * len(schemes.All)
}

// runs counts the audits of this process (the graphs of generation ops
// included): tests check with Runs that a command audits a model once.
var runs atomic.Int64

// Runs is the number of audits this process has run.
func Runs() int64 { return runs.Load() }

func runAudit(c *passes.Context) (*passes.Report, error) {
	runs.Add(1)
	blocks := passes.Result(c, attn.Blocks)
	var all []*passes.Finding
	for _, d := range schemes.Detectors() {
		all = append(all, passes.Result(c, d)...)
	}
	all = confirm(c, dropSubsumed(all))
	// The graphs of generation ops, with their layers renumbered.
	var subLayers []passes.LayerScheme
	subs := passes.Result(c, attn.Generation)
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
			subLayers = append(subLayers, passes.LayerScheme{Index: sa.Base + l.Index, Scheme: l.Scheme})
		}
	}
	scheme := map[int]string{}
	for _, f := range all {
		for _, l := range f.Layers {
			if old, ok := scheme[l]; !ok || rank(f.Scheme) < rank(old) {
				scheme[l] = f.Scheme
			}
		}
	}
	all = append(all, unclaimed(c, blocks, scheme, all)...)
	for _, f := range all {
		f.Layers = passes.SortedUnique(f.Layers)
		if f.Layers == nil {
			f.Layers = []int{}
		}
	}
	sort.SliceStable(all, func(i, j int) bool {
		a, b := firstLayer(all[i]), firstLayer(all[j])
		if a != b {
			return a < b
		}
		return rank(all[i].Scheme) < rank(all[j].Scheme)
	})
	r := &passes.Report{Findings: all, Layers: []passes.LayerScheme{}}
	for _, b := range blocks {
		r.Layers = append(r.Layers, passes.LayerScheme{Index: b.Index, Scheme: scheme[b.Index]})
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

func firstLayer(f *passes.Finding) int {
	if len(f.Layers) == 0 {
		return 1 << 30
	}
	return f.Layers[0]
}

// AuditModel runs the audit of m; name is the report's model field.
func AuditModel(m *graph.Model, name string, opts passes.Options) (*passes.Report, *passes.Context, error) {
	opts.AuditGraph = AuditModel
	ctx, err := passes.Run(m, opts, Audit)
	if err != nil {
		return nil, ctx, err
	}
	r := passes.Result(ctx, Audit)
	r.Model = name
	return r, ctx, nil
}

// dropSubsumed leaves out findings of one scheme whose every node belongs
// to a finding of another scheme reaching the same layers: a part of that
// scheme another detector read as an encoding of its own (Transformer-XL's
// per-head biases u and v, constants added to q, look to the absolute
// detector like a table with a row per head).
func dropSubsumed(all []*passes.Finding) []*passes.Finding {
	var out []*passes.Finding
	for _, f := range all {
		if !subsumed(f, all) {
			out = append(out, f)
		}
	}
	return out
}

func subsumed(f *passes.Finding, all []*passes.Finding) bool {
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
