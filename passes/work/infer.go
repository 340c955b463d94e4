package work

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/onnxpe/onnxpe/graph"
	"github.com/onnxpe/onnxpe/kernels"
)

// maxPartial is the most elements a tracked partial value (a shape vector)
// may have.
const maxPartial = 16

// Partial is the partly known value of a small integer tensor (a shape
// vector and the scalars cut from it): each element a number or a
// symbolic size. ok is false when nothing is tracked.
func (w *Work) Partial(v *graph.Value) ([]Dim, bool) {
	if p, ok := w.pv[v]; ok {
		if len(w.Syms.alias) > 0 {
			q := make([]Dim, len(p))
			for i, d := range p {
				q[i] = w.Syms.Canon(d)
			}
			return q, true
		}
		return p, true
	}
	if v == nil || v.Const == nil || v.Const.Len() > maxPartial || !IsIntType(v.Const.DataType()) {
		return nil, false // never decode a large tensor for this
	}
	if t := w.Const(v); t != nil && t.Len() <= maxPartial && IsIntType(t.DType) {
		p := make([]Dim, t.Len())
		for i, x := range t.Int64s() {
			p[i] = Dim(x)
		}
		return p, true
	}
	return nil, false
}

// PartialInts is the partial value of v when every element is known.
func (w *Work) PartialInts(v *graph.Value) ([]int64, bool) {
	p, ok := w.Partial(v)
	if !ok {
		return nil, false
	}
	out := make([]int64, len(p))
	for i, d := range p {
		if d.IsSym() {
			return nil, false
		}
		out[i] = int64(d)
	}
	return out, true
}

func IsIntType(dt graph.DataType) bool {
	switch dt {
	case graph.Int64, graph.Int32, graph.Int16, graph.Int8, graph.Uint8, graph.Uint16, graph.Uint32, graph.Uint64:
		return true
	}
	return false
}

// intsOf reads a constant integer input (nil when absent or not constant).
func (w *Work) IntsOf(v *graph.Value) ([]int64, bool) {
	if v == nil || v.Const != nil && v.Const.Len() > 1<<16 {
		return nil, false
	}
	t := w.Const(v)
	if t == nil {
		return nil, false
	}
	return t.Int64s(), true
}

// Axes returns the axes of a node in either opset form (attribute, or the
// input at index in): Unsqueeze, Squeeze, Reduce*.
func (w *Work) Axes(n *graph.Node, in int) ([]int64, bool) {
	if a := n.Attr("axes"); a != nil {
		return a.Ints(), true
	}
	if v := n.Input(in); v != nil {
		return w.IntsOf(v)
	}
	return nil, true // absent: all axes (reductions) or none
}

// SliceParams returns starts, ends, axes and steps of a Slice in either
// opset form; ok is false when one of them is not constant.
func (w *Work) SliceParams(n *graph.Node) (starts, ends, axes, steps []int64, ok bool) {
	if a := n.Attr("starts"); a != nil { // opset < 10
		starts, ends, axes = a.Ints(), n.AttrInts("ends"), n.AttrInts("axes")
	} else {
		var ok1, ok2 bool
		if starts, ok1 = w.IntsOf(n.Input(1)); !ok1 {
			return nil, nil, nil, nil, false
		}
		if ends, ok2 = w.IntsOf(n.Input(2)); !ok2 {
			return nil, nil, nil, nil, false
		}
		if n.Input(3) != nil {
			if axes, ok1 = w.IntsOf(n.Input(3)); !ok1 {
				return nil, nil, nil, nil, false
			}
		}
		if n.Input(4) != nil {
			if steps, ok1 = w.IntsOf(n.Input(4)); !ok1 {
				return nil, nil, nil, nil, false
			}
		}
	}
	if axes == nil {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	if steps == nil {
		steps = make([]int64, len(starts))
		for i := range steps {
			steps[i] = 1
		}
	}
	if len(ends) != len(starts) || len(axes) != len(starts) || len(steps) != len(starts) {
		return nil, nil, nil, nil, false
	}
	return starts, ends, axes, steps, true
}

// SplitSizes returns the output sizes of a Split along its axis (either
// opset form, or equal parts of a known dimension).
func (w *Work) SplitSizes(n *graph.Node) (axis int, sizes []int64, ok bool) {
	s := w.Shape(n.Input(0))
	if !s.Ranked {
		return 0, nil, false
	}
	axis = NormAxis(n.AttrInt("axis", 0), len(s.Dims))
	if axis < 0 || axis >= len(s.Dims) {
		return 0, nil, false
	}
	if a := n.Attr("split"); a != nil {
		return axis, a.Ints(), true
	}
	if v := n.Input(1); v != nil {
		sz, ok := w.IntsOf(v)
		return axis, sz, ok
	}
	d := s.Dims[axis]
	k := int64(len(n.Outputs()))
	if no := n.AttrInt("num_outputs", 0); no > 0 {
		k = no
	}
	if !d.Known() || k == 0 {
		return axis, nil, false
	}
	per := (int64(d) + k - 1) / k
	for i := int64(0); i < k; i++ {
		sizes = append(sizes, min(per, int64(d)-i*per))
	}
	return axis, sizes, true
}

// infer sets the shapes (and partial values) of n's outputs.
func (w *Work) infer(n *graph.Node) {
	outs := n.Outputs()
	if len(outs) == 0 {
		return
	}
	set := func(i int, s Shape) {
		if i < len(outs) && outs[i].Name != "" {
			w.shapes.set(outs[i], s)
		}
	}
	in := func(i int) Shape { return w.Shape(n.Input(i)) }
	same := func() { set(0, in(0)) }
	if n.Domain != "" && n.Domain != "ai.onnx" {
		w.inferContrib(n, set, in)
		return
	}
	switch n.OpType {
	case "Identity", "Cast", "CastLike", "Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log", "Sin", "Cos",
		"Tanh", "Sigmoid", "Relu", "Erf", "Floor", "Ceil", "Round", "Sign", "Not", "Softmax", "LogSoftmax",
		"Dropout", "LayerNormalization", "CumSum", "Trilu", "Elu", "LeakyRelu", "Gelu", "HardSigmoid",
		"Softplus", "Clip", "IsNaN", "IsInf", "ScatterND", "ScatterElements", "RMSNormalization", "Mish",
		"BatchNormalization", "InstanceNormalization", "GroupNormalization", "Selu", "Celu", "Swish",
		"Atan", "Asin", "Acos", "Tan", "Sinh", "Cosh", "Bernoulli", "HardSwish", "PRelu", "ThresholdedRelu",
		"SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization", "SkipLayerNormalization",
		"FastGelu", "BiasGelu", "QuickGelu", "RotaryEmbedding", "BiasAdd":
		same()
		if n.OpType == "Cast" || n.OpType == "Identity" || n.OpType == "CastLike" {
			if p, ok := w.Partial(n.Input(0)); ok && (n.OpType == "Identity" || IsIntType(graph.DataType(n.AttrInt("to", int64(graph.Int64))))) {
				w.pv[outs[0]] = p
			}
		}
		w.partialLogic(n)
	case "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Equal", "Less", "Greater",
		"LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "Where", "BitShift", "BitwiseAnd", "BitwiseOr":
		ss := make([]Shape, len(n.Inputs()))
		for i := range ss {
			ss[i] = in(i)
		}
		if vectorsAgainstUnknown(n, ss) {
			set(0, Shape{})
		} else {
			set(0, w.broadcast(ss...))
		}
		w.partialElementwise(n)
	case "Shape":
		s := in(0)
		if s.Ranked {
			start, end := ShapeWindow(n, len(s.Dims))
			set(0, ranked(Dim(end-start)))
			w.pv[outs[0]] = append([]Dim(nil), s.Dims[start:end]...)
		} else {
			set(0, ranked(w.Syms.fresh()))
		}
	case "Size":
		set(0, ranked())
		if s := in(0); s.AllKnown() {
			c, _ := product(s.Dims)
			w.pv[outs[0]] = []Dim{Dim(c)}
		}
	case "Reshape":
		w.inferReshape(n, set)
	case "Transpose":
		w.inferTranspose(n, outs, set, in)
	case "Unsqueeze":
		w.inferUnsqueeze(n, outs, set, in)
	case "Squeeze":
		w.inferSqueeze(n, outs, set, in)
	case "Flatten":
		w.inferFlatten(n, outs, set, in)
	case "MatMul", "MatMulInteger", "FusedMatMul":
		w.inferMatMul(n, outs, set, in)
	case "Gemm":
		w.inferGemm(n, outs, set, in)
	case "Gather":
		w.inferGather(n, set)
	case "GatherElements":
		set(0, in(1))
	case "GatherND":
		set(0, Shape{})
	case "Slice":
		w.inferSlice(n, set)
	case "Concat":
		w.inferConcat(n, set)
	case "Split":
		w.inferSplit(n, outs, set, in)
	case "Expand":
		w.inferExpand(n, outs, set, in)
	case "Tile":
		w.inferTile(n, outs, set, in)
	case "ConstantOfShape":
		w.inferConstantOfShape(n, outs, set, in)
	case "Range":
		set(0, ranked(w.rangeLen(n)))
	case "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceL1",
		"ReduceSumSquare", "ReduceLogSumExp", "ArgMax", "ArgMin":
		w.inferReduce(n, outs, set, in)
	case "Einsum":
		w.inferEinsum(n, set)
	case "Constant":
		if t, err := graph.ConstantNodeValue(n); err == nil {
			d := make([]Dim, len(t.Dims()))
			for i, x := range t.Dims() {
				d[i] = Dim(x)
			}
			set(0, ranked(d...))
		}
	case "NonZero":
		if s := in(0); s.Ranked {
			set(0, ranked(Dim(len(s.Dims)), w.Syms.fresh()))
		}
	case "OneHot", "Pad", "Resize", "TopK", "Compress", "Unique":
		for i := range outs {
			if s := in(0); s.Ranked {
				d := make([]Dim, len(s.Dims))
				for j := range d {
					d[j] = w.Syms.fresh()
				}
				set(i, ranked(d...))
			}
		}
	case "Conv", "ConvTranspose", "MaxPool", "AveragePool":
		w.inferConv(n, outs, set, in)
	case "Attention":
		if !w.inferFused(n, set, in) {
			for i := range outs {
				set(i, w.declaredShape(outs[i].Type))
			}
		}
	default:
		for i := range outs {
			set(i, w.declaredShape(outs[i].Type))
		}
	}
}

// inferTranspose infers the shapes of Transpose.
func (w *Work) inferTranspose(n *graph.Node, outs []*graph.Value, set func(int, Shape), in func(int) Shape) {
	s := in(0)
	if !s.Ranked {
		set(0, Shape{})
		return
	}
	perm := n.AttrInts("perm")
	if perm == nil {
		for i := len(s.Dims) - 1; i >= 0; i-- {
			perm = append(perm, int64(i))
		}
	}
	out := make([]Dim, len(perm))
	for i, p := range perm {
		if int(p) < len(s.Dims) {
			out[i] = s.Dims[p]
		}
	}
	set(0, ranked(out...))
}

// inferUnsqueeze infers the shapes of Unsqueeze.
func (w *Work) inferUnsqueeze(n *graph.Node, outs []*graph.Value, set func(int, Shape), in func(int) Shape) {
	s := in(0)
	axes, ok := w.Axes(n, 1)
	if !s.Ranked || !ok {
		set(0, Shape{})
		return
	}
	r := len(s.Dims) + len(axes)
	mark := make([]bool, r)
	for _, a := range axes {
		if x := NormAxis(a, r); x >= 0 && x < r {
			mark[x] = true
		}
	}
	out := make([]Dim, 0, r)
	k := 0
	for i := 0; i < r; i++ {
		if mark[i] {
			out = append(out, 1)
		} else if k < len(s.Dims) {
			out = append(out, s.Dims[k])
			k++
		}
	}
	set(0, ranked(out...))
	if p, ok := w.Partial(n.Input(0)); ok {
		w.pv[outs[0]] = p
	}
}

// inferSqueeze infers the shapes of Squeeze.
func (w *Work) inferSqueeze(n *graph.Node, outs []*graph.Value, set func(int, Shape), in func(int) Shape) {
	s := in(0)
	axes, ok := w.Axes(n, 1)
	if !s.Ranked || !ok {
		set(0, Shape{})
		return
	}
	drop := map[int]bool{}
	for _, a := range axes {
		drop[NormAxis(a, len(s.Dims))] = true
	}
	var out []Dim
	for i, d := range s.Dims {
		if axes == nil && d == 1 || drop[i] {
			continue
		}
		out = append(out, d)
	}
	set(0, ranked(out...))
	if p, ok := w.Partial(n.Input(0)); ok {
		w.pv[outs[0]] = p
	}
}

// inferFlatten infers the shapes of Flatten.
func (w *Work) inferFlatten(n *graph.Node, outs []*graph.Value, set func(int, Shape), in func(int) Shape) {
	s := in(0)
	if !s.Ranked {
		set(0, Shape{})
		return
	}
	ax := NormAxis(n.AttrInt("axis", 1), len(s.Dims))
	a, as := product(s.Dims[:ax])
	b, bs := product(s.Dims[ax:])
	da, db := Dim(a), Dim(b)
	if len(as) == 1 && a == 1 {
		da = as[0]
	} else if len(as) > 0 {
		da = w.exprSym('*', as, a)
	}
	if len(bs) == 1 && b == 1 {
		db = bs[0]
	} else if len(bs) > 0 {
		db = w.exprSym('*', bs, b)
	}
	set(0, ranked(da, db))
}

// inferMatMul infers the shapes of MatMul.
func (w *Work) inferMatMul(n *graph.Node, outs []*graph.Value, set func(int, Shape), in func(int) Shape) {
	a, b := in(0), in(1)
	if !a.Ranked || !b.Ranked || len(a.Dims) == 0 || len(b.Dims) == 0 {
		set(0, Shape{})
		return
	}
	ad, bd := a.Dims, b.Dims
	if len(ad) == 1 {
		ad = []Dim{1, ad[0]}
	}
	if len(bd) == 1 {
		bd = []Dim{bd[0], 1}
	}
	batch := w.broadcast(ranked(ad[:len(ad)-2]...), ranked(bd[:len(bd)-2]...))
	out := append(append([]Dim{}, batch.Dims...), ad[len(ad)-2], bd[len(bd)-1])
	if len(a.Dims) == 1 {
		out = append(out[:len(out)-2], out[len(out)-1])
	}
	if len(b.Dims) == 1 {
		out = out[:len(out)-1]
	}
	set(0, ranked(out...))
}

// inferGemm infers the shapes of Gemm.
func (w *Work) inferGemm(n *graph.Node, outs []*graph.Value, set func(int, Shape), in func(int) Shape) {
	a, b := in(0), in(1)
	if a.Rank() != 2 || b.Rank() != 2 {
		set(0, Shape{})
		return
	}
	m, k := a.Dims[0], b.Dims[1]
	if n.AttrInt("transA", 0) != 0 {
		m = a.Dims[1]
	}
	if n.AttrInt("transB", 0) != 0 {
		k = b.Dims[0]
	}
	set(0, ranked(m, k))
}

// inferSplit infers the shapes of Split.
func (w *Work) inferSplit(n *graph.Node, outs []*graph.Value, set func(int, Shape), in func(int) Shape) {
	s := in(0)
	axis, sizes, ok := w.SplitSizes(n)
	if p, okp := w.Partial(n.Input(0)); okp && ok && len(s.Dims) == 1 {
		at := 0
		for i, o := range outs {
			if i < len(sizes) && at+int(sizes[i]) <= len(p) && o.Name != "" {
				w.pv[o] = append([]Dim(nil), p[at:at+int(sizes[i])]...)
			}
			if i < len(sizes) {
				at += int(sizes[i])
			}
		}
	}
	for i := range outs {
		if !ok || !s.Ranked || i >= len(sizes) {
			if s.Ranked {
				d := append([]Dim{}, s.Dims...)
				d[axis] = w.Syms.fresh()
				set(i, ranked(d...))
			} else {
				set(i, Shape{})
			}
			continue
		}
		d := append([]Dim{}, s.Dims...)
		d[axis] = Dim(sizes[i])
		set(i, ranked(d...))
	}
}

// inferExpand infers the shapes of Expand.
func (w *Work) inferExpand(n *graph.Node, outs []*graph.Value, set func(int, Shape), in func(int) Shape) {
	s := in(0)
	p, ok := w.Partial(n.Input(1))
	if !ok {
		if t := w.Shape(n.Input(1)); t.AllKnown() && len(t.Dims) == 1 && s.Ranked {
			r := max(int(t.Dims[0]), len(s.Dims))
			d := make([]Dim, r)
			for i := range d {
				d[i] = w.Syms.fresh()
			}
			set(0, ranked(d...))
		} else {
			set(0, Shape{})
		}
		return
	}
	set(0, w.broadcast(s, ranked(p...)))
}

// inferTile infers the shapes of Tile.
func (w *Work) inferTile(n *graph.Node, outs []*graph.Value, set func(int, Shape), in func(int) Shape) {
	s := in(0)
	reps, ok := w.Partial(n.Input(1))
	if !s.Ranked || !ok || len(reps) != len(s.Dims) {
		set(0, Shape{})
		return
	}
	out := make([]Dim, len(s.Dims))
	for i, d := range s.Dims {
		switch {
		case reps[i] == 1:
			out[i] = d
		case d.Known() && reps[i].Known():
			out[i] = d * reps[i]
		case d == 1:
			out[i] = reps[i]
		default:
			out[i] = w.Syms.fresh()
		}
	}
	set(0, ranked(out...))
}

// inferConstantOfShape infers the shapes of ConstantOfShape.
func (w *Work) inferConstantOfShape(n *graph.Node, outs []*graph.Value, set func(int, Shape), in func(int) Shape) {
	p, ok := w.Partial(n.Input(0))
	if ok {
		set(0, ranked(p...))
	} else if t := w.Shape(n.Input(0)); t.AllKnown() && len(t.Dims) == 1 {
		d := make([]Dim, t.Dims[0])
		for i := range d {
			d[i] = w.Syms.fresh()
		}
		set(0, ranked(d...))
	} else {
		set(0, Shape{})
	}
}

// inferReduce infers the shapes of ReduceMean.
func (w *Work) inferReduce(n *graph.Node, outs []*graph.Value, set func(int, Shape), in func(int) Shape) {
	s := in(0)
	if !s.Ranked {
		set(0, Shape{})
		return
	}
	keep := n.AttrInt("keepdims", 1) != 0
	var axes []int64
	var ok bool
	if n.OpType == "ArgMax" || n.OpType == "ArgMin" {
		axes, ok = []int64{n.AttrInt("axis", 0)}, true
	} else {
		axes, ok = w.Axes(n, 1)
	}
	if !ok {
		set(0, Shape{})
		return
	}
	red := map[int]bool{}
	for _, a := range axes {
		red[NormAxis(a, len(s.Dims))] = true
	}
	if len(axes) == 0 && n.AttrInt("noop_with_empty_axes", 0) == 0 {
		for i := range s.Dims {
			red[i] = true
		}
	}
	var out []Dim
	for i, d := range s.Dims {
		switch {
		case !red[i]:
			out = append(out, d)
		case keep:
			out = append(out, 1)
		}
	}
	set(0, ranked(out...))
}

// inferConv infers the shapes of Conv.
func (w *Work) inferConv(n *graph.Node, outs []*graph.Value, set func(int, Shape), in func(int) Shape) {
	s := in(0)
	if !s.Ranked {
		return
	}
	d := make([]Dim, len(s.Dims))
	d[0] = s.Dims[0]
	if w1 := w.Shape(n.Input(1)); n.OpType == "Conv" && w1.Ranked && len(w1.Dims) > 0 {
		d[1] = w1.Dims[0]
	} else {
		d[1] = s.Dims[1]
	}
	for j := 2; j < len(d); j++ {
		d[j] = w.Syms.fresh()
	}
	if n.OpType == "Conv" && len(s.Dims) > 2 {
		w.convSpatial(n, s.Dims[2:], d[2:])
	}
	set(0, ranked(d...))
}

// convSpatial sets the spatial output sizes out of a convolution n over
// the spatial input sizes in, by its kernel_shape, strides, pads and
// dilations (out keeps what it holds where they do not fix a size).
func (w *Work) convSpatial(n *graph.Node, in, out []Dim) {
	k := n.AttrInts("kernel_shape")
	if len(k) != len(in) || n.AttrString("auto_pad", "NOTSET") != "NOTSET" {
		return
	}
	st, pads, dil := n.AttrInts("strides"), n.AttrInts("pads"), n.AttrInts("dilations")
	for j, x := range in {
		stride, dl := int64(1), int64(1)
		if len(st) > j {
			stride = st[j]
		}
		if len(dil) > j {
			dl = dil[j]
		}
		p := int64(0)
		if len(pads) == 2*len(in) {
			p = pads[j] + pads[j+len(in)]
		}
		if stride <= 0 {
			continue
		}
		// floor((x + p - dl·(k-1) - 1) / stride) + 1: a known size, or of
		// an open image the derived symbol a probe computes from the
		// image's (the patch grid).
		c := p - dl*(k[j]-1) - 1
		switch {
		case x.Known():
			out[j] = Dim((int64(x)+c)/stride + 1)
		case x.IsSym():
			out[j] = w.exprDiv(x, c+stride, stride)
		}
	}
}

// inferNchwc infers the shapes of ONNX Runtime's NCHWc ops (what its
// optimiser makes of a Conv at level all): the Conv's output is blocked,
// [N, channel blocks, H', W', block] (the block depends on the machine),
// and ReorderOutput turns it back into [N, channels, H', W'] (channels
// last: [N, H', W', channels]).
func (w *Work) inferNchwc(n *graph.Node, set func(int, Shape), in func(int) Shape) bool {
	s := in(0)
	switch n.OpType {
	case "Conv":
		if s.Rank() < 4 {
			return false
		}
		d := []Dim{s.Dims[0], w.Syms.fresh(), w.Syms.fresh(), w.Syms.fresh(), w.Syms.fresh()}
		w.convSpatial(n, s.Dims[2:4], d[2:4])
		set(0, ranked(d...))
	case "ReorderOutput":
		c := Dim(n.AttrInt("channels", 0))
		if s.Rank() != 5 || c <= 0 {
			return false
		}
		if n.AttrInt("channels_last", 0) != 0 {
			set(0, ranked(s.Dims[0], s.Dims[2], s.Dims[3], c))
		} else {
			set(0, ranked(s.Dims[0], c, s.Dims[2], s.Dims[3]))
		}
	default:
		return false
	}
	return true
}

// inferContrib covers the com.microsoft ops ONNX Runtime's optimiser
// leaves in models, as far as detection needs their shapes.
func (w *Work) inferContrib(n *graph.Node, set func(int, Shape), in func(int) Shape) {
	if w.inferFused(n, set, in) || n.Domain == "com.microsoft.nchwc" && w.inferNchwc(n, set, in) {
		return
	}
	switch n.OpType {
	case "FusedMatMul":
		a, b := in(0), in(1)
		if a.Rank() >= 2 && b.Rank() >= 2 {
			ad, bd := a.Dims, b.Dims
			m, k := ad[len(ad)-2], bd[len(bd)-1]
			if n.AttrInt("transA", 0) != 0 {
				m = ad[len(ad)-1]
			}
			if n.AttrInt("transB", 0) != 0 {
				k = bd[len(bd)-2]
			}
			batch := w.broadcast(ranked(ad[:len(ad)-2]...), ranked(bd[:len(bd)-2]...))
			set(0, ranked(append(append([]Dim{}, batch.Dims...), m, k)...))
		}
	case "Conv", "MaxPool", "AveragePool", "ReorderInput", "ReorderOutput":
		if n.Domain == "com.microsoft.nchwc" {
			w.inferNCHWc(n, set, in)
			return
		}
		for i, o := range n.Outputs() {
			set(i, w.declaredShape(o.Type))
		}
	case "Gelu", "FastGelu", "BiasGelu", "QuickGelu", "SkipLayerNormalization", "SimplifiedLayerNormalization",
		"SkipSimplifiedLayerNormalization", "LayerNormalization", "RotaryEmbedding", "BiasAdd":
		set(0, in(0))
		if strings.HasPrefix(n.OpType, "Skip") {
			set(3, in(0))
		}
	default:
		for i, o := range n.Outputs() {
			set(i, w.declaredShape(o.Type))
		}
	}
}

// inferNCHWc infers the shapes of the ops of ONNX Runtime's blocked
// channel layout (optimization level all): its convolutions and pools as
// ONNX's (the channels of a blocked tensor counted as the weights give
// them), ReorderInput keeping the shape, ReorderOutput giving back
// [N, channels, H, W] (or [N, H, W, channels] with channels_last).
func (w *Work) inferNCHWc(n *graph.Node, set func(int, Shape), in func(int) Shape) {
	s := in(0)
	switch n.OpType {
	case "ReorderInput":
		set(0, s)
	case "ReorderOutput":
		c := Dim(n.AttrInt("channels", 0))
		switch {
		case s.Rank() != 4 || c <= 0:
			set(0, w.declaredShape(n.Output(0).Type))
		case n.AttrInt("channels_last", 0) != 0:
			set(0, ranked(s.Dims[0], s.Dims[2], s.Dims[3], c))
		default:
			set(0, ranked(s.Dims[0], c, s.Dims[2], s.Dims[3]))
		}
	default:
		w.inferConv(n, n.Outputs(), set, in)
	}
}

func (w *Work) rangeLen(n *graph.Node) Dim {
	s, ok1 := w.Partial(n.Input(0))
	l, ok2 := w.Partial(n.Input(1))
	d, ok3 := w.Partial(n.Input(2))
	if ok1 && ok2 && ok3 && len(s) == 1 && len(l) == 1 && len(d) == 1 {
		if s[0].Known() && l[0].Known() && d[0].Known() && d[0] != 0 {
			return Dim(max(0, int64(math.Ceil(float64(l[0]-s[0])/float64(d[0])))))
		}
		if s[0] == 0 && d[0] == 1 && l[0].IsSym() {
			return l[0]
		}
	}
	// Floating-point ranges: read constants as floats.
	return w.Syms.fresh()
}

func (w *Work) inferReshape(n *graph.Node, set func(int, Shape)) {
	s := w.Shape(n.Input(0))
	p, ok := w.Partial(n.Input(1))
	allowZero := n.AttrInt("allowzero", 0) != 0
	if !ok {
		if t := w.Shape(n.Input(1)); t.AllKnown() && len(t.Dims) == 1 {
			d := make([]Dim, t.Dims[0])
			for i := range d {
				d[i] = w.Syms.fresh()
			}
			set(0, ranked(d...))
		} else {
			set(0, Shape{})
		}
		return
	}
	out := make([]Dim, len(p))
	neg := -1
	for i, d := range p {
		switch {
		case d == 0 && !allowZero && s.Ranked && i < len(s.Dims):
			out[i] = s.Dims[i]
		case d == 0 && !allowZero:
			out[i] = w.Syms.fresh() // copied from an input of unknown shape
		case d == -1:
			neg = i
		case d < 0 && !d.IsSym():
			out[i] = w.Syms.fresh()
		default:
			out[i] = d
		}
	}
	if neg >= 0 {
		out[neg] = w.Syms.fresh()
		if s.Ranked {
			c, syms := product(s.Dims)
			var rest []Dim
			for i, d := range out {
				if i != neg {
					rest = append(rest, d)
				}
			}
			rc, rsyms := product(rest)
			// Cancel symbols present on both sides.
			left := append([]Dim{}, syms...)
			var extra []Dim
			for _, r := range rsyms {
				found := false
				for j, l := range left {
					if l == r {
						left = append(left[:j], left[j+1:]...)
						found = true
						break
					}
				}
				if !found {
					extra = append(extra, r)
				}
			}
			if len(extra) == 0 && rc != 0 && c%rc == 0 {
				q := c / rc
				switch {
				case len(left) == 0:
					out[neg] = Dim(q)
				case len(left) == 1 && q == 1:
					out[neg] = left[0]
				default:
					out[neg] = w.exprSym('*', left, q)
				}
			}
		}
	}
	set(0, ranked(out...))
	// A reshaped shape vector keeps its partial value.
	if pv, ok := w.Partial(n.Input(0)); ok {
		w.pv[n.Output(0)] = pv
	}
}

func (w *Work) inferGather(n *graph.Node, set func(int, Shape)) {
	s, idx := w.Shape(n.Input(0)), w.Shape(n.Input(1))
	if !s.Ranked || !idx.Ranked {
		set(0, Shape{})
		return
	}
	ax := NormAxis(n.AttrInt("axis", 0), len(s.Dims))
	if ax < 0 || ax >= len(s.Dims) {
		set(0, Shape{})
		return
	}
	out := append(append(append([]Dim{}, s.Dims[:ax]...), idx.Dims...), s.Dims[ax+1:]...)
	set(0, ranked(out...))
	if p, ok := w.Partial(n.Input(0)); ok && ax == 0 && len(s.Dims) <= 1 {
		if ix, ok := w.IntsOf(n.Input(1)); ok {
			var r []Dim
			for _, i := range ix {
				if i < 0 {
					i += int64(len(p))
				}
				if i < 0 || int(i) >= len(p) {
					return
				}
				r = append(r, p[i])
			}
			w.pv[n.Output(0)] = r
		}
	}
}

func (w *Work) inferSlice(n *graph.Node, set func(int, Shape)) {
	s := w.Shape(n.Input(0))
	starts, ends, axes, steps, ok := w.SliceParams(n)
	if !s.Ranked {
		set(0, Shape{})
		return
	}
	out := append([]Dim{}, s.Dims...)
	if !ok {
		// Axes may still be constant: only those dimensions change.
		var ax []int64
		if a := n.Input(3); a != nil {
			ax, ok = w.IntsOf(a)
		}
		if ok {
			for _, a := range ax {
				out[NormAxis(a, len(out))] = w.Syms.fresh()
			}
		} else {
			for i := range out {
				out[i] = w.Syms.fresh()
			}
		}
		set(0, ranked(out...))
		return
	}
	for i, a := range axes {
		ax := NormAxis(a, len(out))
		if ax < 0 || ax >= len(out) {
			continue
		}
		d := s.Dims[ax]
		st, en, sp := starts[i], ends[i], steps[i]
		if !d.Known() {
			switch {
			case st == 0 && sp == 1 && en >= math.MaxInt32:
				continue // the whole axis
			case d.IsSym() && st == 0 && en == 1 && sp == 1:
				out[ax] = 1 // the first (a class token)
			case d.IsSym() && st > 0 && st < math.MaxInt32 && en >= math.MaxInt32 && sp == 1:
				out[ax] = w.exprSym('+', []Dim{d}, -st) // all after the first st
			default:
				out[ax] = w.Syms.fresh()
			}
			continue
		}
		dim := int64(d)
		clampI := func(x, lo, hi int64) int64 { return max(lo, min(x, hi)) }
		if st < 0 {
			st += dim
		}
		if en < 0 {
			en += dim
		}
		var cnt int64
		if sp > 0 {
			st, en = clampI(st, 0, dim), clampI(en, 0, dim)
			if en > st {
				cnt = (en - st + sp - 1) / sp
			}
		} else if sp < 0 {
			st, en = clampI(st, -1, dim-1), clampI(en, -1, dim-1)
			if st > en {
				cnt = (st - en + (-sp) - 1) / (-sp)
			}
		}
		out[ax] = Dim(cnt)
	}
	set(0, ranked(out...))
	if p, ok := w.Partial(n.Input(0)); ok && len(s.Dims) == 1 && len(axes) == 1 && steps[0] == 1 {
		l := int64(len(p))
		st, en := starts[0], ends[0]
		if st < 0 {
			st += l
		}
		if en < 0 {
			en += l
		}
		st, en = max(0, min(st, l)), max(0, min(en, l))
		if en >= st {
			w.pv[n.Output(0)] = append([]Dim(nil), p[st:en]...)
		}
	}
}

func (w *Work) inferConcat(n *graph.Node, set func(int, Shape)) {
	var first Shape
	var total []Dim
	for i, v := range n.Inputs() {
		s := w.Shape(v)
		if !s.Ranked {
			set(0, Shape{})
			return
		}
		if i == 0 {
			first = s
		}
		ax := NormAxis(n.AttrInt("axis", 0), len(s.Dims))
		if ax < 0 || ax >= len(s.Dims) {
			set(0, Shape{})
			return
		}
		total = append(total, s.Dims[ax])
	}
	if !first.Ranked {
		set(0, Shape{})
		return
	}
	ax := NormAxis(n.AttrInt("axis", 0), len(first.Dims))
	out := append([]Dim{}, first.Dims...)
	// Other dimensions: prefer known ones.
	for _, v := range n.Inputs()[1:] {
		s := w.Shape(v)
		for j := range out {
			if j != ax && !out[j].Known() && j < len(s.Dims) && s.Dims[j].Known() {
				out[j] = s.Dims[j]
			}
		}
	}
	sum := int64(0)
	var syms []Dim
	for _, d := range total {
		if d.Known() {
			sum += int64(d)
		} else {
			syms = append(syms, d)
		}
	}
	switch {
	case len(syms) == 0:
		out[ax] = Dim(sum)
	case len(syms) == 1 && sum == 0:
		out[ax] = syms[0]
	default:
		out[ax] = w.exprSym('+', syms, sum)
	}
	set(0, ranked(out...))
	// Concatenated shape vectors.
	if len(first.Dims) == 1 {
		var pv []Dim
		for _, v := range n.Inputs() {
			p, ok := w.Partial(v)
			if !ok {
				return
			}
			pv = append(pv, p...)
		}
		if len(pv) <= maxPartial {
			w.pv[n.Output(0)] = pv
		}
	}
}

// exprSym names the sum (op '+') or product (op '*') of symbols and a
// constant, so that two concatenations of the same parts (the KV cache of
// every layer) agree, and a probe can compute its size from the symbols'.
func (w *Work) exprSym(op byte, syms []Dim, c int64) Dim {
	if op == '+' {
		// Sums of sums are one sum: the tokens after a leading one,
		// (1 + n) - 1, are n again, and 1 + n is the same symbol however
		// it was reached.
		var flat []Dim
		for _, d := range syms {
			d = w.Syms.Canon(d)
			if e, ok := w.Exprs[d]; ok && e.Op == '+' {
				flat = append(flat, e.Args...)
				c += e.C
			} else if d.Known() {
				c += int64(d)
			} else {
				flat = append(flat, d)
			}
		}
		switch {
		case len(flat) == 0:
			return Dim(c)
		case len(flat) == 1 && c == 0:
			return flat[0]
		}
		syms = flat
	}
	key := fmt.Sprint(string(op), syms, c)
	if d, ok := w.sums[key]; ok {
		return d
	}
	d := w.Syms.derived()
	w.sums[key] = d
	w.Exprs[d] = symExpr{Op: op, Args: append([]Dim(nil), syms...), C: c}
	return d
}

// exprDiv names floor((x + c) / div) for symbol x and div > 0 (the
// output size of a convolution over an open image).
func (w *Work) exprDiv(x Dim, c, div int64) Dim {
	key := fmt.Sprint("/", x, c, div)
	if d, ok := w.sums[key]; ok {
		return d
	}
	d := w.Syms.derived()
	w.sums[key] = d
	w.Exprs[d] = symExpr{Op: '/', Args: []Dim{x}, C: c, Div: div}
	return d
}

// symExpr is how a derived symbol is computed from others: the sum (op
// '+') or product ('*') of args and c, or floor((args[0] + c) / div)
// (op '/').
type symExpr struct {
	Op   byte
	Args []Dim
	C    int64
	Div  int64
}

func (w *Work) inferEinsum(n *graph.Node, set func(int, Shape)) {
	eq := strings.ReplaceAll(n.AttrString("equation", ""), " ", "")
	parts := strings.Split(eq, "->")
	if len(parts) != 2 {
		set(0, Shape{})
		return
	}
	letters := map[byte]Dim{}
	var ells []Shape // the dims each operand's "..." stands for
	for i, term := range strings.Split(parts[0], ",") {
		s := w.Shape(n.Input(i))
		pre, post, ell := strings.Cut(term, "...")
		if !ell {
			pre = term
		}
		if !s.Ranked || len(s.Dims) < len(pre)+len(post) || !ell && len(s.Dims) != len(term) {
			set(0, Shape{})
			return
		}
		named := append(slices.Clone(s.Dims[:len(pre)]), s.Dims[len(s.Dims)-len(post):]...)
		if ell {
			ells = append(ells, ranked(s.Dims[len(pre):len(s.Dims)-len(post)]...))
		}
		for j, l := range []byte(pre + post) {
			d := named[j]
			if old, ok := letters[l]; !ok || (!old.Known() && d.Known()) || old == 1 {
				letters[l] = d
			}
		}
	}
	pre, post, ell := strings.Cut(parts[1], "...")
	if !ell {
		pre = parts[1]
	} else if len(ells) == 0 {
		set(0, Shape{})
		return
	}
	var out []Dim
	for j, l := range []byte(pre + post) {
		if j == len(pre) && ell {
			out = append(out, w.broadcast(ells...).Dims...)
		}
		d, ok := letters[l]
		if !ok {
			set(0, Shape{})
			return
		}
		out = append(out, d)
	}
	if ell && len(post) == 0 {
		out = append(out, w.broadcast(ells...).Dims...)
	}
	set(0, ranked(out...))
}

// vectorsAgainstUnknown reports whether an elementwise node has an input
// of unknown rank and only vectors and scalars among its ranked inputs: a
// bias or a scale applied to a value of unknown shape (the output of an op
// nothing infers) gives the result no shape. broadcast leaves out operands
// of unknown rank (a mask or a table broadcast against the activations);
// for q_proj(x) + b it would give the sum the shape [3072] of the bias.
func vectorsAgainstUnknown(n *graph.Node, ss []Shape) bool {
	unknown, ranked := false, false
	for i, s := range ss {
		switch {
		case n.Input(i) == nil:
		case !s.Ranked:
			unknown = true
		case len(s.Dims) > 1:
			return false
		default:
			ranked = true
		}
	}
	return unknown && ranked
}

// partialElementwise computes partial values of small integer arithmetic
// (shape arithmetic: Shape(q)[3] / 2, comparisons with -1 in a Where).
func (w *Work) partialElementwise(n *graph.Node) {
	var ins [][]Dim
	for _, v := range n.Inputs() {
		p, ok := w.Partial(v)
		if !ok {
			return
		}
		ins = append(ins, p)
	}
	if len(ins) == 0 {
		return
	}
	l := 1
	for _, p := range ins {
		if len(p) != 1 {
			if l != 1 && len(p) != l {
				return
			}
			l = len(p)
		}
	}
	at := func(p []Dim, i int) Dim {
		if len(p) == 1 {
			return p[0]
		}
		return p[i]
	}
	out := make([]Dim, l)
	for i := range out {
		a := at(ins[0], i)
		var b Dim
		if len(ins) > 1 {
			b = at(ins[1], i)
		}
		aSym, bSym := a.IsSym(), len(ins) > 1 && b.IsSym()
		known := !aSym && !bSym
		r := w.Syms.fresh()
		switch n.OpType {
		case "Add":
			switch {
			case known:
				r = a + b
			case b == 0 && !bSym:
				r = a
			case a == 0 && !aSym:
				r = b
			}
		case "Sub":
			switch {
			case known:
				r = a - b
			case b == 0 && !bSym:
				r = a
			case a == b:
				r = 0
			}
		case "Mul":
			switch {
			case known:
				r = a * b
			case b == 1 && !bSym:
				r = a
			case a == 1 && !aSym:
				r = b
			}
		case "Div":
			switch {
			case known && b != 0:
				r = Dim(floorDiv(int64(a), int64(b)))
			case b == 1 && !bSym:
				r = a
			}
		case "Mod":
			if known && b != 0 {
				r = a % b
			}
		case "Max":
			if known {
				r = max(a, b)
			}
		case "Min":
			if known {
				r = min(a, b)
			}
		case "Equal":
			switch {
			case known:
				r = boolDim(a == b)
			case a == b:
				r = 1
			case aSym && !bSym && b < 0, bSym && !aSym && a < 0:
				r = 0 // a size never equals a negative number
			}
		case "Where":
			c := a
			if len(ins) < 3 || aSym {
				return
			}
			if c != 0 {
				r = b
			} else {
				r = at(ins[2], i)
			}
		case "Less", "Greater", "LessOrEqual", "GreaterOrEqual":
			if known {
				switch n.OpType {
				case "Less":
					r = boolDim(a < b)
				case "Greater":
					r = boolDim(a > b)
				case "LessOrEqual":
					r = boolDim(a <= b)
				default:
					r = boolDim(a >= b)
				}
			}
		default:
			return
		}
		out[i] = r
	}
	w.pv[n.Output(0)] = out
}

// partialLogic computes the partial values of Not and of a Cast to bool
// of known elements (a guard q_len != k_len on two sizes that are one
// symbol: Not(Equal) is false, and an If on it takes its else branch).
func (w *Work) partialLogic(n *graph.Node) {
	toBool := n.OpType == "Cast" && graph.DataType(n.AttrInt("to", 0)) == graph.Bool
	if n.OpType != "Not" && !toBool {
		return
	}
	p, ok := w.PartialInts(n.Input(0))
	if !ok {
		return
	}
	out := make([]Dim, len(p))
	for i, x := range p {
		out[i] = boolDim(x != 0)
		if n.OpType == "Not" {
			out[i] = boolDim(x == 0)
		}
	}
	w.pv[n.Output(0)] = out
}

func boolDim(b bool) Dim {
	if b {
		return 1
	}
	return 0
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// Const is the value of v when it is a constant (an initializer, also one
// that old IR versions list among the inputs as a default), decoded once. Tensors stored outside the model file and
// large tensors are decoded too when asked: callers ask only for the
// tensors they need.
func (w *Work) Const(v *graph.Value) *kernels.Tensor {
	if v == nil {
		return nil
	}
	if t, ok := w.consts[v]; ok {
		return t
	}
	if v.Const == nil {
		return nil
	}
	t, err := kernels.FromGraph(v.Const)
	if err != nil {
		w.ConstErr[v] = err
		w.consts[v] = nil
		return nil
	}
	w.consts[v] = t
	return t
}

// IsConst reports whether v holds a constant (without decoding it).
func (w *Work) IsConst(v *graph.Value) bool {
	if v == nil {
		return false
	}
	if t, ok := w.consts[v]; ok && t != nil {
		return true
	}
	return v.Const != nil // also when its data cannot be read (absent side file)
}
