package kernels

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
)

// Ops of the default domain outside the transformer core: the bitwise
// ops, BitCast, CumProd, the remaining activations (PRelu, Celu, Mish,
// Swish, Shrink), Hardmax, NonZero, OneHot, Compress, Unique, EyeLike,
// Det, ReverseSequence, NonMaxSuppression and the old Scatter.

// intBinary applies f to the int64 bit patterns of two integer tensors
// with broadcasting (the result wraps to the type).
func intBinary(c *Call, a, b *Tensor, f func(x, y int64) int64) (*Tensor, error) {
	if a.DType != b.DType {
		return nil, fmt.Errorf("element types differ: %v and %v", a.DType, b.DType)
	}
	if !a.DType.IsInt() && a.DType != graph.Bool {
		return nil, fmt.Errorf("%v: %w", a.DType, ErrUnsupportedType)
	}
	shape, err := broadcastShape(a.Shape, b.Shape)
	if err != nil {
		return nil, err
	}
	out := c.alloc(a.DType, shape...)
	x, y := a.Int64s(), b.Int64s()
	r := make([]int64, out.Len())
	newBcast(shape, a.Shape, b.Shape).each(func(o int, offs, inc []int, n int) {
		for i := range n {
			r[o+i] = f(x[offs[0]+inc[0]*i], y[offs[1]+inc[1]*i])
		}
	})
	fromInt64Small(out, r)
	return out, nil
}

func bitwiseKernel(f func(x, y int64) int64) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		o, err := intBinary(c, in[0], in[1], f)
		return []*Tensor{o}, err
	}
}

func bitwiseNot(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	if !x.DType.IsInt() {
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
	v := slices.Clone(x.Int64s())
	for i := range v {
		v[i] = ^v[i]
	}
	out := c.alloc(x.DType, x.Shape...)
	fromInt64Small(out, v)
	return []*Tensor{out}, nil
}

// bitShift shifts unsigned integers left or right (logically) by the
// second input's amounts.
func bitShift(c *Call, in []*Tensor) ([]*Tensor, error) {
	switch in[0].DType {
	case graph.Uint8, graph.Uint16, graph.Uint32, graph.Uint64:
	default:
		return nil, fmt.Errorf("%v: %w (BitShift takes unsigned integers)", in[0].DType, ErrUnsupportedType)
	}
	var f func(x, y int64) int64
	switch d := c.String("direction", ""); d {
	case "LEFT":
		f = func(x, y int64) int64 { return int64(uint64(x) << uint64(y)) }
	case "RIGHT":
		f = func(x, y int64) int64 { return int64(uint64(x) >> uint64(y)) }
	default:
		return nil, fmt.Errorf("direction %q: want LEFT or RIGHT", d)
	}
	o, err := intBinary(c, in[0], in[1], f)
	return []*Tensor{o}, err
}

// bitsOf returns the bit pattern of each element of t (of width bits).
func bitsOf(t *Tensor) []uint64 {
	out := make([]uint64, t.Len())
	switch d := t.data.(type) {
	case []float32:
		for i, v := range d {
			out[i] = uint64(math.Float32bits(v))
		}
	case []float64:
		for i, v := range d {
			out[i] = math.Float64bits(v)
		}
	case []float16.Float16:
		for i, v := range d {
			out[i] = uint64(v.Bits())
		}
	case []graph.BF16:
		for i, v := range d {
			out[i] = uint64(v)
		}
	case []bool:
		for i, v := range d {
			if v {
				out[i] = 1
			}
		}
	default:
		mask := uint64(1)<<t.DType.Bits() - 1
		if t.DType.Bits() == 64 {
			mask = math.MaxUint64
		}
		for i, v := range t.Int64s() {
			out[i] = uint64(v) & mask
		}
	}
	return out
}

// fromBits stores bit patterns into t.
func fromBits(t *Tensor, b []uint64) {
	switch d := t.data.(type) {
	case []float32:
		for i, v := range b {
			d[i] = math.Float32frombits(uint32(v))
		}
	case []float64:
		for i, v := range b {
			d[i] = math.Float64frombits(v)
		}
	case []float16.Float16:
		for i, v := range b {
			d[i] = float16.Frombits(uint16(v))
		}
	case []graph.BF16:
		for i, v := range b {
			d[i] = graph.BF16(v)
		}
	case []bool:
		for i, v := range b {
			d[i] = v != 0
		}
	default:
		if smallFloat(t.DType) {
			u := d.([]uint8)
			for i, v := range b {
				u[i] = uint8(v)
			}
			return
		}
		n := make([]int64, len(b))
		for i, v := range b {
			n[i] = int64(v)
		}
		fromInt64Small(t, n) // wraps and sign-extends as the type does
	}
}

// bitCast reinterprets the bits of each element as another type of the
// same width.
func bitCast(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	dt, err := dtypeAttr(c, "to")
	if err != nil {
		return nil, err
	}
	if dt.Bits() != x.DType.Bits() || dt.Bits() == 0 {
		return nil, fmt.Errorf("%v (%d bits) and %v (%d bits) differ in width", x.DType, x.DType.Bits(), dt, dt.Bits())
	}
	out := c.alloc(dt, x.Shape...)
	fromBits(out, bitsOf(x))
	return []*Tensor{out}, nil
}

// cumProd is CumSum's product: the running product along axis
// (exclusive: of the elements before; reverse: from the end).
func cumProd(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	a, err := scalarInt(in[1], "axis")
	if err != nil {
		return nil, err
	}
	axis, err := normAxis(a, len(x.Shape))
	if err != nil {
		return nil, err
	}
	ex, rev := c.Int("exclusive", 0) == 1, c.Int("reverse", 0) == 1
	if !x.DType.IsInt() && !isFloatType(x.DType) || smallType(x.DType) {
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
	dim, inner, outer := x.Shape[axis], shapeSize(x.Shape[axis+1:]), shapeSize(x.Shape[:axis])
	if isFloatType(x.DType) {
		s := x.Float64s()
		d := make([]float64, len(s))
		cumOver(outer, dim, inner, rev, func(p int, first bool, prev int) {
			switch {
			case ex && first:
				d[p] = 1
			case ex:
				d[p] = d[prev] * s[prev]
			case first:
				d[p] = s[p]
			default:
				d[p] = d[prev] * s[p]
			}
		})
		out := c.alloc(x.DType, x.Shape...)
		storeRounded(c, out, d)
		return []*Tensor{out}, nil
	}
	s := x.Int64s()
	d := make([]int64, len(s))
	cumOver(outer, dim, inner, rev, func(p int, first bool, prev int) {
		switch {
		case ex && first:
			d[p] = 1
		case ex:
			d[p] = d[prev] * s[prev]
		case first:
			d[p] = s[p]
		default:
			d[p] = d[prev] * s[p]
		}
	})
	out := c.alloc(x.DType, x.Shape...)
	fromInt64(out, d)
	return []*Tensor{out}, nil
}

// cumOver visits the elements along axis in scan order, giving each
// position, whether it is the first, and the previous position.
func cumOver(outer, dim, inner int, rev bool, f func(p int, first bool, prev int)) {
	for o := range outer {
		for in := range inner {
			prev := -1
			for k := range dim {
				j := k
				if rev {
					j = dim - 1 - k
				}
				p := (o*dim+j)*inner + in
				f(p, k == 0, prev)
				prev = p
			}
		}
	}
}

// floatElementwise applies f(x) (float64) to a float tensor.
func floatElementwise(c *Call, x *Tensor, f func(float64) float64) (*Tensor, error) {
	if !isFloatType(x.DType) || smallFloat(x.DType) {
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
	v := x.Float64s()
	for i, e := range v {
		v[i] = f(e)
	}
	out := c.alloc(x.DType, x.Shape...)
	storeRounded(c, out, v)
	return out, nil
}

func prelu(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, slope := in[0], in[1]
	if slope.DType != x.DType {
		return nil, fmt.Errorf("slope of %v for x of %v", slope.DType, x.DType)
	}
	if c.Opset < 7 && slope.Len() != 1 && !equalShape(slope.Shape, x.Shape) {
		// Before opset 7, a 1-D slope of C values is per channel (axis 1).
		if len(slope.Shape) != 1 || len(x.Shape) < 2 || slope.Shape[0] != x.Shape[1] {
			return nil, fmt.Errorf("slope %v: one value, one per channel or x's shape %v (opset %d)", slope.Shape, x.Shape, c.Opset)
		}
		shape := make([]int, len(x.Shape)-1)
		for i := range shape {
			shape[i] = 1
		}
		shape[0] = slope.Shape[0]
		slope = slope.Reshaped(shape...)
	}
	shape, err := broadcastShape(x.Shape, slope.Shape)
	if err != nil || !equalShape(shape, x.Shape) {
		return nil, fmt.Errorf("slope %v does not broadcast to x %v", slope.Shape, x.Shape)
	}
	xs, ss := x.Float64s(), slope.Float64s()
	v := make([]float64, len(xs))
	newBcast(shape, x.Shape, slope.Shape).each(func(o int, offs, inc []int, n int) {
		for i := range n {
			e := xs[offs[0]+inc[0]*i]
			if e < 0 {
				e *= ss[offs[1]+inc[1]*i]
			}
			v[o+i] = e
		}
	})
	out := c.alloc(x.DType, x.Shape...)
	if isFloatType(x.DType) {
		storeRounded(c, out, v)
	} else {
		fromFloat64(out, v)
	}
	return []*Tensor{out}, nil
}

func shrink(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	bias, lambd := float64(c.Float("bias", 0)), float64(c.Float("lambd", 0.5))
	v := x.Float64s()
	for i, e := range v {
		switch {
		case e < -lambd:
			v[i] = e + bias
		case e > lambd:
			v[i] = e - bias
		default:
			v[i] = 0
		}
	}
	out := c.alloc(x.DType, x.Shape...)
	if isFloatType(x.DType) {
		storeRounded(c, out, v)
	} else {
		fromFloat64(out, v)
	}
	return []*Tensor{out}, nil
}

// hardmax sets the first maximum of each row along axis to 1 and the rest
// to 0 (before opset 13: rows of x flattened to 2-D at axis).
func hardmax(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	r := len(x.Shape)
	var outer, dim, inner int
	if c.Opset < 13 {
		a, err := normAxis(c.Int("axis", 1), r+1)
		if err != nil || a > r {
			return nil, fmt.Errorf("axis %d for rank %d", c.Int("axis", 1), r)
		}
		outer, dim, inner = shapeSize(x.Shape[:a]), shapeSize(x.Shape[a:]), 1
	} else {
		a, err := normAxis(c.Int("axis", -1), r)
		if err != nil {
			return nil, err
		}
		outer, dim, inner = shapeSize(x.Shape[:a]), x.Shape[a], shapeSize(x.Shape[a+1:])
	}
	xs := x.Float64s()
	v := make([]float64, len(xs))
	for o := range outer {
		for i := range inner {
			best := -1
			for k := range dim {
				p := (o*dim+k)*inner + i
				if best < 0 || xs[p] > xs[best] {
					best = p
				}
			}
			if best >= 0 {
				v[best] = 1
			}
		}
	}
	out := c.alloc(x.DType, x.Shape...)
	fromFloat64(out, v)
	return []*Tensor{out}, nil
}

// isNonZero reports whether each element of t is nonzero (NaN is).
func isNonZero(t *Tensor) []bool {
	nz := make([]bool, t.Len())
	if b, ok := t.data.([]bool); ok {
		copy(nz, b)
		return nz
	}
	for i, v := range t.Float64s() {
		nz[i] = v != 0
	}
	return nz
}

func nonZero(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	nz := isNonZero(x)
	count := 0
	for _, b := range nz {
		if b {
			count++
		}
	}
	r := len(x.Shape)
	if r == 0 {
		// A scalar: one coordinate row holding 0 per nonzero element,
		// [1, 0] or [1, 1], as ONNX Runtime (nonzero_op.cc; the spec is
		// ambiguous, onnx/onnx#2428).
		return []*Tensor{c.zeros(graph.Int64, 1, count)}, nil
	}
	out := c.alloc(graph.Int64, r, count)
	d := Data[int64](out)
	idx := make([]int, r)
	k := 0
	for _, b := range nz {
		if b {
			for a := range r {
				d[a*count+k] = int64(idx[a])
			}
			k++
		}
		for a := r - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < x.Shape[a] {
				break
			}
			idx[a] = 0
		}
	}
	return []*Tensor{out}, nil
}

func oneHot(c *Call, in []*Tensor) ([]*Tensor, error) {
	ind, depthT, vals := in[0], in[1], in[2]
	if depthT.notTensor() || vals.notTensor() || depthT.Len() != 1 || vals.Len() != 2 {
		return nil, fmt.Errorf("depth %v must have one value and values %v two", depthT, vals)
	}
	dv := depthT.Float64s()[0]
	if !(dv >= 1) || dv > math.MaxInt32 {
		return nil, fmt.Errorf("depth %v must be at least 1", dv)
	}
	depth := int(dv)
	r := len(ind.Shape)
	axis, err := normAxis(c.Int("axis", -1), r+1)
	if err != nil {
		return nil, err
	}
	shape := slices.Concat(ind.Shape[:axis], []int{depth}, ind.Shape[axis:])
	out := c.alloc(vals.DType, shape...)
	vv := vals.Float64s()
	off, on := vv[0], vv[1]
	is := ind.Float64s()
	outer, inner := shapeSize(ind.Shape[:axis]), shapeSize(ind.Shape[axis:])
	c.reserveElems(out.Len(), 8)
	v := make([]float64, out.Len())
	for i := range v {
		v[i] = off
	}
	for o := range outer {
		for i := range inner {
			k := int64(is[o*inner+i])
			if k < 0 {
				k += int64(depth)
			}
			if k >= 0 && k < int64(depth) {
				v[(o*depth+int(k))*inner+i] = on
			}
		}
	}
	fromFloat64(out, v)
	return []*Tensor{out}, nil
}

// compress keeps the slices along axis (of the flattened input without
// axis) whose condition is true.
func compress(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, cond := in[0], in[1]
	cd := isNonZero(cond)
	if len(cond.Shape) != 1 {
		return nil, fmt.Errorf("condition %v must be 1-D", cond.Shape)
	}
	src := x
	axis := 0
	if c.Attr("axis") != nil {
		var err error
		if axis, err = normAxis(c.Int("axis", 0), len(x.Shape)); err != nil {
			return nil, err
		}
	} else {
		src = x.Reshaped(x.Len())
	}
	dim := src.Shape[axis]
	var keep []int
	for i, b := range cd {
		if b {
			if i >= dim {
				return nil, fmt.Errorf("condition selects index %d of an axis of %d", i, dim)
			}
			keep = append(keep, i)
		}
	}
	shape := slices.Clone(src.Shape)
	shape[axis] = len(keep)
	out := c.alloc(x.DType, shape...)
	outer, inner := shapeSize(src.Shape[:axis]), shapeSize(src.Shape[axis+1:])
	for o := range outer {
		for j, k := range keep {
			copyAny(out, (o*len(keep)+j)*inner, src, (o*dim+k)*inner, inner)
		}
	}
	return []*Tensor{out}, nil
}

func eyeLike(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	if len(x.Shape) != 2 {
		return nil, fmt.Errorf("input %v must be 2-D", x.Shape)
	}
	dt := x.DType
	if c.Attr("dtype") != nil {
		var err error
		if dt, err = dtypeAttr(c, "dtype"); err != nil {
			return nil, err
		}
	}
	k := int(c.Int("k", 0))
	out := c.zeros(dt, x.Shape...)
	v := make([]float64, out.Len())
	for i := range x.Shape[0] {
		if j := i + k; j >= 0 && j < x.Shape[1] {
			v[i*x.Shape[1]+j] = 1
		}
	}
	fromFloat64Sat(out, v, true, "up")
	return []*Tensor{out}, nil
}

// det is the determinant of each square matrix of the last two axes (LU
// with partial pivoting in float64).
func det(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	r := len(x.Shape)
	if r < 2 || x.Shape[r-1] != x.Shape[r-2] {
		return nil, fmt.Errorf("input %v: want square matrices in the last two axes", x.Shape)
	}
	n := x.Shape[r-1]
	xs := x.Float64s()
	batch := shapeSize(x.Shape[:r-2])
	v := make([]float64, batch)
	m := make([]float64, n*n)
	for b := range batch {
		copy(m, xs[b*n*n:(b+1)*n*n])
		d := 1.0
		for col := range n {
			p := col
			for i := col + 1; i < n; i++ {
				if math.Abs(m[i*n+col]) > math.Abs(m[p*n+col]) {
					p = i
				}
			}
			if m[p*n+col] == 0 {
				d = 0
				break
			}
			if p != col {
				for j := range n {
					m[p*n+j], m[col*n+j] = m[col*n+j], m[p*n+j]
				}
				d = -d
			}
			piv := m[col*n+col]
			d *= piv
			for i := col + 1; i < n; i++ {
				f := m[i*n+col] / piv
				for j := col; j < n; j++ {
					m[i*n+j] -= f * m[col*n+j]
				}
			}
		}
		v[b] = d
	}
	out := c.alloc(x.DType, x.Shape[:r-2]...)
	storeRounded(c, out, v)
	return []*Tensor{out}, nil
}

func reverseSequence(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, lens := in[0], in[1].Int64s()
	r := len(x.Shape)
	ba, err := normAxis(c.Int("batch_axis", 1), r)
	if err != nil {
		return nil, err
	}
	ta, err := normAxis(c.Int("time_axis", 0), r)
	if err != nil || ta == ba || r < 2 {
		return nil, fmt.Errorf("time_axis %d and batch_axis %d of rank %d", c.Int("time_axis", 0), c.Int("batch_axis", 1), r)
	}
	if len(lens) != x.Shape[ba] {
		return nil, fmt.Errorf("sequence_lens of %d for a batch of %d", len(lens), x.Shape[ba])
	}
	out := c.clone(x)
	st := make([]int, r)
	s := 1
	for i := r - 1; i >= 0; i-- {
		st[i] = s
		s *= x.Shape[i]
	}
	// Every element (b, t, rest) with t < len[b] comes from t' = len-1-t.
	idx := make([]int, r)
	for i := range x.Len() {
		b, t := idx[ba], idx[ta]
		l := int(lens[b])
		if l < 0 || l > x.Shape[ta] {
			return nil, fmt.Errorf("sequence length %d outside [0, %d]", l, x.Shape[ta])
		}
		if t < l {
			copyAny(out, i, x, i+(l-1-2*t)*st[ta], 1)
		}
		for a := r - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < x.Shape[a] {
				break
			}
			idx[a] = 0
		}
	}
	return []*Tensor{out}, nil
}

// unique returns the distinct elements (or slices along axis) of x, sorted
// or in order of first occurrence, with the index of each one's first
// occurrence, each element's index in the result, and the counts.
func unique(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	src := x
	axis := 0
	if c.Attr("axis") != nil {
		var err error
		if axis, err = normAxis(c.Int("axis", 0), len(x.Shape)); err != nil {
			return nil, err
		}
	} else {
		src = x.Reshaped(x.Len())
	}
	dim := src.Shape[axis]
	outer, inner := shapeSize(src.Shape[:axis]), shapeSize(src.Shape[axis+1:])
	vals := src.Float64s()
	// key k is the slice (outer x inner values) at index k of axis.
	slice := func(k int, j int) float64 { return vals[((j/inner)*dim+k)*inner+j%inner] }
	n := outer * inner
	cmp := func(a, b int) int {
		for j := range n {
			x, y := slice(a, j), slice(b, j)
			if x < y {
				return -1
			}
			if x > y {
				return 1
			}
		}
		return 0
	}
	order := make([]int, dim)
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return cmp(order[i], order[j]) < 0 })
	// Groups of equal slices in sorted order; each group's first index
	// is its first occurrence (the sort is stable).
	var firsts []int
	group := make([]int, dim) // group of each index, in sorted order
	var counts []int64
	for i, k := range order {
		if i == 0 || cmp(order[i-1], k) != 0 {
			firsts = append(firsts, k)
			counts = append(counts, 0)
		}
		group[k] = len(firsts) - 1
		counts[len(counts)-1]++
	}
	// Result order: sorted, or by first occurrence.
	rank := make([]int, len(firsts)) // position of each group in the result
	for g := range rank {
		rank[g] = g
	}
	if c.Int("sorted", 1) == 0 {
		byFirst := make([]int, len(firsts))
		for g := range byFirst {
			byFirst[g] = g
		}
		sort.Slice(byFirst, func(i, j int) bool { return firsts[byFirst[i]] < firsts[byFirst[j]] })
		for pos, g := range byFirst {
			rank[g] = pos
		}
	}
	u := len(firsts)
	shape := slices.Clone(src.Shape)
	shape[axis] = u
	y := c.alloc(x.DType, shape...)
	indices, inverse, cnt := c.alloc(graph.Int64, u), c.alloc(graph.Int64, dim), c.alloc(graph.Int64, u)
	id, inv, cd := Data[int64](indices), Data[int64](inverse), Data[int64](cnt)
	for g, k := range firsts {
		p := rank[g]
		id[p], cd[p] = int64(k), counts[g]
		for o := range outer {
			copyAny(y, (o*u+p)*inner, src, (o*dim+k)*inner, inner)
		}
	}
	for k := range dim {
		inv[k] = int64(rank[group[k]])
	}
	return []*Tensor{y, indices, inverse, cnt}, nil
}

// nms is NonMaxSuppression: per batch and class, boxes by descending
// score (ties: lower index first) above score_threshold, each kept unless
// its IoU with a kept box exceeds iou_threshold, at most
// max_output_boxes_per_class; the result lists (batch, class, box).
func nms(c *Call, in []*Tensor) ([]*Tensor, error) {
	boxes, scores := in[0], in[1]
	if len(boxes.Shape) != 3 || boxes.Shape[2] != 4 || len(scores.Shape) != 3 || scores.Shape[0] != boxes.Shape[0] || scores.Shape[2] != boxes.Shape[1] {
		return nil, fmt.Errorf("boxes %v and scores %v: want (B, N, 4) and (B, C, N)", boxes.Shape, scores.Shape)
	}
	maxOut := int64(0)
	var err error
	if t := optIn(in, 2); t != nil && t.Len() > 0 {
		if maxOut, err = scalarInt(t, "max_output_boxes_per_class"); err != nil {
			return nil, err
		}
		maxOut = max(maxOut, 0)
	}
	iou := 0.0
	if t := optIn(in, 3); t != nil && t.Len() > 0 {
		if iou, err = scalarFloat(t, "iou_threshold"); err != nil {
			return nil, err
		}
	}
	hasScore, scoreTh := false, 0.0
	if t := optIn(in, 4); t != nil && t.Len() > 0 {
		if scoreTh, err = scalarFloat(t, "score_threshold"); err != nil {
			return nil, err
		}
		hasScore = true
	}
	center := c.Int("center_point_box", 0) == 1
	nb, nc, n := boxes.Shape[0], scores.Shape[1], boxes.Shape[1]
	bx, sc := boxes.Float64s(), scores.Float64s()
	// corners returns (ymin, xmin, ymax, xmax) of a box.
	corners := func(b []float64) (float64, float64, float64, float64) {
		if center {
			return b[1] - b[3]/2, b[0] - b[2]/2, b[1] + b[3]/2, b[0] + b[2]/2
		}
		return math.Min(b[0], b[2]), math.Min(b[1], b[3]), math.Max(b[0], b[2]), math.Max(b[1], b[3])
	}
	suppress := func(a, b []float64) bool {
		ay0, ax0, ay1, ax1 := corners(a)
		by0, bx0, by1, bx1 := corners(b)
		ix0, ix1 := math.Max(ax0, bx0), math.Min(ax1, bx1)
		iy0, iy1 := math.Max(ay0, by0), math.Min(ay1, by1)
		if ix1 <= ix0 || iy1 <= iy0 {
			return false
		}
		inter := (ix1 - ix0) * (iy1 - iy0)
		a1, a2 := (ax1-ax0)*(ay1-ay0), (bx1-bx0)*(by1-by0)
		union := a1 + a2 - inter
		if a1 <= 0 || a2 <= 0 || union <= 0 {
			return false
		}
		return inter/union > iou
	}
	var sel []int64
	cand := make([]int, 0, n)
	for b := range nb {
		for cl := range nc {
			s := sc[(b*nc+cl)*n : (b*nc+cl+1)*n]
			cand = cand[:0]
			for i := range n {
				if !hasScore || s[i] > scoreTh {
					cand = append(cand, i)
				}
			}
			sort.SliceStable(cand, func(i, j int) bool { return s[cand[i]] > s[cand[j]] })
			var kept []int
			for _, i := range cand {
				if int64(len(kept)) >= maxOut {
					break
				}
				ok := true
				for _, k := range kept {
					if suppress(bx[(b*n+i)*4:(b*n+i+1)*4], bx[(b*n+k)*4:(b*n+k+1)*4]) {
						ok = false
						break
					}
				}
				if ok {
					kept = append(kept, i)
					sel = append(sel, int64(b), int64(cl), int64(i))
				}
			}
		}
	}
	out := c.alloc(graph.Int64, len(sel)/3, 3)
	copy(Data[int64](out), sel)
	return []*Tensor{out}, nil
}

func init() {
	reg("BitwiseAnd", 18, 0, bitwiseKernel(func(x, y int64) int64 { return x & y }))
	reg("BitwiseOr", 18, 0, bitwiseKernel(func(x, y int64) int64 { return x | y }))
	reg("BitwiseXor", 18, 0, bitwiseKernel(func(x, y int64) int64 { return x ^ y }))
	reg("BitwiseNot", 18, 0, bitwiseNot)
	reg("BitShift", 11, 0, bitShift)
	Register("", "BitCast", 26, 0, bitCast, Native)
	reg("CumProd", 26, 0, cumProd)
	reg("PRelu", 1, 0, prelu)
	reg("Shrink", 9, 0, shrink)
	reg("Celu", 12, 0, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		a := float64(c.Float("alpha", 1))
		o, err := floatElementwise(c, in[0], func(x float64) float64 {
			return math.Max(0, x) + math.Min(0, a*math.Expm1(x/a))
		})
		return []*Tensor{o}, err
	})
	reg("Mish", 18, 0, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		o, err := floatElementwise(c, in[0], func(x float64) float64 {
			sp := math.Log1p(math.Exp(-math.Abs(x))) + math.Max(x, 0)
			return x * math.Tanh(sp)
		})
		return []*Tensor{o}, err
	})
	reg("Swish", 24, 0, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		a := float64(c.Float("alpha", 1))
		o, err := floatElementwise(c, in[0], func(x float64) float64 { return x * sigmoid(a*x) })
		return []*Tensor{o}, err
	})
	reg("Hardmax", 1, 0, hardmax)
	Register("", "NonZero", 9, 0, nonZero, Native)
	reg("OneHot", 9, 0, oneHot)
	Register("", "Compress", 9, 0, compress, Native)
	Register("", "Unique", 11, 0, unique, Native)
	reg("EyeLike", 9, 0, eyeLike)
	reg("Det", 11, 0, det)
	Register("", "ReverseSequence", 10, 0, reverseSequence, Native)
	reg("NonMaxSuppression", 10, 0, nms)
	reg("Scatter", 9, 10, scatterElements)
}
