package work

import (
	"github.com/onnxpe/onnxpe/graph"
	"slices"
)

// LayoutOps pass content through unchanged in value (up to layout), with
// only constant or shape operands.
var LayoutOps = map[string]bool{"Transpose": true, "Reshape": true, "Cast": true, "Expand": true, "Tile": true,
	"Unsqueeze": true, "Squeeze": true, "Identity": true, "Flatten": true}

// SameValues are the ops whose output holds its first input's elements,
// in their order (a cast, a copy, a new shape, a broadcast): where a value
// comes from is what they read.
var SameValues = map[string]bool{"Cast": true, "Unsqueeze": true, "Squeeze": true, "Reshape": true, "Expand": true, "Identity": true}

// Back walks back from v through the ONNX ops of ops, by their first
// input, at most max steps, and returns the value it stopped at: the first
// one that stop accepts (nil: none), or that no such op computes.
func Back(v *graph.Value, ops map[string]bool, max int, stop func(*graph.Value) bool) *graph.Value {
	for steps := 0; steps < max && v != nil; steps++ {
		if stop != nil && stop(v) {
			return v
		}
		n := v.Producer()
		if n == nil || !IsONNX(n) || !ops[n.OpType] {
			return v
		}
		v = n.Input(0)
	}
	return v
}

func (w *Work) PosOf(v *graph.Value) int {
	if n := v.Producer(); n != nil {
		return w.Pos(n)
	}
	return -1
}

func (w *Work) Name(v *graph.Value) string {
	if o := w.OrigValue(v); o != "" {
		return o
	}
	return v.Name
}

// ValueName is the original model's name of v (pattern.Env).
func (w *Work) ValueName(v *graph.Value) string { return w.Name(v) }

// Rank is the inferred rank of v, -1 when unknown (pattern.Env).
func (w *Work) Rank(v *graph.Value) int { return w.Shape(v).Rank() }

// actInputs lists the indexes of n's inputs that carry content.
func (w *Work) ActInputs(n *graph.Node) []int {
	var out []int
	for i, in := range n.Inputs() {
		if w.IsAct(in) {
			out = append(out, i)
		}
	}
	return out
}

// cacheInput reports whether v is a KV cache given as input (content that
// comes straight from a graph input, maybe through layout ops).
func (w *Work) CacheInput(v *graph.Value) bool {
	for steps := 0; steps < 8 && v != nil; steps++ {
		if v.Producer() == nil {
			return w.Role(v) == RoleContent
		}
		n := v.Producer()
		if !LayoutOps[n.OpType] {
			return false
		}
		v = n.Input(0)
	}
	return false
}

func (w *Work) StatOf(v, x *graph.Value, nodes *[]*graph.Node, depth int) (ok, reduced bool) {
	if depth > 8 {
		return false, false
	}
	if v == x {
		return true, false
	}
	if w.IsConst(v) {
		return true, false
	}
	n := v.Producer()
	if n == nil || !IsONNX(n) {
		return false, false
	}
	switch n.OpType {
	case "ReduceMean", "ReduceSum", "ReduceL2", "ReduceSumSquare", "Pow", "Mul", "Add", "Sqrt", "Reciprocal",
		"Div", "Cast", "Max", "Clip":
	default:
		return false, false
	}
	*nodes = append(*nodes, n)
	red := n.OpType == "ReduceMean" || n.OpType == "ReduceSum" || n.OpType == "ReduceL2" || n.OpType == "ReduceSumSquare"
	for _, in := range n.Inputs() {
		if in == nil {
			continue
		}
		if !w.IsAct(in) && !w.IsConst(in) {
			return false, false
		}
		o, r := w.StatOf(in, x, nodes, depth+1)
		if !o {
			return false, false
		}
		red = red || r
	}
	return true, red
}

// cone lists the nodes computing vs from values that do not carry content
// (stopping at constants and graph inputs), in topological order.
func (w *Work) Cone(vs ...*graph.Value) []*graph.Node {
	seen := map[*graph.Node]bool{}
	var out []*graph.Node
	var walk func(v *graph.Value)
	walk = func(v *graph.Value) {
		if v == nil || w.IsConst(v) || w.IsAct(v) {
			return
		}
		n := v.Producer()
		if n == nil || seen[n] {
			return
		}
		seen[n] = true
		out = append(out, n)
		for _, in := range n.Inputs() {
			walk(in)
		}
		for _, sg := range n.Subgraphs() {
			for _, o := range sg.Outputs {
				walk(o)
			}
			sg.Walk(func(m *graph.Node) {
				for _, in := range m.Inputs() {
					if in != nil && in.Graph() != sg {
						walk(in)
					}
				}
			})
		}
	}
	for _, v := range vs {
		walk(v)
	}
	slices.SortFunc(out, func(a, b *graph.Node) int { return w.Pos(a) - w.Pos(b) })
	return out
}

// origNames lists the original names of nodes (Constant nodes left out),
// deduplicated, in the original model's order.
func (w *Work) OrigNames(nodes []*graph.Node) []string {
	seen := map[*graph.Node]bool{}
	var origs []*graph.Node
	for _, n := range nodes {
		o := w.origNode.Of(n)
		if o == nil || seen[o] || (o.OpType == "Constant" && IsONNX(o)) {
			continue
		}
		seen[o] = true
		origs = append(origs, o)
	}
	order := w.origOrder()
	slices.SortFunc(origs, func(a, b *graph.Node) int { return order[a] - order[b] })
	out := make([]string, 0, len(origs))
	for _, o := range origs {
		name := o.Name
		if name == "" && len(o.Outputs()) > 0 {
			name = o.Output(0).Name
		}
		out = append(out, name)
	}
	return out
}

func (w *Work) origOrder() map[*graph.Node]int {
	w.origIndexes()
	return w.oorder
}

// origIndexes numbers the original model's nodes in order (oorder) and
// gives each node name the place of its first node (nameOrder), in one walk;
// both maps are made at their final size (growing them rehashed).
func (w *Work) origIndexes() {
	if w.oorder != nil {
		return
	}
	n := 0
	w.Orig.Walk(func(*graph.Node) { n++ })
	w.oorder = make(map[*graph.Node]int, n)
	w.nameOrder = make(map[string]int, n)
	k := 0
	w.Orig.Walk(func(n *graph.Node) {
		w.oorder[n] = k
		name := n.Name
		if name == "" && len(n.Outputs()) > 0 {
			name = n.Output(0).Name
		}
		if _, ok := w.nameOrder[name]; !ok {
			w.nameOrder[name] = k
		}
		k++
	})
}

func SameShape(a, b Shape) bool {
	return a.Ranked && b.Ranked && slices.Equal(a.Dims, b.Dims)
}

// shapeOperand reports whether input i of n is a shape, axes or bounds
// (which say how content is laid out, not what is added to it).
func ShapeOperand(n *graph.Node, i int) bool {
	if i == 0 {
		return false
	}
	switch n.OpType {
	case "Reshape", "Expand", "Tile", "Slice", "Unsqueeze", "Squeeze", "Split", "Pad", "ReduceMean", "ReduceSum",
		"ReduceMax", "ReduceMin", "ReduceL2", "Resize", "CumSum", "TopK":
		return true
	}
	return false
}

// fixedPositionTable reports whether the constant c, multiplying q in a
// side's region, differs along an axis before the features: the cos or
// sin of fixed positions (an encoder of fixed length, a ViT's fixed patch
// grid, whose computed tables normalisation folded), as opposed to a
// scale over the features.
func (w *Work) FixedPositionTable(c *graph.Value) bool {
	t := w.Const(c)
	if t == nil || t.Rank() < 2 || !t.DType.IsFloat() {
		return false
	}
	x := t.Float64s()
	inner := 1
	for a := t.Rank() - 1; a >= 0; a-- {
		n := t.Shape[a]
		if a < t.Rank()-1 && n > 1 {
			outer := len(x) / (n * inner)
			for o := 0; o < outer; o++ {
				for i := 1; i < n; i++ {
					for k := 0; k < inner; k++ {
						if x[(o*n+i)*inner+k] != x[o*n*inner+k] {
							return true
						}
					}
				}
			}
		}
		inner *= n
	}
	return false
}

// IsWeight reports whether v is computed from parameters given as graph
// inputs (and constants) only, without positions or shapes: weights that
// an exporter kept out of the file, such as the bias of a projection.
func (w *Work) IsWeight(v *graph.Value) bool {
	if v == nil || w.IsAct(v) {
		return false
	}
	if r, ok := w.weight[v]; ok {
		return r
	}
	w.weight[v] = false // cycles and depth: not a weight
	r := false
	switch n := v.Producer(); {
	case n == nil:
		r = v.Graph() == w.M.Graph && w.Role(v) == RoleParam
	case n.OpType == "Shape" || n.OpType == "Size" || n.OpType == "Range" || n.OpType == "ConstantOfShape" || len(n.Subgraphs()) > 0:
		r = false
	default:
		r = true
		some := false
		for _, in := range n.Inputs() {
			if in == nil || w.IsConst(in) {
				continue
			}
			some = true
			if !w.IsWeight(in) {
				r = false
				break
			}
		}
		r = r && some
	}
	w.weight[v] = r
	return r
}
