package rewrite

import (
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/work"
)

// Forms of an encoding in the report.
const (
	FormComputed = "computed"
	FormStored   = "stored"
	FormFused    = "fused"
	FormTable    = "table"
)

// scaleConst is the constant (a scalar equal to s) a Mul multiplies v by,
// looking through casts.
func (x *Extended) ScaleConst(v *graph.Value, s float64) *graph.Value {
	for steps := 0; steps < 4; steps++ {
		var next *graph.Value
		for _, u := range v.Uses() {
			n := u.Node
			switch {
			case n.OpType == "Mul" && work.IsONNX(n) && len(n.Inputs()) == 2:
				c := n.Input(1 - u.Index)
				if t := x.ConstTensor(c); t != nil && t.Len() == 1 {
					if f, err := t.Float64s(); err == nil && math.Abs(f[0]-s) <= 1e-6*math.Abs(s) {
						return c
					}
				}
			case n.OpType == "Cast" && work.IsONNX(n) && len(v.Uses()) == 1:
				next = n.Output(0)
			}
		}
		if next == nil {
			return nil
		}
		v = next
	}
	return nil
}

// replaceConst gives value v the tensor t: an initializer keeps its name
// and gets t; another value (a Constant node's output, a value computed
// from constants) is replaced by a new initializer.
func (x *Extended) ReplaceConst(v *graph.Value, t *graph.Tensor) {
	x.Changed = append(x.Changed, v)
	if v.Const != nil && v.Producer() == nil {
		t.SetName(v.Name)
		v.Const = t
		v.Type = graph.TensorType(t.DataType(), graph.Dims(t.Dims()...))
		return
	}
	nv, err := x.R.AddConst(t)
	if err != nil {
		panic("passes: " + err.Error())
	}
	v.ReplaceAllUsesWith(nv)
	x.Changed = append(x.Changed, nv)
}

// tableConst is a constant read as [rows, width]: every axis but the last
// has size 1 except the rows axis.
type TableConst struct {
	Dims  []int64
	Axis  int
	Rows  int
	Width int
	Dt    graph.DataType
	Vals  []float64
}

func (x *Extended) TableOf(v *graph.Value) (*TableConst, error) {
	t := x.ConstTensor(v)
	if t == nil {
		return nil, ExtendErr("%q is not a constant", v.Name)
	}
	dims := slices.Clone(t.Dims())
	if len(dims) < 2 {
		return nil, ExtendErr("the table %q has shape %v", v.Name, dims)
	}
	tc := &TableConst{Dims: dims, Axis: -1, Width: int(dims[len(dims)-1]), Dt: t.DataType(), Rows: 1}
	for i, d := range dims[:len(dims)-1] {
		if d != 1 {
			if tc.Axis >= 0 {
				return nil, ExtendErr("the table %q has shape %v: more than one axis of rows", v.Name, dims)
			}
			tc.Axis, tc.Rows = i, int(d)
		}
	}
	if tc.Axis < 0 {
		tc.Axis = len(dims) - 2
	}
	vals, err := t.Float64s()
	if err != nil {
		return nil, ExtendErr("the table %q: %v", v.Name, err)
	}
	tc.Vals = vals
	return tc, nil
}

// constTensor is the tensor of an initializer or of a Constant node's
// output (nil otherwise).
func (x *Extended) ConstTensor(v *graph.Value) *graph.Tensor {
	if v.Const != nil && v.Producer() == nil {
		return v.Const
	}
	if p := v.Producer(); p != nil && p.OpType == "Constant" && work.IsONNX(p) {
		if a := p.Attr("value"); a != nil && a.Tensor != nil {
			return a.Tensor
		}
	}
	return nil
}

// baseConst follows a table value of the model back through layout ops
// that keep its last axis and its row order (Unsqueeze, Squeeze, Expand,
// Reshape, Cast, Identity) to the constant holding it.
func (x *Extended) BaseConst(name string) (*graph.Value, error) {
	v, err := x.R.Lookup(name)
	if err != nil {
		return nil, err
	}
	for steps := 0; steps < 16; steps++ {
		if x.ConstTensor(v) != nil {
			return v, nil
		}
		p := v.Producer()
		if p == nil || !work.IsONNX(p) {
			break
		}
		switch p.OpType {
		case "Unsqueeze", "Squeeze", "Expand", "Reshape", "Cast", "Identity":
			v = p.Input(0)
			continue
		}
		break
	}
	return nil, ExtendErr("the table %q is not a constant of the model (it is computed by %s)", name, work.ProducerString(v))
}
