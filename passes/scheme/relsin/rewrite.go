package relsin

import (
	"fmt"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/attn"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Rewrites of the family (issue 14): what depends only on positions
// becomes a constant sized by --max-positions, computed by the model's own
// subgraph with the positions replaced, and read back where the model
// computed it.

// RewriteRelSin stores the relative sinusoid of Transformer-XL and XLNet.
var Rewrite = &passes.Pass[*rewrite.Change]{
	Name: "rewrite_relative_sinusoidal",
	Doc: `Replace the relative sinusoid (sin and cos of distance·frequency) by a table gathered at the distances.

The sinusoid of every distance -N..N (N is --max-positions, else 4096) is
what the model's own subgraph computes from the distances (evaluated with
the kernels, the distances replaced): a constant [2N+1, dim] table,
gathered at distance + N where the model computed sin and cos. The
distances themselves (a Range, clamp_len's Clip) stay in the graph.`,
	Requires: []passes.Analyzer{work.Normalize, Detect, rewrite.Edit},
	Run: func(c *passes.Context) (*rewrite.Change, error) {
		r := rewrite.Of(c)
		return r.Findings(c, rewrite.Findings{Pass: "rewrite_relative_sinusoidal", Scheme: Name, Detect: Detect,
			Do: func(w *work.Work, f *passes.Finding, _ *rewrite.Change) error { return relSin(r, w, f) }})
	},
}

// relSin stores one relative sinusoid.
func relSin(r *rewrite.Rewrite, w *work.Work, f *passes.Finding) error {
	ev, ok := f.Evidence.(*Evidence)
	if !ok {
		return fmt.Errorf("%w: no relative sinusoid evidence", rewrite.ErrRewrite)
	}
	if ev.Stored != "" {
		return rewrite.Unchanged("the sinusoid is stored already (%s, read at the distances %s)", ev.Stored, distanceSpan(ev.Distances))
	}
	if ev.Angles == "" {
		return fmt.Errorf("%w: the sinusoid is already a stored table", rewrite.ErrRewrite)
	}
	angles, table := rewrite.WorkValue(w, ev.Angles), rewrite.WorkValue(w, ev.Table)
	if angles == nil || table == nil {
		return fmt.Errorf("%w: the sinusoid is not one value of the model", rewrite.ErrRewrite)
	}
	dist := attn.DistanceOperand(w, angles)
	if dist == nil {
		return fmt.Errorf("%w: the angles are not distances times constant frequencies", rewrite.ErrRewrite)
	}
	n := r.MaxPositions()
	vals := make([]float64, 2*n+1)
	for i := range vals {
		vals[i] = float64(i - n)
	}
	cut := probe.FromFloat64Any(w.ElemType(dist), []int{2*n + 1}, vals)
	if cut == nil {
		return fmt.Errorf("%w: distances of type %v", rewrite.ErrRewrite, w.ElemType(dist))
	}
	pr := probe.NewProbe(w, 1, 2*n+1, 0)
	pr.Budget = 1 << 20
	pr.SetCuts(map[*graph.Value]*kernels.Tensor{dist: cut})
	t, err := pr.Value(table)
	if err != nil {
		return fmt.Errorf("%w: evaluating the sinusoid at distances ±%d: %v", rewrite.ErrRewrite, n, err)
	}
	if t.Rank() != 2 || t.Shape[0] != 2*n+1 {
		return fmt.Errorf("%w: the sinusoid at %d distances has shape %v", rewrite.ErrRewrite, 2*n+1, t.Shape)
	}
	dt := w.ElemType(table)
	tab, err := r.Table("onnxpe_relative_sinusoid", dt, []int64{int64(2*n + 1), int64(t.Shape[1])}, t.Float64s())
	if err != nil {
		return err
	}
	tm, err := r.Lookup(rewrite.MainName(w, table))
	if err != nil {
		return err
	}
	dm, err := r.Lookup(rewrite.MainName(w, dist))
	if err != nil {
		return err
	}
	idx := r.Op1("Add", []*graph.Value{r.CastInt64(dm, w.ElemType(dist)), r.ScalarInt(int64(n))})
	tm.ReplaceKeepingName(rewrite.Typed(r.Op1("Gather", []*graph.Value{tab, idx}, graph.IntAttr("axis", 0)), dt, 2))
	return nil
}

// distanceSpan prints the distances of a stored sinusoid's rows, first to
// last.
func distanceSpan(d []float64) string {
	if len(d) == 0 {
		return "none"
	}
	return fmt.Sprintf("%g .. %g", d[0], d[len(d)-1])
}
