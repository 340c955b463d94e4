package work

import (
	"github.com/onnxpe/onnxpe/passes"
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
