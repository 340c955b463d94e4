package rewrite

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/probe"
	"github.com/onnxpe/onnxpe/passes/work"
)

// bounds are the [1] int64 start and end of the positions of a Range (or
// of a slice of 0, 1, 2, ...).
func (r *Rewrite) Bounds(w *work.Work, pos *probe.Positions) (*graph.Value, *graph.Value, error) {
	s, err := r.BoundValue(w, pos.Start, pos.WorkStart, pos.StartConst, pos.StartIndex)
	if err != nil {
		return nil, nil, err
	}
	l, err := r.BoundValue(w, pos.Limit, pos.WorkLimit, pos.LimitConst, pos.LimitIndex)
	return s, l, err
}

// boundValue is a bound of positions as a [1] int64 value: the constant
// c when name is empty, else element k of the value (the value itself
// when it has one element).
func (r *Rewrite) BoundValue(w *work.Work, name string, v *graph.Value, c int64, k int) (*graph.Value, error) {
	if name == "" {
		return r.VecInt(c), nil
	}
	x, err := r.Lookup(name)
	if err != nil {
		return nil, err
	}
	x = r.CastInt64(x, w.ElemType(v))
	if s := w.Shape(v); s.Rank() == 1 && s.Dims[0] != 1 {
		return Typed(r.Op1("Gather", []*graph.Value{x, r.VecInt(int64(k))}, graph.IntAttr("axis", 0)), graph.Int64, 1), nil
	}
	return Typed(r.Op1("Reshape", []*graph.Value{x, r.VecInt(1)}), graph.Int64, 1), nil
}

// passedFrom walks back from v through ops that keep its values (casts,
// layout) while it is not stop, and returns where it stopped.
func PassedFrom(w *work.Work, v, stop *graph.Value) *graph.Value {
	return work.Back(v, work.SameValues, 8, func(x *graph.Value) bool { return x == stop })
}

// opOf names the op that computes v, for reasons.
func OpOf(v *graph.Value) string {
	if v == nil || v.Producer() == nil {
		return "no op"
	}
	n := v.Producer()
	if n.Name != "" && n.Name != n.OpType {
		return fmt.Sprintf("%s (%s)", n.Name, n.OpType)
	}
	return n.OpType
}
