package rewrite

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes"
)

// planRelative is the plan of a relative scheme: computed for any
// distance.
func PlanRelative(x *Extended, f *passes.Finding) (*ExtendItem, error) {
	return planNothing(x, f, "computed for any distance (relative distances are bucketed, clipped or computed): nothing to enlarge")
}

// planComputed is the plan of an encoding computed for any position.
func PlanComputed(x *Extended, f *passes.Finding) (*ExtendItem, error) {
	return planNothing(x, f, "computed from the position for any position: nothing to enlarge")
}

func planNothing(x *Extended, f *passes.Finding, note string) (*ExtendItem, error) {
	it, where := NewTableItem(f)
	if o := x.Opts; o.Method != "" && o.Method != MethodHierarchical {
		return nil, ExtendErr("--method %s does not fit %s", o.Method, where)
	}
	it.Form, it.Method = FormComputed, "none"
	it.Note("%s", note)
	return it, nil
}

// newTableItem starts the item of a finding other than RoPE, with where
// refusals name it.
func NewTableItem(f *passes.Finding) (*ExtendItem, string) {
	it := &ExtendItem{Scheme: f.Scheme, Layers: f.Layers, Params: map[string]any{}, Finding: f,
		OldMaxFrom: fmt.Sprintf("the %s table of layers %s", f.Scheme, LayerList(f.Layers))}
	return it, fmt.Sprintf("the %s encoding of layers %s", f.Scheme, LayerList(f.Layers))
}

// record adds an edit to the item it belongs to, or to the report's
// other constants.
func (x *Extended) Record(it *ExtendItem, e ExtendEdit) {
	if it != nil {
		it.Edits = append(it.Edits, e)
		return
	}
	x.Report.Bounded = append(x.Report.Bounded, e)
}

// intSlice converts int64 values to the Go slice NewTensor wants for dt.
func IntSlice(dt graph.DataType, v []int64) any {
	switch dt {
	case graph.Int32:
		out := make([]int32, len(v))
		for i, x := range v {
			out[i] = int32(x)
		}
		return out
	case graph.Int16:
		out := make([]int16, len(v))
		for i, x := range v {
			out[i] = int16(x)
		}
		return out
	case graph.Int8:
		out := make([]int8, len(v))
		for i, x := range v {
			out[i] = int8(x)
		}
		return out
	case graph.Uint8:
		out := make([]uint8, len(v))
		for i, x := range v {
			out[i] = uint8(x)
		}
		return out
	}
	return v
}

// forgetShapes removes the value_info declarations of values computed
// from the constants the extension changed (their sizes may have
// changed); graph outputs keep theirs.
func (x *Extended) ForgetShapes() {
	g := x.R.M.Graph
	down := map[*graph.Value]bool{}
	stack := slices.Clone(x.Changed)
	for _, v := range stack {
		down[v] = true
	}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, u := range v.Uses() {
			for _, o := range u.Node.Outputs() {
				if !down[o] {
					down[o] = true
					stack = append(stack, o)
				}
			}
		}
	}
	g.ValueInfo = slices.DeleteFunc(g.ValueInfo, func(v *graph.Value) bool { return down[v] && !v.IsGraphOutput() })
}
