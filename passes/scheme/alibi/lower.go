package alibi

import (
	"fmt"
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/rewrite"
)

// lowerALiBi lowers onnxpe's ALiBiBias.
func LowerALiBi(r *rewrite.Rewrite, n *graph.Node) (bool, error) {
	if n.OpType == "ALiBiBias" && n.Domain == rewrite.DomainOnnxpe {
		return true, unfuseALiBi(r, n)
	}
	return false, nil
}

// unfuseALiBi lowers one ALiBiBias node: [1, heads, q, k].
func unfuseALiBi(r *rewrite.Rewrite, n *graph.Node) error {
	slopes, ql, kl := n.Input(0), n.Input(1), n.Input(2)
	dt := rewrite.ElemType(slopes)
	if !dt.IsFloat() {
		return fmt.Errorf("%w: the type of the slopes %q is not known", rewrite.ErrRewrite, slopes.Name)
	}
	k := r.Op1("Reshape", []*graph.Value{r.CastInt64(kl, rewrite.ElemType(kl)), r.Ints([]int64{0})})
	q := r.Op1("Reshape", []*graph.Value{r.CastInt64(ql, rewrite.ElemType(ql)), r.Ints([]int64{0})})
	cast := func(v *graph.Value) *graph.Value {
		return r.Op1("Cast", []*graph.Value{v}, graph.IntAttr("to", int64(dt)))
	}
	sl := r.Op1("Reshape", []*graph.Value{slopes, r.VecInt(1, -1, 1, 1)})
	j := r.Op1("Range", []*graph.Value{r.ScalarInt(0), k, r.ScalarInt(1)})
	var bias *graph.Value
	if n.AttrInt("symmetric", 0) == 1 {
		// -slope·|pos_i - j|, pos_i = k - q + i.
		i := r.Op1("Range", []*graph.Value{r.Op1("Sub", []*graph.Value{k, q}), k, r.ScalarInt(1)})
		d := r.Op1("Abs", []*graph.Value{r.Op1("Sub", []*graph.Value{r.Unsqueeze(i, 1), r.Unsqueeze(j, 0)})})
		bias = r.Op1("Neg", []*graph.Value{r.Op1("Mul", []*graph.Value{sl, r.Unsqueeze(cast(d), 0, 1)})})
	} else {
		// slope·(j - (k - 1)), the same for every query row.
		d := r.Op1("Sub", []*graph.Value{j, r.Op1("Sub", []*graph.Value{k, r.ScalarInt(1)})})
		row := r.Op1("Mul", []*graph.Value{sl, r.Unsqueeze(cast(d), 0, 1, 2)})
		full := r.Op1("Concat", []*graph.Value{r.VecInt(1), r.Op1("Shape", []*graph.Value{slopes}), r.Op1("Reshape", []*graph.Value{q, r.VecInt(1)}), r.Op1("Reshape", []*graph.Value{k, r.VecInt(1)})}, graph.IntAttr("axis", 0))
		bias = r.Op1("Expand", []*graph.Value{row, full})
	}
	rewrite.Typed(bias, dt, 4)
	n.Output(0).ReplaceKeepingName(bias)
	return nil
}
