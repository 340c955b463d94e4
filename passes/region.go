package passes

import (
	"fmt"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

// side is what reaches one operand of Q·Kᵀ: the content value In (q or k
// as projected), the value Out the scores read after any position-dependent
// change (rotation, temperature), the nodes between them, and the values
// that do not depend on content entering those nodes (cos/sin, scales).
type side struct {
	Operand *graph.Value
	In, Out *graph.Value
	Nodes   []*graph.Node
	Pos     []*graph.Value
	// Norm is "l2_after_rope" when Out is normalised without a weight
	// before the scores read it.
	Norm string
	// Skipped are the nodes between Out and the operand (transposes,
	// reshapes, the repeat of GQA, a constant scale, the norm).
	Skipped []*graph.Node
	// Cache is a KV-cache input concatenated with the new keys.
	Cache *graph.Value
}

// layoutOps pass content through unchanged in value (up to layout), with
// only constant or shape operands.
var layoutOps = map[string]bool{"Transpose": true, "Reshape": true, "Cast": true, "Expand": true, "Tile": true,
	"Unsqueeze": true, "Squeeze": true, "Identity": true, "Flatten": true}

// findSide walks back from a score operand; hd is the head dimension (the
// contracted axis of the scores).
func (w *Work) findSide(operand *graph.Value, hd Dim) (*side, string) {
	s := &side{Operand: operand}
	v := operand
	// 1. Skip layout changes, constant scales, a weightless norm and the
	// concatenation with a KV cache.
	for steps := 0; steps < 32; steps++ {
		n := v.Producer()
		if n == nil {
			break
		}
		if !isONNX(n) {
			break
		}
		if x, nodes, kind := w.rowNorm(v); x != nil {
			s.Norm = kind
			s.Skipped = append(s.Skipped, nodes...)
			v = x
			continue
		}
		acts := w.actInputs(n)
		if len(acts) == 1 && layoutOps[n.OpType] && acts[0] == 0 &&
			(w.Shape(n.Input(0)).Last() == hd || w.Shape(v).Last() != hd) {
			s.Skipped = append(s.Skipped, n)
			v = n.Input(0)
			continue
		}
		if len(acts) == 1 && (n.OpType == "Mul" || n.OpType == "Div" && acts[0] == 0) && w.IsConst(n.Input(1-acts[0])) {
			s.Skipped = append(s.Skipped, n)
			v = n.Input(acts[0])
			continue
		}
		if n.OpType == "Concat" && len(acts) == 2 {
			// past ++ new along the sequence: follow the new part.
			a, b := n.Input(acts[0]), n.Input(acts[1])
			if w.cacheInput(a) {
				s.Cache, v = a, b
				s.Skipped = append(s.Skipped, n)
				continue
			}
		}
		if n.OpType == "TensorScatter" && len(acts) == 2 && acts[0] == 0 && acts[1] == 1 && w.cacheInput(n.Input(0)) {
			// A static KV cache (opset 24): the new keys written into the
			// cache given as input: follow the new keys.
			s.Cache, v = n.Input(0), n.Input(1)
			s.Skipped = append(s.Skipped, n)
			continue
		}
		break
	}
	s.Out = v
	// 2. Walk back to the single content value everything between comes
	// from.
	frontier := []*graph.Value{v}
	inRegion := map[*graph.Node]bool{}
	mixing := false
	for steps := 0; steps < 256; steps++ {
		if len(frontier) == 1 && mixing {
			s.In = frontier[0]
			break
		}
		// The latest-computed value first.
		k := 0
		for i, f := range frontier {
			if w.posOf(f) > w.posOf(frontier[k]) {
				k = i
			}
		}
		x := frontier[k]
		n := x.Producer()
		if n == nil || w.isProjection(n) || len(n.Subgraphs()) > 0 {
			if len(frontier) == 1 {
				s.In = x
			}
			break
		}
		frontier = slices.DeleteFunc(frontier, func(f *graph.Value) bool { return f.Producer() == n })
		inRegion[n] = true
		if isRotaryOp(n) {
			// A fused rotation changes q with the position even when its
			// positions are a constant (the offset 0 of com.microsoft's op).
			mixing = true
		}
		s.Nodes = append(s.Nodes, n)
		for i, in := range n.Inputs() {
			switch {
			case in == nil:
			case w.IsAct(in):
				if !slices.Contains(frontier, in) {
					frontier = append(frontier, in)
				}
			case shapeOperand(n, i):
			case w.IsWeight(in) && w.Shape(in).Rank() <= 1:
				// A bias or scale over the features (an exporter's weight
				// input), not something that varies with the position.
			case !w.IsConst(in), n.OpType == "Mul" && w.fixedPositionTable(in):
				mixing = true
				if !slices.Contains(s.Pos, in) {
					s.Pos = append(s.Pos, in)
				}
			}
		}
	}
	if s.In == nil {
		return nil, fmt.Sprintf("the content inputs of the scores' operand %s do not come from one value", w.name(operand))
	}
	if !mixing {
		s.Nodes = nil
	} else {
		w.packedPart(s)
		// Move q back through layout changes to a value of the rotated
		// value's shape (a rotation of pairs may reshape q to
		// [..., d/2, 2] first).
		for steps := 0; steps < 8 && !sameShape(w.Shape(s.In), w.Shape(s.Out)); steps++ {
			n := s.In.Producer()
			if n == nil || !layoutOps[n.OpType] || !isONNX(n) || len(w.actInputs(n)) != 1 || w.actInputs(n)[0] != 0 {
				break
			}
			s.Nodes = append(s.Nodes, n)
			s.In = n.Input(0)
		}
	}
	slices.SortFunc(s.Nodes, func(a, b *graph.Node) int { return w.Pos(a) - w.Pos(b) })
	return s, ""
}

// packedPart handles q and k rotated as one tensor: concatenated along
// an axis, rotated once, split back along the same axis. The side's content
// is then its own part of the concatenation (the input of the Concat at
// the index of the Split's output the side reads), not the packed value,
// so that a probe of q is a probe of q alone.
func (w *Work) packedPart(s *side) {
	if sameShape(w.Shape(s.In), w.Shape(s.Out)) {
		return
	}
	c, sp := s.In.Producer(), s.Out.Producer()
	if c == nil || sp == nil || c.OpType != "Concat" || sp.OpType != "Split" || !isONNX(c) || !isONNX(sp) || !slices.Contains(s.Nodes, sp) {
		return
	}
	r := w.Shape(s.In).Rank()
	axis, sizes, ok := w.SplitSizes(sp)
	if !ok || r < 1 || normAxis(int64(axis), r) != normAxis(c.AttrInt("axis", 0), r) || len(sizes) != len(c.Inputs()) {
		return
	}
	idx := slices.Index(sp.Outputs(), s.Out)
	if idx < 0 {
		return
	}
	ax := normAxis(int64(axis), r)
	for i, in := range c.Inputs() {
		sh := w.Shape(in)
		if in == nil || sh.Rank() != r || !sh.Dims[ax].Known() || int64(sh.Dims[ax]) != sizes[i] {
			return // the parts are not the split's sizes
		}
	}
	if part := c.Input(idx); w.IsAct(part) {
		s.Nodes = append(s.Nodes, c)
		s.In = part
	}
}

func (w *Work) posOf(v *graph.Value) int {
	if n := v.Producer(); n != nil {
		return w.Pos(n)
	}
	return -1
}

func (w *Work) name(v *graph.Value) string {
	if o := w.OrigValue(v); o != "" {
		return o
	}
	return v.Name
}

// ValueName is the original model's name of v (pattern.Env).
func (w *Work) ValueName(v *graph.Value) string { return w.name(v) }

// Rank is the inferred rank of v, -1 when unknown (pattern.Env).
func (w *Work) Rank(v *graph.Value) int { return w.Shape(v).Rank() }

// actInputs lists the indexes of n's inputs that carry content.
func (w *Work) actInputs(n *graph.Node) []int {
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
func (w *Work) cacheInput(v *graph.Value) bool {
	for steps := 0; steps < 8 && v != nil; steps++ {
		if v.Producer() == nil {
			return w.Role(v) == RoleContent
		}
		n := v.Producer()
		if !layoutOps[n.OpType] {
			return false
		}
		v = n.Input(0)
	}
	return false
}

// isProjection reports whether n multiplies content by weights (a linear
// layer, a convolution), or normalises it with learned weights: where the
// walk back from the scores stops.
func (w *Work) isProjection(n *graph.Node) bool {
	if n.OpType == "Gather" {
		return !w.IsAct(n.Input(0)) // an embedding lookup, not a slice of content
	}
	switch n.OpType {
	case "MatMul", "Gemm", "Einsum", "FusedMatMul", "Conv", "MatMulInteger", "MatMulNBits", "QLinearMatMul",
		"LayerNormalization", "SimplifiedLayerNormalization", "SkipLayerNormalization",
		"SkipSimplifiedLayerNormalization", "RMSNormalization", "EmbedLayerNormalization":
		return true
	}
	return false
}

// rowNorm matches a normalisation of each row of v's producer by a
// statistic of the row itself without a weight: x·rsqrt(mean(x²)+eps),
// x/sqrt(sum(x²)), x/ReduceL2(x). It returns x, the nodes and the kind.
func (w *Work) rowNorm(v *graph.Value) (*graph.Value, []*graph.Node, string) {
	n := v.Producer()
	if n == nil || (n.OpType != "Mul" && n.OpType != "Div") {
		return nil, nil, ""
	}
	for xi := 0; xi < 2; xi++ {
		if n.OpType == "Div" && xi == 1 {
			break
		}
		x, stat := n.Input(xi), n.Input(1-xi)
		if x == nil || stat == nil || !w.IsAct(x) || !w.IsAct(stat) {
			continue
		}
		if w.Shape(stat).Last() != 1 {
			continue
		}
		// The statistic must come from x alone through reductions and
		// scalar arithmetic.
		nodes := []*graph.Node{n}
		ok, reduced := w.statOf(stat, x, &nodes, 0)
		if ok && reduced {
			return x, nodes, "l2_after_rope"
		}
	}
	return nil, nil, ""
}

func (w *Work) statOf(v, x *graph.Value, nodes *[]*graph.Node, depth int) (ok, reduced bool) {
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
	if n == nil || !isONNX(n) {
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
		o, r := w.statOf(in, x, nodes, depth+1)
		if !o {
			return false, false
		}
		red = red || r
	}
	return true, red
}

// cone lists the nodes computing vs from values that do not carry content
// (stopping at constants and graph inputs), in topological order.
func (w *Work) cone(vs ...*graph.Value) []*graph.Node {
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
func (w *Work) origNames(nodes []*graph.Node) []string {
	seen := map[*graph.Node]bool{}
	var origs []*graph.Node
	for _, n := range nodes {
		o := w.origNode.of(n)
		if o == nil || seen[o] || (o.OpType == "Constant" && isONNX(o)) {
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

func sameShape(a, b Shape) bool {
	return a.Ranked && b.Ranked && slices.Equal(a.Dims, b.Dims)
}

// shapeOperand reports whether input i of n is a shape, axes or bounds
// (which say how content is laid out, not what is added to it).
func shapeOperand(n *graph.Node, i int) bool {
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
func (w *Work) fixedPositionTable(c *graph.Value) bool {
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
