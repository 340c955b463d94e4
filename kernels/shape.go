package kernels

import (
	"fmt"
	"slices"
)

// normAxis maps a possibly negative axis into [0, r).
func normAxis(a int64, r int) (int, error) {
	if a < -int64(r) || a >= int64(r) {
		return 0, fmt.Errorf("axis %d out of range for rank %d", a, r)
	}
	if a < 0 {
		a += int64(r)
	}
	return int(a), nil
}

func normAxes(as []int64, r int) ([]int, error) {
	out := make([]int, len(as))
	for i, a := range as {
		v, err := normAxis(a, r)
		if err != nil {
			return nil, err
		}
		if slices.Contains(out[:i], v) {
			return nil, fmt.Errorf("axis %d repeated", a)
		}
		out[i] = v
	}
	return out, nil
}

// intsInput reads an optional integer input (nil when absent).
func intsInput(in []*Tensor, i int) []int64 {
	if i >= len(in) || in[i] == nil {
		return nil
	}
	return in[i].Int64s()
}

func view(t *Tensor, shape []int) *Tensor {
	return &Tensor{DType: t.DType, Shape: shape, data: t.data}
}

func toInts(v []int64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

func reshape(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	var spec []int64
	if c.Opset < 5 {
		spec = c.Ints("shape")
	} else {
		spec = intsInput(in, 1)
	}
	shape, err := reshapeShape(x.Shape, spec, c.Int("allowzero", 0) == 1)
	if err != nil {
		return nil, err
	}
	return []*Tensor{view(x, shape)}, nil
}

// reshapeShape is the shape Reshape gives a tensor of shape from by spec
// (0 copies a dimension unless allowZero, -1 is inferred).
func reshapeShape(from []int, spec []int64, allowZero bool) ([]int, error) {
	shape := make([]int, len(spec))
	infer := -1
	known := 1
	n := shapeSize(from)
	for i, d := range spec {
		switch {
		case d == 0 && !allowZero:
			if i >= len(from) {
				return nil, fmt.Errorf("shape %v: 0 at %d copies a dimension the input lacks", spec, i)
			}
			shape[i] = from[i]
		case d == -1:
			if infer >= 0 {
				return nil, fmt.Errorf("shape %v has two -1", spec)
			}
			infer = i
			continue
		case d < 0:
			return nil, fmt.Errorf("shape %v: bad dimension %d", spec, d)
		default:
			shape[i] = int(d)
		}
		known *= shape[i]
	}
	if infer >= 0 {
		if known == 0 || n%known != 0 {
			return nil, fmt.Errorf("cannot reshape %v to %v", from, spec)
		}
		shape[infer] = n / known
	}
	if shapeSize(shape) != n {
		return nil, fmt.Errorf("cannot reshape %v to %v", from, spec)
	}
	return shape, nil
}

// reshapeTo is reshapeShape for callers that only need to know whether
// the reshape is valid.
func reshapeTo(from []int, spec []int64, allowZero bool) ([]int, bool) {
	s, err := reshapeShape(from, spec, allowZero)
	return s, err == nil
}

func flatten(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	a := c.Int("axis", 1)
	r := len(x.Shape)
	if a < -int64(r) || a > int64(r) {
		return nil, fmt.Errorf("axis %d out of range", a)
	}
	if a < 0 {
		a += int64(r)
	}
	// Both products of the dimensions, not Len()/outer: an empty input
	// ([0, 3, 4], axis 1) flattens to [0, 12].
	return []*Tensor{view(x, []int{shapeSize(x.Shape[:a]), shapeSize(x.Shape[a:])})}, nil
}

func squeeze(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	var axes []int64
	if c.Opset < 13 {
		axes = c.Ints("axes")
	} else {
		axes = intsInput(in, 1)
	}
	var shape []int
	if axes == nil {
		for _, d := range x.Shape {
			if d != 1 {
				shape = append(shape, d)
			}
		}
		return []*Tensor{view(x, shape)}, nil
	}
	ax, err := normAxes(axes, len(x.Shape))
	if err != nil {
		return nil, err
	}
	for i, d := range x.Shape {
		if slices.Contains(ax, i) {
			if d != 1 {
				return nil, fmt.Errorf("cannot squeeze axis %d of size %d", i, d)
			}
			continue
		}
		shape = append(shape, d)
	}
	return []*Tensor{view(x, shape)}, nil
}

func unsqueeze(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	var axes []int64
	if c.Opset < 13 {
		axes = c.Ints("axes")
	} else {
		axes = intsInput(in, 1)
	}
	r := len(x.Shape) + len(axes)
	ax, err := normAxes(axes, r)
	if err != nil {
		return nil, err
	}
	shape := make([]int, 0, r)
	j := 0
	for i := range r {
		if slices.Contains(ax, i) {
			shape = append(shape, 1)
		} else {
			shape = append(shape, x.Shape[j])
			j++
		}
	}
	return []*Tensor{view(x, shape)}, nil
}

func transpose(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	perm := c.Ints("perm")
	r := len(x.Shape)
	p := make([]int, r)
	if perm == nil {
		for i := range p {
			p[i] = r - 1 - i
		}
	} else {
		if len(perm) != r {
			return nil, fmt.Errorf("perm %v for rank %d", perm, r)
		}
		ax, err := normAxes(perm, r)
		if err != nil {
			return nil, err
		}
		p = ax
	}
	return []*Tensor{transposeC(c, x, p)}, nil
}

func concat(c *Call, in []*Tensor) ([]*Tensor, error) {
	var ts []*Tensor
	for _, t := range in {
		if t != nil {
			ts = append(ts, t)
		}
	}
	if len(ts) == 0 {
		return nil, fmt.Errorf("no inputs")
	}
	r := len(ts[0].Shape)
	axis, err := normAxis(c.Int("axis", 0), r)
	if err != nil {
		return nil, err
	}
	shape := slices.Clone(ts[0].Shape)
	shape[axis] = 0
	for _, t := range ts {
		if len(t.Shape) != r || t.DType != ts[0].DType {
			return nil, fmt.Errorf("inputs differ in rank or type")
		}
		for i := range r {
			if i != axis && t.Shape[i] != shape[i] {
				return nil, fmt.Errorf("inputs differ in dimension %d", i)
			}
		}
		shape[axis] += t.Shape[axis]
	}
	out := c.alloc(ts[0].DType, shape...)
	outer := shapeSize(shape[:axis])
	inner := shapeSize(shape[axis+1:])
	row := shape[axis] * inner
	off := 0
	for _, t := range ts {
		n := t.Shape[axis] * inner
		for o := range outer {
			copyAny(out, o*row+off, t, o*n, n)
		}
		off += n
	}
	return []*Tensor{out}, nil
}

// sliceAxis copies the slab [start, start+n) of axis from x.
func sliceAxis(c *Call, x *Tensor, axis, start, n int) *Tensor {
	shape := slices.Clone(x.Shape)
	shape[axis] = n
	out := c.alloc(x.DType, shape...)
	st := stridesOf(x.Shape)
	copyStrided(out, x, st, start*st[axis])
	return out
}

func split(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	axis, err := normAxis(c.Int("axis", 0), len(x.Shape))
	if err != nil {
		return nil, err
	}
	n := c.NumOutputs()
	var sizes []int64
	if c.Opset < 13 {
		sizes = c.Ints("split")
	} else if t := optIn(in, 1); t != nil && t.Len() > 0 {
		// An empty split input is an absent one (as ONNX Runtime reads it).
		sizes = t.Int64s()
	}
	dim := x.Shape[axis]
	if sizes == nil {
		if c.Opset >= 18 {
			if k := c.Attr("num_outputs"); k != nil && k.Int() != int64(n) {
				return nil, fmt.Errorf("num_outputs %d for a node of %d outputs", k.Int(), n)
			}
			chunk := (dim + n - 1) / max(n, 1)
			for i := range n {
				sizes = append(sizes, int64(min(chunk, max(dim-i*chunk, 0))))
			}
		} else {
			if dim%n != 0 {
				return nil, fmt.Errorf("dimension %d does not split evenly into %d", dim, n)
			}
			for range n {
				sizes = append(sizes, int64(dim/n))
			}
		}
	}
	var sum int64
	for _, s := range sizes {
		if s < 0 || s > int64(dim) {
			return nil, fmt.Errorf("split %v of dimension %d", sizes, dim)
		}
		sum += s
	}
	if sum != int64(dim) || len(sizes) != n {
		return nil, fmt.Errorf("split %v of dimension %d into %d outputs", sizes, dim, n)
	}
	outs := make([]*Tensor, n)
	off := 0
	for i, s := range sizes {
		outs[i] = sliceAxis(c, x, axis, off, int(s))
		off += int(s)
	}
	return outs, nil
}

func sliceOp(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	var starts, ends, axes, steps []int64
	if c.Opset < 10 {
		starts, ends, axes = c.Ints("starts"), c.Ints("ends"), c.Ints("axes")
	} else {
		starts, ends, axes, steps = intsInput(in, 1), intsInput(in, 2), intsInput(in, 3), intsInput(in, 4)
	}
	r := len(x.Shape)
	if axes == nil {
		for i := range starts {
			axes = append(axes, int64(i))
		}
	}
	if len(starts) != len(ends) || len(axes) != len(starts) || steps != nil && len(steps) != len(starts) {
		return nil, fmt.Errorf("starts %v, ends %v, axes %v, steps %v differ in length", starts, ends, axes, steps)
	}
	ax, err := normAxes(axes, r)
	if err != nil {
		return nil, err
	}
	st := stridesOf(x.Shape)
	shape := slices.Clone(x.Shape)
	strides := slices.Clone(st)
	off := 0
	for i, a := range ax {
		dim := int64(x.Shape[a])
		step := int64(1)
		if steps != nil {
			step = steps[i]
		}
		if step == 0 {
			return nil, fmt.Errorf("step 0")
		}
		s, e := starts[i], ends[i]
		if s < 0 {
			s += dim
		}
		if e < 0 {
			e += dim
		}
		var n int64
		switch {
		case dim == 0:
			// An empty axis stays empty (clamping to [0, dim-1] below
			// would select one element that is not there).
		case step > 0:
			s, e = clamp(s, 0, dim), clamp(e, 0, dim)
			if e > s {
				n = (e-s-1)/step + 1 // no overflow for a huge step
			}
		default:
			s, e = clamp(s, 0, dim-1), clamp(e, -1, dim-1)
			if s > e {
				n = (s-e-1)/-step + 1
			}
		}
		shape[a] = int(n)
		strides[a] = st[a] * int(step)
		if n > 0 {
			off += int(s) * st[a]
		}
	}
	out := c.alloc(x.DType, shape...)
	if out.Len() > 0 {
		copyStrided(out, x, strides, off)
	}
	return []*Tensor{out}, nil
}

func clamp(v, lo, hi int64) int64 { return max(lo, min(v, hi)) }

func expand(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	want := in[1].Int64s()
	for _, d := range want {
		if d < 0 {
			return nil, fmt.Errorf("negative dimension in shape %v", want)
		}
	}
	shape, err := broadcastShape(x.Shape, toInts(want))
	if err != nil {
		return nil, err
	}
	if err := c.checkShape(x.DType, shape); err != nil {
		return nil, err
	}
	return []*Tensor{expandC(c, x, shape)}, nil
}

func tile(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	reps := in[1].Int64s()
	if len(reps) != len(x.Shape) {
		return nil, fmt.Errorf("repeats %v for rank %d", reps, len(x.Shape))
	}
	dims := make([]int64, 0, 2*len(reps))
	for i, r := range reps {
		if r < 0 {
			return nil, fmt.Errorf("negative repeat %d", r)
		}
		dims = append(dims, r, int64(x.Shape[i]))
	}
	if err := c.checkSize(x.DType, dims); err != nil {
		return nil, err
	}
	st := stridesOf(x.Shape)
	var vshape, vstr []int
	out := make([]int, len(reps))
	for i, r := range reps {
		vshape = append(vshape, int(r), x.Shape[i])
		vstr = append(vstr, 0, st[i])
		out[i] = int(r) * x.Shape[i]
	}
	t := c.alloc(x.DType, vshape...)
	if t.Len() > 0 {
		copyStrided(t, x, vstr, 0)
	}
	return []*Tensor{view(t, out)}, nil
}

func shapeOp(c *Call, in []*Tensor) ([]*Tensor, error) {
	s := in[0].Shape
	r := int64(len(s))
	start, end := c.Int("start", 0), c.Int("end", r)
	if start < 0 {
		start += r
	}
	if end < 0 {
		end += r
	}
	start, end = clamp(start, 0, r), clamp(end, 0, r)
	var v []int64
	for i := start; i < end; i++ {
		v = append(v, int64(s[i]))
	}
	if v == nil {
		v = []int64{}
	}
	return []*Tensor{FromSlice([]int{len(v)}, v)}, nil
}

func sizeOp(c *Call, in []*Tensor) ([]*Tensor, error) {
	return []*Tensor{Scalar(int64(in[0].Len()))}, nil
}

func gather(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, idx := in[0], in[1].Int64s()
	axis, err := normAxis(c.Int("axis", 0), len(x.Shape))
	if err != nil {
		return nil, err
	}
	dim := x.Shape[axis]
	shape := slices.Concat(x.Shape[:axis], in[1].Shape, x.Shape[axis+1:])
	out := c.alloc(x.DType, shape...)
	outer := shapeSize(x.Shape[:axis])
	inner := shapeSize(x.Shape[axis+1:])
	k := len(idx)
	ix := make([]int, k)
	for i, j := range idx {
		if j < -int64(dim) || j >= int64(dim) {
			return nil, fmt.Errorf("index %d out of range [%d, %d)", j, -dim, dim)
		}
		if j < 0 {
			j += int64(dim)
		}
		ix[i] = int(j)
	}
	for o := range outer {
		for i, j := range ix {
			copyAny(out, (o*k+i)*inner, x, (o*dim+j)*inner, inner)
		}
	}
	return []*Tensor{out}, nil
}

func init() {
	mv := func(op string, since, until int64, fn Kernel) { Register("", op, since, until, fn, Native) }
	mv("Reshape", 1, 0, reshape)
	mv("Flatten", 1, 0, flatten)
	mv("Squeeze", 1, 0, squeeze)
	mv("Unsqueeze", 1, 0, unsqueeze)
	mv("Transpose", 1, 0, transpose)
	mv("Concat", 1, 0, concat)
	mv("Split", 1, 0, split)
	mv("Slice", 1, 0, sliceOp)
	mv("Expand", 8, 0, expand)
	mv("Tile", 6, 0, tile)
	mv("Shape", 1, 0, shapeOp)
	mv("Size", 1, 0, sizeOp)
	mv("Gather", 1, 0, gather)
}
