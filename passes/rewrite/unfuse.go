package rewrite

import (
	"github.com/onnxpe/onnxpe/graph"
)

// elemType is the declared element type of v (Undefined when unknown).
func ElemType(v *graph.Value) graph.DataType {
	if v == nil {
		return graph.Undefined
	}
	if v.Const != nil {
		return v.Const.DataType()
	}
	if v.Type != nil {
		return v.Type.ElemType()
	}
	if p := v.Producer(); p != nil && (p.OpType == "Cast") {
		return graph.DataType(p.AttrInt("to", 0))
	}
	return graph.Undefined
}

// width is the last dimension of v when the model states it.
func Width(v *graph.Value) int64 {
	var dims []graph.Dim
	switch {
	case v.Const != nil:
		d := v.Const.Dims()
		if len(d) > 0 {
			return d[len(d)-1]
		}
		return -1
	case v.Type != nil:
		var ok bool
		if dims, ok = v.Type.Shape(); !ok || len(dims) == 0 {
			return -1
		}
	default:
		return -1
	}
	if d := dims[len(dims)-1]; d.Known {
		return d.Value
	}
	return -1
}

// rowsAt gathers the rows of a cache at the positions pos: [B, S, w] for
// positions [B, S]; for the com.microsoft offset form (one element)
// offset+0..S-1, [1, S, w]; the cache itself when there are no positions
// (it is already [B, S, w]).
func (r *Rewrite) RowsAt(cache, pos *graph.Value, seq *graph.Value, offset bool) *graph.Value {
	switch {
	case pos == nil:
		return cache
	case offset:
		first := r.Op1("Reshape", []*graph.Value{r.CastInt64(pos, ElemType(pos)), r.Ints([]int64{0})})
		s := r.Op1("Reshape", []*graph.Value{seq, r.Ints([]int64{0})})
		rg := r.Op1("Range", []*graph.Value{first, r.Op1("Add", []*graph.Value{first, s}), r.ScalarInt(1)})
		return r.Unsqueeze(r.Op1("Gather", []*graph.Value{cache, rg}, graph.IntAttr("axis", 0)), 0)
	default:
		return r.Op1("Gather", []*graph.Value{cache, r.CastInt64(pos, ElemType(pos))}, graph.IntAttr("axis", 0))
	}
}
