package work

import (
	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/passes/pattern"
)

// softmaxPattern is a Softmax written out: exp(x - max(x)) / sum(exp(...)),
// with or without the max (ONNX Runtime inlines Softmax's function body).
var softmaxPattern = pattern.Check(
	pattern.Op("Div",
		pattern.All(pattern.Capture("e"), pattern.Op("Exp", pattern.Or(pattern.Op("Sub", pattern.Capture("x"), pattern.Op("ReduceMax", pattern.Ref("x")).As("max")), pattern.Capture("x")))),
		pattern.Op("ReduceSum", pattern.Ref("e")).As("sum")),
	func(env pattern.Env, vals map[string]*graph.Value, nodes map[string]*graph.Node) string {
		r := env.Rank(vals["x"])
		sum, ok := reduceAxis(env, nodes["sum"], r)
		if !ok {
			return "the sum is not over one axis with keepdims"
		}
		if mx := nodes["max"]; mx != nil {
			if a, ok := reduceAxis(env, mx, r); !ok || a != sum {
				return "the max and the sum reduce different axes"
			}
		}
		return ""
	})

// reduceAxis is the single axis a keepdims reduction reduces.
func reduceAxis(env pattern.Env, n *graph.Node, rank int) (int, bool) {
	if n.AttrInt("keepdims", 1) == 0 || rank < 0 {
		return 0, false
	}
	axes, ok := env.Axes(n, 1)
	if !ok || len(axes) != 1 {
		return 0, false
	}
	return NormAxis(axes[0], rank), true
}

// canonicalise puts ops written out as several nodes back into one node,
// so that detectors see one form: Softmax, and a row lookup written as a
// one-hot product (oneHotLookup).
func (w *Work) canonicalise(g0 *graph.Graph) {
	for _, g := range graphs(g0) {
		for _, n := range g.Nodes() {
			if n.OpType == "MatMul" && IsONNX(n) && !n.Output(0).IsGraphOutput() {
				w.oneHotLookup(g, n)
				continue
			}
			if n.OpType != "Div" || !IsONNX(n) || n.Output(0).IsGraphOutput() {
				continue
			}
			m, _ := pattern.MatchValue(w, softmaxPattern, n.Output(0))
			if m == nil {
				continue
			}
			x := m.Values["x"]
			axis, _ := reduceAxis(w, m.NodesBy["sum"], w.Shape(x).Rank())
			sm := g.NewNode("Softmax", "", []*graph.Value{x}, 1, graph.IntAttr("axis", int64(axis)))
			w.insertBefore(g, n, sm, n)
			n.Output(0).ReplaceAllUsesWith(sm.Output(0))
			w.OrigValues.set(sm.Output(0), w.OrigValues.Of(n.Output(0)))
		}
	}
}

// renameOps replaces ops that are another op under a training or vendor
// name: com.microsoft ConcatTraining whose lengths output is unused is a
// Concat.
func (w *Work) renameOps(g0 *graph.Graph) {
	for _, g := range graphs(g0) {
		for _, n := range g.Nodes() {
			if n.OpType != "ConcatTraining" || n.Domain != "com.microsoft" {
				continue
			}
			if len(n.Outputs()) > 1 && n.Output(1).Name != "" && (n.Output(1).NumUses() > 0 || n.Output(1).IsGraphOutput()) {
				continue
			}
			if n.Output(0).IsGraphOutput() {
				continue
			}
			c := g.NewNode("Concat", "", n.Inputs(), 1, graph.IntAttr("axis", n.AttrInt("axis", 0)))
			g.InsertBefore(n, c)
			w.origNode.set(c, w.origNode.Of(n))
			w.OrigValues.set(c.Output(0), w.OrigValues.Of(n.Output(0)))
			n.Output(0).ReplaceAllUsesWith(c.Output(0))
			_ = g.Remove(n)
		}
	}
}

// oneHotLookup replaces MatMul(OneHot(i, depth, [0, 1]), T), T [depth, d],
// by Gather(T, i): the same rows (TensorFlow's TPU-friendly embedding
// lookup, BERT's use_one_hot_embeddings), so that the detectors see a table
// read at positions whichever way it is written. A table stored
// transposed, T [d, depth], read as MatMul(T, OneHot(i, depth, [0, 1]))
// with the one-hot on the axis the product contracts (the next to last),
// is Gather(T, i, axis=1): its columns, moved to the product's layout by a
// Transpose when i has more than one axis. The indices are cast to
// int64 when OneHot was given them as floats (OneHot and Gather both wrap
// negative indices; an index out of range, a zero row for OneHot, is an
// error for Gather, as for a model written with Gather).
func (w *Work) oneHotLookup(g *graph.Graph, n *graph.Node) {
	if len(n.Inputs()) != 2 || n.Input(0) == nil || n.Input(1) == nil {
		return // a malformed product: the executor names what is wrong
	}
	for k := 0; k < 2; k++ {
		if w.oneHotOperand(g, n, k) {
			return
		}
	}
}

// oneHotOperand replaces the product n when its operand k is a one-hot
// of indices on the axis the product contracts and the other a stored
// 2-D table: operand 0 reads the table's rows (axis 0), operand 1 its
// columns (axis 1).
func (w *Work) oneHotOperand(g *graph.Graph, n *graph.Node, k int) bool {
	oh := n.Input(k).Producer()
	if oh == nil || oh.OpType != "OneHot" || !IsONNX(oh) || len(oh.Inputs()) != 3 || n.Input(k).NumUses() != 1 {
		return false
	}
	idx, table := oh.Input(0), n.Input(1-k)
	depth, vals := w.Const(oh.Input(1)), w.Const(oh.Input(2))
	if depth == nil || depth.Len() != 1 || vals == nil || vals.Len() != 2 {
		return false
	}
	if v := vals.Float64s(); v[0] != 0 || v[1] != 1 {
		return false
	}
	ri := w.Shape(idx).Rank()
	// The product contracts the last axis of its first operand and the
	// next to last of its second.
	want := ri
	if k == 1 {
		want = ri - 1
	}
	if ri < 1 && k == 1 || ri < 0 || NormAxis(oh.AttrInt("axis", -1), ri+1) != want {
		return false // the one-hot axis is not the one the product contracts
	}
	ts := w.Shape(table)
	if ts.Rank() != 2 || !ts.Dims[k].Known() || int64(ts.Dims[k]) != int64(depth.Float64s()[0]) {
		return false
	}
	if !IsFloatType(w.ElemType(table)) {
		return false
	}
	if !IsIntType(w.ElemType(idx)) {
		c := g.NewNode("Cast", "", []*graph.Value{idx}, 1, graph.IntAttr("to", int64(graph.Int64)))
		w.insertBefore(g, n, c, oh)
		idx = c.Output(0)
	}
	gn := g.NewNode("Gather", "", []*graph.Value{table, idx}, 1, graph.IntAttr("axis", int64(k)))
	w.insertBefore(g, n, gn, n)
	out := gn
	if k == 1 && ri > 1 {
		// Gather gives [d, i0, ..., i_last]; the product
		// [i0, ..., d, i_last].
		perm := make([]int64, ri+1)
		for j := 0; j < ri-1; j++ {
			perm[j] = int64(j + 1)
		}
		perm[ri-1], perm[ri] = 0, int64(ri)
		out = g.NewNode("Transpose", "", []*graph.Value{gn.Output(0)}, 1, graph.IntsAttr("perm", perm...))
		w.insertBefore(g, n, out, n)
	}
	n.Output(0).ReplaceAllUsesWith(out.Output(0))
	w.OrigValues.set(out.Output(0), w.OrigValues.Of(n.Output(0)))
	return true
}

// insertBefore puts nn, a node the normalisation makes, in g before at,
// maps it back to the original node of from, and gives its outputs their
// element types and shapes.
func (w *Work) insertBefore(g *graph.Graph, at, nn, from *graph.Node) {
	g.InsertBefore(at, nn)
	w.origNode.set(nn, w.origNode.Of(from))
	w.etype(nn)
	w.infer(nn)
}
