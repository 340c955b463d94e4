package kernels

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
)

// unravel/ravel helpers for index arithmetic.

func fixIndex(j int64, dim int) (int, error) {
	if j < -int64(dim) || j >= int64(dim) {
		return 0, fmt.Errorf("index %d out of range [%d, %d)", j, -dim, dim)
	}
	if j < 0 {
		j += int64(dim)
	}
	return int(j), nil
}

// elementsIndex computes, for every position of indices (shape ishape),
// the flat offset into a tensor of shape dshape with the axis coordinate
// replaced by the index value.
func elementsIndex(dshape, ishape []int, idx []int64, axis int) ([]int, error) {
	if len(dshape) != len(ishape) {
		return nil, fmt.Errorf("data rank %d, indices rank %d", len(dshape), len(ishape))
	}
	dst := stridesOf(dshape)
	out := make([]int, len(idx))
	coord := make([]int, len(ishape))
	for p := range idx {
		off := 0
		for d := range ishape {
			cd := coord[d]
			if d == axis {
				v, err := fixIndex(idx[p], dshape[axis])
				if err != nil {
					return nil, err
				}
				cd = v
			} else if cd >= dshape[d] {
				return nil, fmt.Errorf("indices shape %v exceeds data shape %v", ishape, dshape)
			}
			off += cd * dst[d]
		}
		out[p] = off
		for d := len(ishape) - 1; d >= 0; d-- {
			coord[d]++
			if coord[d] < ishape[d] {
				break
			}
			coord[d] = 0
		}
	}
	return out, nil
}

func gatherElements(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, ind := in[0], in[1]
	axis, err := normAxis(c.Int("axis", 0), len(x.Shape))
	if err != nil {
		return nil, err
	}
	idx, err := elementsIndex(x.Shape, ind.Shape, ind.Int64s(), axis)
	if err != nil {
		return nil, err
	}
	out := c.alloc(x.DType, ind.Shape...)
	takeAny(out, x, idx)
	return []*Tensor{out}, nil
}

// ndIndex resolves GatherND/ScatterND indices: for each of the index
// tuples it gives the flat offset of the addressed slice in data, the
// slice length, and the leading shape of the tuples.
func ndIndex(c *Call, dshape, ishape []int, idx []int64, batch int) (offs []int, slice int, err error) {
	if len(ishape) == 0 {
		return nil, 0, fmt.Errorf("indices must have rank >= 1")
	}
	if batch < 0 || batch > 0 && batch >= min(len(ishape), len(dshape)) {
		return nil, 0, fmt.Errorf("batch_dims %d for indices of rank %d and data of rank %d", batch, len(ishape), len(dshape))
	}
	if !equalShape(ishape[:batch], dshape[:batch]) {
		return nil, 0, fmt.Errorf("the batch dimensions of indices %v and data %v differ", ishape, dshape)
	}
	k := ishape[len(ishape)-1]
	if batch+k > len(dshape) {
		return nil, 0, fmt.Errorf("index tuples of length %d with batch_dims %d for data rank %d", k, batch, len(dshape))
	}
	dst := stridesOf(dshape)
	slice = shapeSize(dshape[batch+k:])
	nb := shapeSize(dshape[:batch])
	tuples := shapeSize(ishape[:len(ishape)-1])
	perBatch := tuples / max(nb, 1)
	c.reserveElems(tuples, 8)
	offs = make([]int, tuples)
	for t := range tuples {
		b := t / max(perBatch, 1)
		off := 0
		// batch coordinates: unravel b over dshape[:batch]
		rem := b
		for d := batch - 1; d >= 0; d-- {
			off += (rem % dshape[d]) * dst[d]
			rem /= dshape[d]
		}
		for j := range k {
			v, err := fixIndex(idx[t*k+j], dshape[batch+j])
			if err != nil {
				return nil, 0, err
			}
			off += v * dst[batch+j]
		}
		offs[t] = off
	}
	return offs, slice, nil
}

func gatherND(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, ind := in[0], in[1]
	b := int(c.Int("batch_dims", 0))
	offs, slice, err := ndIndex(c, x.Shape, ind.Shape, ind.Int64s(), b)
	if err != nil {
		return nil, err
	}
	k := ind.Shape[len(ind.Shape)-1]
	shape := slices.Concat(ind.Shape[:len(ind.Shape)-1], x.Shape[b+k:])
	out := c.alloc(x.DType, shape...)
	for t, o := range offs {
		copyAny(out, t*slice, x, o, slice)
	}
	return []*Tensor{out}, nil
}

func scatterApply[T Num](dst []T, tgt []int, upd []T, red string) error {
	for i, j := range tgt {
		u := upd[i]
		switch red {
		case "none", "":
			dst[j] = u
		case "add":
			dst[j] += u
		case "mul":
			dst[j] *= u
		case "max":
			dst[j] = max(dst[j], u)
		case "min":
			dst[j] = min(dst[j], u)
		default:
			return fmt.Errorf("reduction %q", red)
		}
	}
	return nil
}

// scatter copies data and applies the updates at the flat targets.
func scatter(c *Call, data, upd *Tensor, tgt []int, red string) (*Tensor, error) {
	if data.DType != upd.DType {
		return nil, fmt.Errorf("data %v and updates %v differ in type", data.DType, upd.DType)
	}
	b := data.DType == graph.Bool
	if b {
		data, upd = castC(c, data, graph.Uint8), castC(c, upd, graph.Uint8)
	}
	out := c.clone(data)
	var err error
	switch out.DType {
	case graph.Float:
		err = scatterApply(Data[float32](out), tgt, Data[float32](upd), red)
	case graph.Double:
		err = scatterApply(Data[float64](out), tgt, Data[float64](upd), red)
	case graph.Int64:
		err = scatterApply(Data[int64](out), tgt, Data[int64](upd), red)
	case graph.Int32:
		err = scatterApply(Data[int32](out), tgt, Data[int32](upd), red)
	case graph.Int8:
		err = scatterApply(Data[int8](out), tgt, Data[int8](upd), red)
	case graph.Uint8:
		err = scatterApply(Data[uint8](out), tgt, Data[uint8](upd), red)
	case graph.Int16:
		err = scatterApply(Data[int16](out), tgt, Data[int16](upd), red)
	case graph.Uint16:
		err = scatterApply(Data[uint16](out), tgt, Data[uint16](upd), red)
	case graph.Uint32:
		err = scatterApply(Data[uint32](out), tgt, Data[uint32](upd), red)
	case graph.Uint64:
		err = scatterApply(Data[uint64](out), tgt, Data[uint64](upd), red)
	default:
		return nil, fmt.Errorf("%v: %w", out.DType, ErrUnsupportedType)
	}
	if b {
		out = castC(c, out, graph.Bool)
	}
	return out, err
}

func scatterElements(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, ind, upd := in[0], in[1], in[2]
	axis, err := normAxis(c.Int("axis", 0), len(x.Shape))
	if err != nil {
		return nil, err
	}
	if !equalShape(ind.Shape, upd.Shape) {
		return nil, fmt.Errorf("indices %v and updates %v differ in shape", ind.Shape, upd.Shape)
	}
	tgt, err := elementsIndex(x.Shape, ind.Shape, ind.Int64s(), axis)
	if err != nil {
		return nil, err
	}
	o, err := scatter(c, x, upd, tgt, c.String("reduction", "none"))
	return []*Tensor{o}, err
}

func scatterND(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, ind, upd := in[0], in[1], in[2]
	offs, slice, err := ndIndex(c, x.Shape, ind.Shape, ind.Int64s(), 0)
	if err != nil {
		return nil, err
	}
	if upd.Len() != len(offs)*slice {
		return nil, fmt.Errorf("updates %v do not match %d slices of %d", upd.Shape, len(offs), slice)
	}
	tgt := make([]int, 0, upd.Len())
	for _, o := range offs {
		for j := range slice {
			tgt = append(tgt, o+j)
		}
	}
	o, err := scatter(c, x, upd, tgt, c.String("reduction", "none"))
	return []*Tensor{o}, err
}

func constantOfShape(c *Call, in []*Tensor) ([]*Tensor, error) {
	dims := in[0].Int64s()
	shape := toInts(dims)
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("negative dimension in %v", shape)
		}
	}
	val := Scalar(float32(0))
	if a := c.Attr("value"); a != nil && a.Tensor != nil {
		v, err := FromGraph(a.Tensor)
		if err != nil {
			return nil, err
		}
		if v.Len() != 1 {
			return nil, fmt.Errorf("value must have one element")
		}
		val = v
	}
	if err := c.checkSize(val.DType, dims); err != nil {
		return nil, err
	}
	return []*Tensor{expandC(c, view(val, nil), shape)}, nil
}

func constant(c *Call, in []*Tensor) ([]*Tensor, error) {
	if len(c.attrs) == 0 {
		return nil, fmt.Errorf("Constant has no value attribute")
	}
	// The first attribute: a Constant node has exactly one.
	na := c.attrs[0]
	gt, err := graph.ConstantFromAttr(na.name, na.a, c.Node.Output(0).Name)
	if err != nil {
		return nil, err
	}
	t, err := FromGraph(gt)
	return []*Tensor{t}, err
}

// rangeCount is the number of elements of Range(start, limit, delta),
// delta nonzero (NaN for NaN operands).
func rangeCount(start, limit, delta float64) float64 {
	return math.Max(math.Ceil((limit-start)/delta), 0)
}

func rangeT[T Num](c *Call, start, limit, delta T) *Tensor {
	n := int(rangeCount(float64(start), float64(limit), float64(delta)))
	out := c.alloc(dtypeOf[T](), n)
	d := Data[T](out)
	v := start
	for i := range d {
		d[i] = v
		v += delta
	}
	return out
}

func rangeOp(c *Call, in []*Tensor) ([]*Tensor, error) {
	s, l, d := in[0], in[1], in[2]
	if s.Len() != 1 || l.Len() != 1 || d.Len() != 1 {
		return nil, fmt.Errorf("start, limit and delta must be scalars")
	}
	if s.DType != l.DType || s.DType != d.DType {
		return nil, fmt.Errorf("start, limit and delta differ in type: %v, %v, %v", s.DType, l.DType, d.DType)
	}
	// Checked before the count is computed (which divides by delta).
	if d.Float64s()[0] == 0 {
		return nil, fmt.Errorf("delta is 0")
	}
	if err := c.checkCount(s.DType, rangeCount(s.Float64s()[0], l.Float64s()[0], d.Float64s()[0])); err != nil {
		return nil, err
	}
	var o *Tensor
	switch s.DType {
	case graph.Float:
		o = rangeT(c, Data[float32](s)[0], Data[float32](l)[0], Data[float32](d)[0])
	case graph.Double:
		o = rangeT(c, Data[float64](s)[0], Data[float64](l)[0], Data[float64](d)[0])
	case graph.Int64:
		o = rangeT(c, Data[int64](s)[0], Data[int64](l)[0], Data[int64](d)[0])
	case graph.Int32:
		o = rangeT(c, Data[int32](s)[0], Data[int32](l)[0], Data[int32](d)[0])
	case graph.Int16:
		o = rangeT(c, Data[int16](s)[0], Data[int16](l)[0], Data[int16](d)[0])
	default:
		return nil, fmt.Errorf("%v: %w", s.DType, ErrUnsupportedType)
	}
	return []*Tensor{o}, nil
}

// zeroRun sets n elements of t from off to zero (false).
func zeroRun(t *Tensor, off, n int) {
	if n <= 0 {
		return
	}
	switch d := t.data.(type) {
	case []float32:
		clear(d[off : off+n])
	case []float64:
		clear(d[off : off+n])
	case []int64:
		clear(d[off : off+n])
	case []int32:
		clear(d[off : off+n])
	case []int8:
		clear(d[off : off+n])
	case []uint8:
		clear(d[off : off+n])
	case []bool:
		clear(d[off : off+n])
	case []float16.Float16:
		clear(d[off : off+n])
	case []graph.BF16:
		clear(d[off : off+n])
	case []int16:
		clear(d[off : off+n])
	case []uint16:
		clear(d[off : off+n])
	case []uint32:
		clear(d[off : off+n])
	case []uint64:
		clear(d[off : off+n])
	default:
		panic(typePanic("kernels: zeroRun of " + t.DType.String()))
	}
}

func trilu(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	r := len(x.Shape)
	if r < 2 {
		return nil, fmt.Errorf("rank %d < 2", r)
	}
	k := int64(0)
	if ks := intsInput(in, 1); ks != nil {
		if len(ks) != 1 {
			return nil, fmt.Errorf("k must have one element, not %v", in[1])
		}
		k = ks[0]
	}
	upper := c.Int("upper", 1) == 1
	out := c.clone(x)
	n, m := x.Shape[r-2], x.Shape[r-1]
	batches := shapeSize(x.Shape[:r-2])
	for b := range batches {
		for i := range n {
			row := (b*n + i) * m
			// keep j-i >= k (upper) or j-i <= k (lower)
			lim := int64(i) + k
			if upper {
				zeroRun(out, row, int(clamp(lim, 0, int64(m))))
			} else {
				s := int(clamp(lim+1, 0, int64(m)))
				zeroRun(out, row+s, m-s)
			}
		}
	}
	return []*Tensor{out}, nil
}

func dropout(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	if c.Opset >= 12 {
		var training bool
		if t := optIn(in, 2); t != nil {
			if t.DType != graph.Bool || t.Len() != 1 {
				return nil, fmt.Errorf("training_mode must be one bool, not %v", t)
			}
			training = Data[bool](t)[0]
		}
		ratio := 0.5
		if t := optIn(in, 1); t != nil {
			if t.Len() != 1 {
				return nil, fmt.Errorf("ratio must have one element, not %v", t)
			}
			ratio = t.Float64s()[0]
		}
		if training {
			if ratio != 0 {
				return dropoutTraining(c, x, ratio)
			}
		}
	} else if c.Opset < 7 && c.Int("is_test", 0) == 0 {
		return dropoutTraining(c, x, float64(c.Float("ratio", 0.5)))
	}
	outs := []*Tensor{x}
	if c.HasOutput(1) {
		m := c.alloc(graph.Bool, x.Shape...)
		for i := range Data[bool](m) {
			Data[bool](m)[i] = true
		}
		outs = append(outs, m)
	}
	return outs, nil
}

func cumsumT[T Num](c *Call, x *Tensor, axis int, exclusive, reverse bool) *Tensor {
	out := c.alloc(x.DType, x.Shape...)
	d, s := Data[T](out), Data[T](x)
	dim := x.Shape[axis]
	inner := shapeSize(x.Shape[axis+1:])
	outer := shapeSize(x.Shape[:axis])
	for o := range outer {
		for in := range inner {
			var acc T
			for k := range dim {
				j := k
				if reverse {
					j = dim - 1 - k
				}
				p := (o*dim+j)*inner + in
				if exclusive {
					d[p] = acc
					acc += s[p]
				} else {
					acc += s[p]
					d[p] = acc
				}
			}
		}
	}
	return out
}

func cumsum(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	if in[1].Len() != 1 {
		return nil, fmt.Errorf("axis must have one element, not %v", in[1])
	}
	axis, err := normAxis(in[1].Int64s()[0], len(x.Shape))
	if err != nil {
		return nil, err
	}
	ex, rev := c.Int("exclusive", 0) == 1, c.Int("reverse", 0) == 1
	var o *Tensor
	switch x.DType {
	case graph.Float:
		o = cumsumT[float32](c, x, axis, ex, rev)
	case graph.Double:
		o = cumsumT[float64](c, x, axis, ex, rev)
	case graph.Int64:
		o = cumsumT[int64](c, x, axis, ex, rev)
	case graph.Int32:
		o = cumsumT[int32](c, x, axis, ex, rev)
	case graph.Uint32:
		o = cumsumT[uint32](c, x, axis, ex, rev)
	case graph.Uint64:
		o = cumsumT[uint64](c, x, axis, ex, rev)
	default:
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
	return []*Tensor{o}, nil
}

func topkT[T Num](c *Call, x *Tensor, axis, k int, largest, sorted bool) (*Tensor, *Tensor) {
	shape := slices.Clone(x.Shape)
	shape[axis] = k
	vals, inds := c.alloc(x.DType, shape...), c.alloc(graph.Int64, shape...)
	vd, id, s := Data[T](vals), Data[int64](inds), Data[T](x)
	dim := x.Shape[axis]
	inner := shapeSize(x.Shape[axis+1:])
	outer := shapeSize(x.Shape[:axis])
	order := make([]int, dim)
	for o := range outer {
		for in := range inner {
			at := func(j int) T { return s[(o*dim+j)*inner+in] }
			for j := range order {
				order[j] = j
			}
			sort.SliceStable(order, func(a, b int) bool {
				va, vb := at(order[a]), at(order[b])
				if largest {
					return va > vb
				}
				return va < vb
			})
			for j := range k {
				p := (o*k+j)*inner + in
				vd[p] = at(order[j])
				id[p] = int64(order[j])
			}
		}
	}
	return vals, inds
}

func topk(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	axis, err := normAxis(c.Int("axis", -1), len(x.Shape))
	if err != nil {
		return nil, err
	}
	var k int64
	if c.Opset < 10 {
		k = c.Int("k", 0)
	} else {
		if in[1].Len() != 1 {
			return nil, fmt.Errorf("K must have one element, not %v", in[1])
		}
		k = in[1].Int64s()[0]
	}
	if k < 0 || int(k) > x.Shape[axis] {
		return nil, fmt.Errorf("k=%d for dimension %d", k, x.Shape[axis])
	}
	largest, sorted := c.Int("largest", 1) == 1, c.Int("sorted", 1) == 1
	var v, i *Tensor
	switch x.DType {
	case graph.Float:
		v, i = topkT[float32](c, x, axis, int(k), largest, sorted)
	case graph.Double:
		v, i = topkT[float64](c, x, axis, int(k), largest, sorted)
	case graph.Int64:
		v, i = topkT[int64](c, x, axis, int(k), largest, sorted)
	case graph.Int32:
		v, i = topkT[int32](c, x, axis, int(k), largest, sorted)
	case graph.Int8:
		v, i = topkT[int8](c, x, axis, int(k), largest, sorted)
	case graph.Uint8:
		v, i = topkT[uint8](c, x, axis, int(k), largest, sorted)
	case graph.Int16:
		v, i = topkT[int16](c, x, axis, int(k), largest, sorted)
	case graph.Uint16:
		v, i = topkT[uint16](c, x, axis, int(k), largest, sorted)
	case graph.Uint32:
		v, i = topkT[uint32](c, x, axis, int(k), largest, sorted)
	case graph.Uint64:
		v, i = topkT[uint64](c, x, axis, int(k), largest, sorted)
	default:
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
	return []*Tensor{v, i}, nil
}

func argT[T Num](c *Call, x *Tensor, axis int, keep, last, isMax bool) *Tensor {
	shape := slices.Clone(x.Shape)
	shape[axis] = 1
	out := c.alloc(graph.Int64, shape...)
	d, s := Data[int64](out), Data[T](x)
	dim := x.Shape[axis]
	inner := shapeSize(x.Shape[axis+1:])
	outer := shapeSize(x.Shape[:axis])
	for o := range outer {
		for in := range inner {
			best := 0
			bv := s[o*dim*inner+in]
			for j := 1; j < dim; j++ {
				v := s[(o*dim+j)*inner+in]
				better := isMax && v > bv || !isMax && v < bv
				if better || last && v == bv {
					best, bv = j, v
				}
			}
			d[o*inner+in] = int64(best)
		}
	}
	if !keep {
		shape = slices.Delete(shape, axis, axis+1)
		out = view(out, shape)
	}
	return out
}

func argOp(isMax bool) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		x := in[0]
		axis, err := normAxis(c.Int("axis", 0), len(x.Shape))
		if err != nil {
			return nil, err
		}
		if x.Shape[axis] == 0 {
			return nil, fmt.Errorf("empty axis")
		}
		keep, last := c.Int("keepdims", 1) == 1, c.Int("select_last_index", 0) == 1
		var o *Tensor
		switch x.DType {
		case graph.Float:
			o = argT[float32](c, x, axis, keep, last, isMax)
		case graph.Double:
			o = argT[float64](c, x, axis, keep, last, isMax)
		case graph.Int64:
			o = argT[int64](c, x, axis, keep, last, isMax)
		case graph.Int32:
			o = argT[int32](c, x, axis, keep, last, isMax)
		case graph.Int8:
			o = argT[int8](c, x, axis, keep, last, isMax)
		case graph.Uint8:
			o = argT[uint8](c, x, axis, keep, last, isMax)
		case graph.Int16:
			o = argT[int16](c, x, axis, keep, last, isMax)
		case graph.Uint16:
			o = argT[uint16](c, x, axis, keep, last, isMax)
		case graph.Uint32:
			o = argT[uint32](c, x, axis, keep, last, isMax)
		case graph.Uint64:
			o = argT[uint64](c, x, axis, keep, last, isMax)
		default:
			return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
		}
		return []*Tensor{o}, nil
	}
}

func init() {
	mv := func(op string, since, until int64, fn Kernel) { Register("", op, since, until, fn, Native) }
	mv("GatherElements", 11, 0, gatherElements)
	mv("GatherND", 11, 0, gatherND)
	mv("Dropout", 1, 0, dropout)
	mv("Trilu", 14, 0, trilu)
	mv("Constant", 1, 0, constant)
	mv("ConstantOfShape", 9, 0, constantOfShape)
	reg("ScatterElements", 11, 0, scatterElements)
	reg("ScatterND", 11, 0, scatterND)
	reg("Range", 11, 0, rangeOp)
	reg("CumSum", 11, 0, cumsum)
	reg("TopK", 1, 0, topk)
	reg("ArgMax", 1, 0, argOp(true))
	reg("ArgMin", 1, 0, argOp(false))
}
