package absolute

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/rewrite"
	"github.com/onnxpe/onnxpe/passes/work"
	"slices"
)

// tablePlan is what applyTable needs for a learned or sinusoidal table:
// where it is, and how its scheme fills the new rows (vals holds the
// stored rows, laid out by positions, and room for the new ones).
type TablePlan struct {
	Ev     *TableEvidence
	Offset int // table row of position 0
	N      int // positions the table holds
	// transposed: the scheme extends tables stored transposed too.
	Transposed bool
	Fill       func(x *rewrite.Extended, it *rewrite.ExtendItem, tab *rewrite.TableConst, vals []float64, rows int) error
}

// applyTable enlarges a learned or sinusoidal table.
func ApplyTable(x *rewrite.Extended, it *rewrite.ExtendItem) error {
	tp, _ := it.Plan.(*TablePlan)
	if tp == nil {
		return nil
	}
	r := x.R
	ch := r.Begin("extend", it.Scheme)
	defer r.End(ch)
	base, err := x.BaseConst(tp.Ev.Table)
	if err != nil {
		return err
	}
	tab, err := x.TableOf(base)
	if err != nil {
		return err
	}
	if ax := tp.Ev.Axis; tab.Axis != ax {
		// Stored transposed ([dim, positions], read on axis 1): the
		// positions are the axis the reader indexes. Learned tables are
		// extended by positions and written back in the model's layout.
		if !tp.Transposed {
			return rewrite.ExtendErr("the table %q %v keeps its positions on axis %d: extend continues sinusoidal tables whose positions are the axis before the last ([positions, dim]), not tables stored transposed", base.Name, tab.Dims, ax)
		}
		if ax < 0 || ax >= len(tab.Dims) || tab.Dims[ax] < 2 {
			return rewrite.ExtendErr("the table %q %v: the audit read its positions on axis %d", base.Name, tab.Dims, ax)
		}
		rows := int(tab.Dims[ax])
		tab = &rewrite.TableConst{Dims: tab.Dims, Axis: ax, Rows: rows, Width: len(tab.Vals) / rows, Dt: tab.Dt, Vals: byPositions(tab.Vals, tab.Dims, ax)}
	}
	if tab.Rows != tp.Offset+tp.N {
		return rewrite.ExtendErr("the table %q has %d rows, the audit read %d positions from row %d", base.Name, tab.Rows, tp.N, tp.Offset)
	}
	N := x.Opts.To
	rows := tp.Offset + N
	vals := make([]float64, rows*tab.Width)
	copy(vals, tab.Vals)
	if err := tp.Fill(x, it, tab, vals, rows); err != nil {
		return err
	}
	if !rewrite.Finite(vals) {
		return rewrite.ExtendErr("the table %q: the extension gives non-finite values", base.Name)
	}
	// The trained rows stay bit for bit what they were.
	dims := withAxis(tab.Dims, tab.Axis, rows)
	t, err := graph.TensorFromFloat64(base.Name, tab.Dt, dims, stored(vals, dims, tab.Axis))
	if err != nil {
		return err
	}
	old := x.ConstTensor(base)
	if err := samePositions(old, t, tab.Axis); err != nil {
		return rewrite.ExtendErr("the table %q: %v", base.Name, err)
	}
	widen, err := widenOneHots(x, it, base, tab.Rows, rows)
	if err != nil {
		return err
	}
	x.ReplaceConst(base, t)
	it.Edit(base.Name, "%s table %v %v to %v (%s)", it.Scheme, tab.Dt, tab.Dims, withAxis(tab.Dims, tab.Axis, rows), it.Method)
	widen()
	return nil
}

// widenOneHots gives the one-hots multiplied with the table base (the
// product normalisation reads as a Gather: MatMul(OneHot(i, depth), T) or
// MatMul(T, OneHot(i, depth, axis=0)), through casts and layout ops) the
// depth of the enlarged table: a constant depth equal to the table's old
// rows becomes rows (a new constant, for that OneHot only). A one-hot of
// another depth is refused. The one-hots are found before the table is
// replaced and changed by the function returned, after it.
func widenOneHots(x *rewrite.Extended, it *rewrite.ExtendItem, base *graph.Value, old, rows int) (func(), error) {
	layout := func(n *graph.Node) bool {
		switch n.OpType {
		case "Cast", "Identity", "Transpose", "Reshape", "Unsqueeze", "Squeeze":
			return work.IsONNX(n)
		}
		return false
	}
	var products []*graph.Node
	seen := map[*graph.Value]bool{}
	var down func(v *graph.Value, depth int)
	down = func(v *graph.Value, depth int) {
		if v == nil || seen[v] || depth > 8 {
			return
		}
		seen[v] = true
		for _, u := range v.Uses() {
			switch n := u.Node; {
			case layout(n) && u.Index == 0:
				down(n.Output(0), depth+1)
			case work.IsONNX(n) && (n.OpType == "MatMul" || n.OpType == "Gemm") && u.Index < 2:
				products = append(products, n)
			}
		}
	}
	down(base, 0)
	var later []func()
	for _, mm := range products {
		for i := range 2 {
			v := mm.Input(i)
			for steps := 0; v != nil && v.Producer() != nil && layout(v.Producer()) && steps < 8; steps++ {
				v = v.Producer().Input(0)
			}
			if v == nil || seen[v] || v.Producer() == nil || v.Producer().OpType != "OneHot" || !work.IsONNX(v.Producer()) {
				continue
			}
			oh := v.Producer()
			dt := x.ConstTensor(oh.Input(1))
			if dt == nil {
				continue // a depth computed at run time follows the inputs
			}
			d, err := dt.Float64s()
			if err != nil || len(d) != 1 || int(d[0]) != old {
				return nil, rewrite.ExtendErr("the table %q is multiplied with a one-hot (%s) of depth %v, not its %d rows: onnxpe cannot enlarge them together", base.Name, work.NodeName(oh), d, old)
			}
			var nd *graph.Tensor
			if dt.DataType().IsInt() {
				nd, err = graph.NewTensor(base.Name+"_depth", dt.DataType(), dt.Dims(), rewrite.IntSlice(dt.DataType(), []int64{int64(rows)}))
			} else {
				nd, err = graph.TensorFromFloat64(base.Name+"_depth", dt.DataType(), dt.Dims(), []float64{float64(rows)})
			}
			if err != nil {
				return nil, err
			}
			nv, err := x.R.AddConst(nd)
			if err != nil {
				return nil, err
			}
			later = append(later, func() {
				oh.SetInput(1, nv)
				x.Changed = append(x.Changed, nv)
				it.Edit(work.NodeName(oh), "depth of the one-hot multiplied with %s: %d to %d", base.Name, old, rows)
			})
		}
	}
	return func() {
		for _, f := range later {
			f()
		}
	}, nil
}

func withAxis(dims []int64, axis, n int) []int64 {
	d := slices.Clone(dims)
	d[axis] = int64(n)
	return d
}

// blocks splits dims at axis: the number of blocks before it (the
// product of the axes before) and of elements after it (of the axes
// after). Position r of block o starts at element (o·dims[axis] + r)·inner.
func blocks(dims []int64, axis int) (outer, inner int) {
	outer, inner = 1, 1
	for _, d := range dims[:axis] {
		outer *= int(d)
	}
	for _, d := range dims[axis+1:] {
		inner *= int(d)
	}
	return outer, inner
}

// byPositions lays out vals, a table of shape dims keeping its positions
// on axis, as [positions][outer·inner]: row r holds what the table holds
// at position r, in the order of its elements (the stored order when no
// axis before the positions' is longer than 1).
func byPositions(vals []float64, dims []int64, axis int) []float64 {
	outer, inner := blocks(dims, axis)
	if outer == 1 {
		return vals
	}
	n := int(dims[axis])
	out := make([]float64, 0, len(vals))
	for r := range n {
		for o := range outer {
			out = append(out, vals[(o*n+r)*inner:(o*n+r+1)*inner]...)
		}
	}
	return out
}

// stored is the inverse of byPositions: rows [positions][outer·inner]
// laid out as a table of shape dims keeping its positions on axis.
func stored(rows []float64, dims []int64, axis int) []float64 {
	outer, inner := blocks(dims, axis)
	if outer == 1 {
		return rows
	}
	n := int(dims[axis])
	out := make([]float64, len(rows))
	for r := range n {
		for o := range outer {
			copy(out[(o*n+r)*inner:(o*n+r+1)*inner], rows[(r*outer+o)*inner:(r*outer+o+1)*inner])
		}
	}
	return out
}

// samePositions checks that t, a table enlarged on axis, holds at the
// positions of old what old holds there, bit for bit: the first elements
// of t when the positions are its first long axis, the first positions of
// every block before them otherwise.
func samePositions(old, t *graph.Tensor, axis int) error {
	a, err := old.RawBytes()
	if err != nil {
		return err
	}
	b, err := t.RawBytes()
	if err != nil {
		return err
	}
	od, nd := old.Dims(), t.Dims()
	outer, _ := blocks(od, axis)
	if len(od) != len(nd) || len(b) < len(a) || outer == 0 || len(a)%outer != 0 {
		return fmt.Errorf("the trained rows would change")
	}
	// Bytes per block: old positions, new positions.
	ob := len(a) / outer
	nb := ob / max(int(od[axis]), 1) * int(nd[axis])
	for o := range outer {
		if (o+1)*nb > len(b) || !slices.Equal(a[o*ob:(o+1)*ob], b[o*nb:o*nb+ob]) {
			return fmt.Errorf("the trained rows would change")
		}
	}
	return nil
}
