package floater

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/absolute"
	"github.com/onnxpe/onnxpe/passes/work"
)

// inputFindings are the findings of injection add_to_input: encodings
// added to the embeddings (the absolute pass) whose rows are read from a
// table of states integrated in the graph (a chain of solver steps that
// normalisation folded, or a Loop). The finding names the integration's
// nodes besides the encoding's, so that it covers the learned table the
// learned detector reads in the same rows. A stored table of states is
// not told from a learned one by its values: it stays learned.
func inputFindings(c *passes.Context, w *work.Work) []*passes.Finding {
	var out []*passes.Finding
	for _, e := range passes.Result(c, absolute.Absolute) {
		if e.Fused || e.NotEvaluated != "" || !e.Varies {
			continue
		}
		table := integratedTable(w, e)
		if table == nil {
			continue
		}
		f, why := integration(w, table)
		if f == nil {
			c.Miss("floater", e.Evidence.Add, why, 1)
			continue
		}
		p := f.Params.(*Params)
		p.Injection, p.Dim = "add_to_input", e.Dim
		f.Layers = e.Layers
		f.Nodes = w.SortOrig(append(f.Nodes, e.Nodes...))
		out = append(out, f)
	}
	return out
}

// integratedTable is the table of states e's rows are read from, when the
// graph integrates it: the stored table of e, or the data of a Slice or
// Gather of its cone, folded from a solver's chain or computed by a Loop.
func integratedTable(w *work.Work, e *absolute.Encoding) *graph.Value {
	cands := []*graph.Value{e.Table}
	for _, n := range w.Cone(e.X) {
		if n.OpType == "Slice" || n.OpType == "Gather" {
			cands = append(cands, n.Input(0))
		}
	}
	for _, t := range cands {
		if t != nil && !w.IsAct(t) && (w.FoldedFrom(t) != nil && len(foldedStates(w, t)) >= 3 || loopOf(w, t) != nil) {
			return t
		}
	}
	return nil
}
