package work

import (
	"github.com/onnxpe/onnxpe/passes"
	"slices"
)

// mergeFinding adds f to a detector's findings out: merged into the first
// finding with f's scheme and params (and for which alike, when given,
// holds), or appended. One scheme and parameter set is one finding over
// every layer it reaches.
func (w *Work) MergeFinding(out []*passes.Finding, f *passes.Finding, alike func(g, f *passes.Finding) bool) []*passes.Finding {
	for _, g := range out {
		if g.Scheme == f.Scheme && passes.SameParams(g.Params, f.Params) && (alike == nil || alike(g, f)) {
			w.merge(g, f)
			return out
		}
	}
	return append(out, f)
}

// merge adds f's layers and nodes to g, and the per-block evidence of the
// schemes that keep one (EvidenceMerger).
func (w *Work) merge(g, f *passes.Finding) {
	g.Layers = passes.SortedUnique(append(g.Layers, f.Layers...))
	g.Nodes = w.SortOrig(append(g.Nodes, f.Nodes...))
	if ge, ok := g.Evidence.(passes.EvidenceMerger); ok && f.Evidence != nil {
		ge.MergeEvidence(f.Evidence, w.SortOrig)
	}
}

// sortOrig dedups original node names and sorts them in the original order.
func (w *Work) SortOrig(names []string) []string {
	w.origIndexes()
	// Each name's place is looked up once, not at every comparison (a
	// 100k-node model's findings list tens of thousands of names). Sorting
	// the pairs by place makes the comparisons and swaps sorting the names
	// by place would, so the order is the same.
	keyed := make([]keyedName, len(names))
	for i, name := range names {
		keyed[i] = keyedName{w.nameOrder[name], name}
	}
	slices.SortFunc(keyed, func(a, b keyedName) int { return a.k - b.k })
	out := make([]string, len(keyed))
	for i, kn := range keyed {
		out[i] = kn.name
	}
	return slices.Compact(out)
}

type keyedName struct {
	k    int
	name string
}
