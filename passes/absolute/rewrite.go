package absolute

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
	"github.com/onnxpe/onnxpe/passes"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
)

func AbsolutePass(r *rewrite.Rewrite, c *passes.Context, pass, scheme string, detector *passes.Pass[[]*passes.Finding]) (*rewrite.Change, error) {
	return r.Findings(c, rewrite.Findings{Pass: pass, Scheme: scheme, Detect: detector,
		Do: func(w *work.Work, f *passes.Finding, _ *rewrite.Change) error {
			done, kept, err := absolute(r, w, f)
			if err == nil && !done {
				return rewrite.Unchanged("%s: nothing to rewrite", kept)
			}
			return err
		}})
}

// absolute rewrites one absolute encoding; false, with what the model
// does, when it is already a read of a stored table it leaves as it is.
func absolute(r *rewrite.Rewrite, w *work.Work, f *passes.Finding) (done bool, kept string, err error) {
	ev, ok := f.Evidence.(*TableEvidence)
	if !ok {
		return false, "", fmt.Errorf("%w: the finding has no table evidence", rewrite.ErrRewrite)
	}
	x := rewrite.WorkValue(w, ev.Value)
	if x == nil {
		return false, "", fmt.Errorf("%w: the encoding %q is not a value of the model", rewrite.ErrRewrite, ev.Value)
	}
	cone := w.Cone(x)
	computed := false
	for _, n := range cone {
		switch n.OpType {
		case "Sin", "Cos", "If", "Loop", "Scan", "ScatterND", "ScatterElements", "Exp", "Pow":
			computed = true
		}
	}
	if computed {
		if ev.Positions == nil {
			return false, "", fmt.Errorf("%w: %s", rewrite.ErrRewrite, ev.PositionsWhy)
		}
		return true, "", absoluteTable(r, w, ev, x)
	}
	// A stored table gathered at consecutive positions, on its axis of
	// positions (axis 1 of a table stored transposed, [dim, positions]).
	var gather *graph.Node
	axis := ev.Axis
	for _, n := range cone {
		if n.OpType != "Gather" || !work.IsONNX(n) || !w.IsConst(n.Input(0)) || w.Name(n.Input(0)) != ev.Table || w.IsConst(n.Input(1)) {
			continue
		}
		if r := w.Shape(n.Input(0)).Rank(); r > 0 && work.NormAxis(n.AttrInt("axis", 0), r) == axis {
			gather = n
		}
	}
	switch {
	case gather == nil:
		return false, "the stored table is read without a Gather (sliced, or added whole)", nil
	case ev.Positions == nil:
		return false, "the stored table is gathered where no value holds the positions (" + ev.PositionsWhy + ")", nil
	}
	pos := ev.Positions
	if pos.Value == "" {
		return false, fmt.Sprintf("the stored table is gathered where no value holds the positions (%s)", pos), nil
	}
	if !pos.Ranged {
		return false, fmt.Sprintf("the stored table is gathered at positions that are data (%s), not a Range", pos), nil
	}
	// The Slice is the Gather's rows only where the Gather reads the
	// positions as they are, or shifted by one number (Range(0, S) plus
	// the cache's length: rows past..past+S-1).
	var shift *graph.Value
	if ix := rewrite.PassedFrom(w, gather.Input(1), pos.WorkValue); ix != pos.WorkValue {
		if shift = shiftOf(w, ix, pos.WorkValue); shift == nil {
			return false, "", fmt.Errorf("%w: the table is gathered at %s, which %s computes from the positions %s: the rows it reads are not the slice those bound", rewrite.ErrRewrite, w.Name(gather.Input(1)), rewrite.OpOf(ix), pos.Value)
		}
	}
	out, err := r.Lookup(rewrite.MainName(w, gather.Output(0)))
	if err != nil {
		return false, "", err
	}
	// Normalisation reads a one-hot MatMul as a Gather; the model's own
	// op gives zero rows at positions past the table, where a Slice
	// refuses the sequence.
	if p := out.Producer(); p == nil || p.OpType != "Gather" {
		return false, "", fmt.Errorf("%w: the table's rows are read by %s, not a Gather: it gives zero rows at positions past the table's rows, which a Slice cannot", rewrite.ErrRewrite, rewrite.OpOf(out))
	}
	table, err := r.Lookup(ev.Table)
	if err != nil {
		return false, "", err
	}
	// The Gather's output may carry a batch the slice does not: only
	// elementwise readers broadcast it back.
	idx := w.Shape(gather.Input(1))
	if slices.ContainsFunc(idx.Dims, func(d work.Dim) bool { return d.IsSym() && w.IsBatchSym(d) }) {
		for _, u := range out.Uses() {
			switch u.Node.OpType {
			case "Add", "Sub", "Mul":
			default:
				return false, "", fmt.Errorf("%w: the gathered rows have a batch axis that %s (%s) reads as it is", rewrite.ErrRewrite, work.NodeName(u.Node), u.Node.OpType)
			}
		}
	}
	start, limit, err := r.Bounds(w, pos)
	if err != nil {
		return false, "", err
	}
	if shift != nil {
		var d *graph.Value
		if t := w.Const(shift); t != nil {
			d = r.VecInt(int64(t.Float64s()[0]))
		} else {
			if d, err = r.Lookup(w.OrigValue(shift)); err != nil {
				return false, "", err
			}
			d = rewrite.Typed(r.Op1("Reshape", []*graph.Value{r.CastInt64(d, w.ElemType(shift)), r.VecInt(1)}), graph.Int64, 1)
		}
		start = rewrite.Typed(r.Op1("Add", []*graph.Value{start, d}), graph.Int64, 1)
		limit = rewrite.Typed(r.Op1("Add", []*graph.Value{limit, d}), graph.Int64, 1)
	}
	// Gather gives the table's axes with the index's in place of the
	// axis of positions; the Slice that axis cut to the positions: the
	// index's leading axes (of size 1, or a batch its readers broadcast)
	// are inserted before it.
	dt := w.ElemType(gather.Output(0))
	tr := w.Shape(gather.Input(0)).Rank()
	y := rewrite.Typed(r.Op1("Slice", []*graph.Value{table, start, limit, r.VecInt(int64(axis))}), dt, tr)
	for i := 1; i < idx.Rank(); i++ {
		y = rewrite.Typed(r.Unsqueeze(y, int64(axis)), dt, tr+i)
	}
	if out.Type != nil {
		y.Type = out.Type.Clone()
	}
	out.ReplaceKeepingName(y)
	return true, "", nil
}

// absoluteTable replaces a computed encoding x by rows of a constant
// table holding its values at positions 0..N-1.
func absoluteTable(r *rewrite.Rewrite, w *work.Work, ev *TableEvidence, x *graph.Value) error {
	n := r.Opts.MaxPositions
	if n <= 0 {
		n = passes.DefaultMaxPositions
	}
	pos := ev.Positions
	pr := probe.NewProbe(w, 1, n, 0)
	pr.Budget = 1 << 22
	cuts := map[*graph.Value]*kernels.Tensor{}
	if err := probe.CutPositions(w, pr, pos, 0, cuts); err != nil {
		return fmt.Errorf("%w: %v", rewrite.ErrRewrite, err)
	}
	pr.SetCuts(cuts)
	rows, why := TableRows(w, pr, x)
	var dt graph.DataType
	if t, err := pr.Value(x); err == nil {
		dt = t.DType
	}
	if !dt.IsFloat() {
		return fmt.Errorf("%w: the encoding has element type %v", rewrite.ErrRewrite, dt)
	}
	if rows == nil || len(rows) != n {
		return fmt.Errorf("%w: evaluating the encoding at positions 0..%d: %s", rewrite.ErrRewrite, n-1, why)
	}
	fromZero := (pos.Value == "" || pos.Ranged) && pos.Start == "" && pos.StartConst == 0
	for i, r0 := range ev.Rows0 {
		if fromZero && i < len(rows) && !slices.Equal(rows[i], r0) {
			return fmt.Errorf("%w: the rows evaluated at 0..%d are not those the detector read", rewrite.ErrRewrite, n-1)
		}
	}
	d := len(rows[0])
	flat := make([]float64, 0, n*d)
	for _, row := range rows {
		flat = append(flat, row...)
	}
	table, err := r.Table("onnxpe_position_table", dt, []int64{int64(n), int64(d)}, flat)
	if err != nil {
		return err
	}
	out, err := r.Lookup(ev.Value)
	if err != nil {
		return err
	}
	xs := w.Shape(x)
	var y *graph.Value
	switch {
	case pos.Value != "" && !pos.Ranged:
		// Positions are data: gather the rows.
		p, err := r.Lookup(pos.Value)
		if err != nil {
			return err
		}
		p = r.CastInt64(p, w.ElemType(pos.WorkValue))
		y = rewrite.Typed(r.Op1("Gather", []*graph.Value{table, p}, graph.IntAttr("axis", 0)), dt, w.Shape(pos.WorkValue).Rank()+1)
	default:
		var start, limit *graph.Value
		if pos.Ranged {
			if start, limit, err = r.Bounds(w, pos); err != nil {
				return err
			}
		} else {
			// start + 0..S-1, S the sequence of the activation the
			// encoding is added to.
			if start, err = r.BoundValue(w, pos.Start, pos.WorkStart, pos.StartConst, pos.StartIndex); err != nil {
				return err
			}
			act, err := addend(r, ev)
			if err != nil {
				return err
			}
			if len(xs.Dims) < 2 {
				return fmt.Errorf("%w: the encoding has shape %s", rewrite.ErrRewrite, w.ShapeString(xs))
			}
			seq := r.DimOf(act, -2)
			limit = rewrite.Typed(r.Op1("Add", []*graph.Value{start, seq}), graph.Int64, 1)
		}
		y = rewrite.Typed(r.Op1("Slice", []*graph.Value{table, start, limit, r.VecInt(0)}), dt, 2)
		for i := 2; i < xs.Rank(); i++ {
			y = rewrite.Typed(r.Unsqueeze(y, 0), dt, i+1)
		}
	}
	if out.Type != nil {
		y.Type = out.Type.Clone()
	}
	out.ReplaceKeepingName(y)
	return nil
}

// addend is the activation the encoding is added to (the other input of
// the Add), in the rewritten model.
func addend(r *rewrite.Rewrite, ev *TableEvidence) (*graph.Value, error) {
	var add *graph.Node
	for _, n := range r.M.Graph.Nodes() {
		if work.NodeName(n) == ev.Add {
			add = n
		}
	}
	if add == nil || len(add.Inputs()) != 2 {
		return nil, fmt.Errorf("%w: the Add %q of the encoding is not in the model", rewrite.ErrRewrite, ev.Add)
	}
	if add.Input(0).Name == ev.Value {
		return add.Input(1), nil
	}
	return add.Input(0), nil
}

// shiftOf is d when v is the sum of the positions pos (through casts and
// layout) and d, one integer number (a constant or a value of the
// original model): the positions moved by d. Nil otherwise.
func shiftOf(w *work.Work, v, pos *graph.Value) *graph.Value {
	n := v.Producer()
	if n == nil || !work.IsONNX(n) || n.OpType != "Add" || len(n.Inputs()) != 2 {
		return nil
	}
	for i := 0; i < 2; i++ {
		if rewrite.PassedFrom(w, n.Input(i), pos) != pos {
			continue
		}
		d := n.Input(1 - i)
		s := w.Shape(d)
		if d == nil || !s.Ranked || !w.ElemType(d).IsInt() || slices.ContainsFunc(s.Dims, func(x work.Dim) bool { return x != 1 }) {
			return nil
		}
		if w.IsConst(d) || w.OrigValue(d) != "" {
			return d
		}
	}
	return nil
}
