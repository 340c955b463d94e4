package passes

import (
	"errors"
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// RewriteSinusoidal turns sinusoidal encodings computed in the graph into
// a constant table read at the positions.
var RewriteSinusoidal = &Pass{
	Name: "rewrite_sinusoidal",
	Doc: `Replace a sinusoidal encoding computed in the graph by a constant table.

The table ([max_positions, dim], in the model's float type) holds what
the model's own subgraph computes at positions 0..N-1 (evaluated with
the kernels with the positions replaced), N being --max-positions or
4096. It is sliced by the positions where they are consecutive (from a
Range, or 0..S-1) and gathered where they are data (computed from a
mask). A stored table gathered at 0, 1, 2, ... is sliced instead.`,
	Requires: []*Pass{Normalize, SinusoidalPass, Edit},
	Run: func(c *Context) (any, error) {
		return c.rewrite().absolutePass(c, "rewrite_sinusoidal", Sinusoidal, SinusoidalPass)
	},
}

// RewriteLearned turns a learned table gathered at 0, 1, 2, ... into a
// slice of the table.
var RewriteLearned = &Pass{
	Name: "rewrite_learned",
	Doc: `Replace the Gather of a learned position table at 0, 1, 2, ... by a Slice.

When the positions a learned table is read at are consecutive (a Range
offset by a cache length, Range(0, S) plus that length, a slice of
BERT's 0, 1, 2, ... buffer), the Gather and the index computation become
one Slice of the table, on the axis the Gather reads (axis 1 of a table
stored transposed, [dim, positions]). Tables read at positions that are
data (computed from a mask, given as input) and tables added whole are
left as they are, and so, with the reason, are positions computed from a
Range otherwise and rows read by a one-hot MatMul (which gives zero rows
past the table, where a Slice refuses the sequence).`,
	Requires: []*Pass{Normalize, LearnedPass, Edit},
	Run: func(c *Context) (any, error) {
		return c.rewrite().absolutePass(c, "rewrite_learned", LearnedAbsolute, LearnedPass)
	},
}

func (r *Rewrite) absolutePass(c *Context, pass, scheme string, detector *Pass) (*Change, error) {
	w := c.Work()
	ch := r.begin(pass, scheme)
	defer r.end(ch)
	for _, f := range c.ResultOf[detector].([]*Finding) {
		if f.Fused {
			continue
		}
		done, kept, err := r.absolute(w, f)
		if err != nil {
			if errors.Is(err, ErrRewrite) {
				ch.skip(f, "%s", reason(err))
				continue
			}
			return ch, err
		}
		if done {
			ch.Layers = append(ch.Layers, f.Layers...)
		} else {
			ch.note("layers %v: %s: nothing to rewrite", f.Layers, kept)
		}
	}
	return ch, nil
}

// absolute rewrites one absolute encoding; false, with what the model
// does, when it is already a read of a stored table it leaves as it is.
func (r *Rewrite) absolute(w *Work, f *Finding) (done bool, kept string, err error) {
	ev, ok := f.Evidence.(*TableEvidence)
	if !ok {
		return false, "", fmt.Errorf("%w: the finding has no table evidence", ErrRewrite)
	}
	x := w.workValue(ev.Value)
	if x == nil {
		return false, "", fmt.Errorf("%w: the encoding %q is not a value of the model", ErrRewrite, ev.Value)
	}
	cone := w.cone(x)
	computed := false
	for _, n := range cone {
		switch n.OpType {
		case "Sin", "Cos", "If", "Loop", "Scan", "ScatterND", "ScatterElements", "Exp", "Pow":
			computed = true
		}
	}
	if computed {
		if ev.Positions == nil {
			return false, "", fmt.Errorf("%w: %s", ErrRewrite, ev.PositionsWhy)
		}
		return true, "", r.absoluteTable(w, ev, x)
	}
	// A stored table gathered at consecutive positions, on its axis of
	// positions (axis 1 of a table stored transposed, [dim, positions]).
	var gather *graph.Node
	axis := ev.Axis
	for _, n := range cone {
		if n.OpType != "Gather" || !isONNX(n) || !w.IsConst(n.Input(0)) || w.name(n.Input(0)) != ev.Table || w.IsConst(n.Input(1)) {
			continue
		}
		if r := w.Shape(n.Input(0)).Rank(); r > 0 && normAxis(n.AttrInt("axis", 0), r) == axis {
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
	if ix := w.passedFrom(gather.Input(1), pos.value); ix != pos.value {
		if shift = w.shiftOf(ix, pos.value); shift == nil {
			return false, "", fmt.Errorf("%w: the table is gathered at %s, which %s computes from the positions %s: the rows it reads are not the slice those bound", ErrRewrite, w.name(gather.Input(1)), opOf(ix), pos.Value)
		}
	}
	out, err := r.lookup(w.mainName(gather.Output(0)))
	if err != nil {
		return false, "", err
	}
	// Normalisation reads a one-hot MatMul as a Gather; the model's own
	// op gives zero rows at positions past the table, where a Slice
	// refuses the sequence.
	if p := out.Producer(); p == nil || p.OpType != "Gather" {
		return false, "", fmt.Errorf("%w: the table's rows are read by %s, not a Gather: it gives zero rows at positions past the table's rows, which a Slice cannot", ErrRewrite, opOf(out))
	}
	table, err := r.lookup(ev.Table)
	if err != nil {
		return false, "", err
	}
	// The Gather's output may carry a batch the slice does not: only
	// elementwise readers broadcast it back.
	idx := w.Shape(gather.Input(1))
	if slices.ContainsFunc(idx.Dims, func(d Dim) bool { return d.IsSym() && w.isBatchSym(d) }) {
		for _, u := range out.Uses() {
			switch u.Node.OpType {
			case "Add", "Sub", "Mul":
			default:
				return false, "", fmt.Errorf("%w: the gathered rows have a batch axis that %s (%s) reads as it is", ErrRewrite, nodeName(u.Node), u.Node.OpType)
			}
		}
	}
	start, limit, err := r.bounds(w, pos)
	if err != nil {
		return false, "", err
	}
	if shift != nil {
		var d *graph.Value
		if t := w.Const(shift); t != nil {
			d = r.vecInt(int64(t.Float64s()[0]))
		} else {
			if d, err = r.lookup(w.OrigValue(shift)); err != nil {
				return false, "", err
			}
			d = typed(r.op1("Reshape", []*graph.Value{r.castInt64(d, w.ElemType(shift)), r.vecInt(1)}), graph.Int64, 1)
		}
		start = typed(r.op1("Add", []*graph.Value{start, d}), graph.Int64, 1)
		limit = typed(r.op1("Add", []*graph.Value{limit, d}), graph.Int64, 1)
	}
	// Gather gives the table's axes with the index's in place of the
	// axis of positions; the Slice that axis cut to the positions: the
	// index's leading axes (of size 1, or a batch its readers broadcast)
	// are inserted before it.
	dt := w.ElemType(gather.Output(0))
	tr := w.Shape(gather.Input(0)).Rank()
	y := typed(r.op1("Slice", []*graph.Value{table, start, limit, r.vecInt(int64(axis))}), dt, tr)
	for i := 1; i < idx.Rank(); i++ {
		y = typed(r.unsqueeze(y, int64(axis)), dt, tr+i)
	}
	if out.Type != nil {
		y.Type = out.Type.Clone()
	}
	out.ReplaceKeepingName(y)
	return true, "", nil
}

// bounds are the [1] int64 start and end of the positions of a Range (or
// of a slice of 0, 1, 2, ...).
func (r *Rewrite) bounds(w *Work, pos *Positions) (*graph.Value, *graph.Value, error) {
	s, err := r.boundValue(w, pos.Start, pos.start, pos.StartConst, pos.StartIndex)
	if err != nil {
		return nil, nil, err
	}
	l, err := r.boundValue(w, pos.Limit, pos.limit, pos.LimitConst, pos.LimitIndex)
	return s, l, err
}

// boundValue is a bound of positions as a [1] int64 value: the constant
// c when name is empty, else element k of the value (the value itself
// when it has one element).
func (r *Rewrite) boundValue(w *Work, name string, v *graph.Value, c int64, k int) (*graph.Value, error) {
	if name == "" {
		return r.vecInt(c), nil
	}
	x, err := r.lookup(name)
	if err != nil {
		return nil, err
	}
	x = r.castInt64(x, w.ElemType(v))
	if s := w.Shape(v); s.Rank() == 1 && s.Dims[0] != 1 {
		return typed(r.op1("Gather", []*graph.Value{x, r.vecInt(int64(k))}, graph.IntAttr("axis", 0)), graph.Int64, 1), nil
	}
	return typed(r.op1("Reshape", []*graph.Value{x, r.vecInt(1)}), graph.Int64, 1), nil
}

// absoluteTable replaces a computed encoding x by rows of a constant
// table holding its values at positions 0..N-1.
func (r *Rewrite) absoluteTable(w *Work, ev *TableEvidence, x *graph.Value) error {
	n := r.opts.MaxPositions
	if n <= 0 {
		n = DefaultMaxPositions
	}
	pos := ev.Positions
	pr := w.NewProbe(1, n, 0)
	pr.Budget = 1 << 22
	cuts := map[*graph.Value]*kernels.Tensor{}
	if err := w.cutPositions(pr, pos, 0, cuts); err != nil {
		return fmt.Errorf("%w: %v", ErrRewrite, err)
	}
	pr.SetCuts(cuts)
	rows, why := w.tableRows(pr, x)
	var dt graph.DataType
	if t, err := pr.Value(x); err == nil {
		dt = t.DType
	}
	if !dt.IsFloat() {
		return fmt.Errorf("%w: the encoding has element type %v", ErrRewrite, dt)
	}
	if rows == nil || len(rows) != n {
		return fmt.Errorf("%w: evaluating the encoding at positions 0..%d: %s", ErrRewrite, n-1, why)
	}
	fromZero := (pos.Value == "" || pos.Ranged) && pos.Start == "" && pos.StartConst == 0
	for i, r0 := range ev.Rows0 {
		if fromZero && i < len(rows) && !slices.Equal(rows[i], r0) {
			return fmt.Errorf("%w: the rows evaluated at 0..%d are not those the detector read", ErrRewrite, n-1)
		}
	}
	d := len(rows[0])
	flat := make([]float64, 0, n*d)
	for _, row := range rows {
		flat = append(flat, row...)
	}
	table, err := r.table("onnxpe_position_table", dt, []int64{int64(n), int64(d)}, flat)
	if err != nil {
		return err
	}
	out, err := r.lookup(ev.Value)
	if err != nil {
		return err
	}
	xs := w.Shape(x)
	var y *graph.Value
	switch {
	case pos.Value != "" && !pos.Ranged:
		// Positions are data: gather the rows.
		p, err := r.lookup(pos.Value)
		if err != nil {
			return err
		}
		p = r.castInt64(p, w.ElemType(pos.value))
		y = typed(r.op1("Gather", []*graph.Value{table, p}, graph.IntAttr("axis", 0)), dt, w.Shape(pos.value).Rank()+1)
	default:
		var start, limit *graph.Value
		if pos.Ranged {
			if start, limit, err = r.bounds(w, pos); err != nil {
				return err
			}
		} else {
			// start + 0..S-1, S the sequence of the activation the
			// encoding is added to.
			if start, err = r.boundValue(w, pos.Start, pos.start, pos.StartConst, pos.StartIndex); err != nil {
				return err
			}
			act, err := r.addend(ev)
			if err != nil {
				return err
			}
			if len(xs.Dims) < 2 {
				return fmt.Errorf("%w: the encoding has shape %s", ErrRewrite, w.shapeString(xs))
			}
			seq := r.dimOf(act, -2)
			limit = typed(r.op1("Add", []*graph.Value{start, seq}), graph.Int64, 1)
		}
		y = typed(r.op1("Slice", []*graph.Value{table, start, limit, r.vecInt(0)}), dt, 2)
		for i := 2; i < xs.Rank(); i++ {
			y = typed(r.unsqueeze(y, 0), dt, i+1)
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
func (r *Rewrite) addend(ev *TableEvidence) (*graph.Value, error) {
	var add *graph.Node
	for _, n := range r.M.Graph.Nodes() {
		if nodeName(n) == ev.Add {
			add = n
		}
	}
	if add == nil || len(add.Inputs()) != 2 {
		return nil, fmt.Errorf("%w: the Add %q of the encoding is not in the model", ErrRewrite, ev.Add)
	}
	if add.Input(0).Name == ev.Value {
		return add.Input(1), nil
	}
	return add.Input(0), nil
}

// passedFrom walks back from v through ops that keep its values (casts,
// layout) while it is not stop, and returns where it stopped.
func (w *Work) passedFrom(v, stop *graph.Value) *graph.Value {
	for steps := 0; steps < 8 && v != nil && v != stop; steps++ {
		n := v.Producer()
		if n == nil || !isONNX(n) {
			break
		}
		switch n.OpType {
		case "Cast", "Unsqueeze", "Squeeze", "Reshape", "Expand", "Identity":
			v = n.Input(0)
			continue
		}
		break
	}
	return v
}

// shiftOf is d when v is the sum of the positions pos (through casts and
// layout) and d, one integer number (a constant or a value of the
// original model): the positions moved by d. Nil otherwise.
func (w *Work) shiftOf(v, pos *graph.Value) *graph.Value {
	n := v.Producer()
	if n == nil || !isONNX(n) || n.OpType != "Add" || len(n.Inputs()) != 2 {
		return nil
	}
	for i := 0; i < 2; i++ {
		if w.passedFrom(n.Input(i), pos) != pos {
			continue
		}
		d := n.Input(1 - i)
		s := w.Shape(d)
		if d == nil || !s.Ranked || !w.ElemType(d).IsInt() || slices.ContainsFunc(s.Dims, func(x Dim) bool { return x != 1 }) {
			return nil
		}
		if w.IsConst(d) || w.OrigValue(d) != "" {
			return d
		}
	}
	return nil
}

// opOf names the op that computes v, for reasons.
func opOf(v *graph.Value) string {
	if v == nil || v.Producer() == nil {
		return "no op"
	}
	n := v.Producer()
	if n.Name != "" && n.Name != n.OpType {
		return fmt.Sprintf("%s (%s)", n.Name, n.OpType)
	}
	return n.OpType
}
