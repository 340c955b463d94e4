package floater

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
)

// RewriteFloater stores FLOATER's integrated states.
var Rewrite = &passes.Pass[*rewrite.Change]{
	Name: "rewrite_floater",
	Doc: `Replace FLOATER's integration (an unrolled chain of solver steps or a Loop) by the table of states it produces.

The states depend on the model's weights alone (the initial state, the
dynamics, the time grid): the table the model reads its position biases
from is evaluated with the kernels (the chain as normalisation folds it,
the Loop run) and stored as a constant; the solver's nodes are removed.
The table keeps the model's own number of states: positions past them
would be an extension (onnxpe extend refuses FLOATER), so --max-positions
does not apply. States that follow the call's length are refused.`,
	Requires: []passes.Analyzer{work.Normalize, Detect, rewrite.Edit},
	Run: func(c *passes.Context) (*rewrite.Change, error) {
		r := rewrite.Of(c)
		return r.Findings(c, rewrite.Findings{Pass: "rewrite_floater", Scheme: Name, Detect: Detect,
			Do: func(w *work.Work, f *passes.Finding, _ *rewrite.Change) error { return floater(r, w, f) }})
	},
}

// floater stores the states of one FLOATER finding.
func floater(r *rewrite.Rewrite, w *work.Work, f *passes.Finding) error {
	ev, ok := f.Evidence.(*Evidence)
	p, ok2 := f.Params.(*Params)
	if !ok || !ok2 {
		return fmt.Errorf("%w: no FLOATER evidence", rewrite.ErrRewrite)
	}
	if p.Form == "table" {
		return fmt.Errorf("%w: the states are a stored table already", rewrite.ErrRewrite)
	}
	table := rewrite.WorkValue(w, ev.Table)
	if table == nil {
		return fmt.Errorf("%w: the states %q are not a value of the model", rewrite.ErrRewrite, ev.Table)
	}
	// Weights only: the same table whatever the call's length.
	var t *kernels.Tensor
	for _, n := range []int{4, 9} {
		x, err := probe.NewProbe(w, 1, n, 0).Value(table)
		if err != nil {
			return fmt.Errorf("%w: evaluating the states: %v", rewrite.ErrRewrite, err)
		}
		if t != nil && (!slices.Equal(t.Shape, x.Shape) || !slices.Equal(t.Float64s(), x.Float64s())) {
			return fmt.Errorf("%w: the states follow the call's length (%v at 4 positions, %v at 9): not a constant", rewrite.ErrRewrite, t.Shape, x.Shape)
		}
		t = x
	}
	gt, err := t.ToGraph("onnxpe_floater_states")
	if err != nil {
		return err
	}
	c, err := r.AddConst(gt)
	if err != nil {
		return err
	}
	tm, err := r.Lookup(rewrite.MainName(w, table))
	if err != nil {
		return err
	}
	tm.ReplaceKeepingName(c)
	note := fmt.Sprintf("floater (layers %v): the %d states the %s integration produces are stored (%v %v)", f.Layers, t.Shape[0], p.Form, t.DType, t.Shape)
	if n := r.Opts.MaxPositions; n > 0 && n != t.Shape[0] {
		note += fmt.Sprintf("; --max-positions %d does not apply (positions past the model's %d are an extension)", n, t.Shape[0])
	}
	r.Cur.Note("%s", note)
	return nil
}
