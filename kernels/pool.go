package kernels

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

// Pooling: MaxPool, AveragePool, LpPool, their global forms and MaxUnpool,
// over N-D inputs in NC[D...] layout.
//
// Output size along a spatial axis of size in, with kernel k, stride s,
// dilation d (effective kernel ek = (k-1)*d+1) and pads pb, pe:
//
//	explicit pads: floor((in+pb+pe-ek)/s) + 1, or with ceil_mode the
//	ceiling, less one when that last window would start past in+pb;
//	SAME_UPPER/SAME_LOWER: ceil(in/s), total padding (out-1)*s+ek-in
//	split in half, the odd one at the end (UPPER) or the beginning;
//	VALID: ceil((in-ek+1)/s), no padding.
//
// Output o reads the taps o*s - pb + j*d (j < k) that fall inside the
// input. AveragePool divides by their number, or with count_include_pad
// by the number of taps before in+pe (the declared padding counts, the
// room ceil_mode adds does not), as ONNX's reference and ONNX Runtime do.

// poolGeom is the geometry of a pooling node.
type poolGeom struct {
	in, k, s, d, pb, pe, out []int
}

// spatialInts reads an ints attribute with one value per spatial axis
// (def when absent), each at least lo.
func spatialInts(c *Call, name string, sp int, def, lo int) ([]int, error) {
	v := c.Ints(name)
	out := make([]int, sp)
	if v == nil {
		for i := range out {
			out[i] = def
		}
		return out, nil
	}
	if len(v) != sp {
		return nil, fmt.Errorf("%s %v: want %d values for %d spatial axes", name, v, sp, sp)
	}
	for i, x := range v {
		if x < int64(lo) || x > math.MaxInt32 {
			return nil, fmt.Errorf("%s %v: each must be in [%d, 2^31)", name, v, lo)
		}
		out[i] = int(x)
	}
	return out, nil
}

// poolGeometry reads a pooling node's kernel_shape, strides, dilations,
// pads, auto_pad and ceil_mode for input x.
func poolGeometry(c *Call, x *Tensor) (*poolGeom, error) {
	if len(x.Shape) < 3 {
		return nil, fmt.Errorf("input %v: pooling needs N, C and at least one spatial axis", x.Shape)
	}
	sp := len(x.Shape) - 2
	ks := c.Ints("kernel_shape")
	if len(ks) != sp {
		return nil, fmt.Errorf("kernel_shape %v: want %d values", ks, sp)
	}
	g := &poolGeom{in: x.Shape[2:]}
	var err error
	if g.k, err = spatialInts(c, "kernel_shape", sp, 1, 1); err != nil {
		return nil, err
	}
	if g.s, err = spatialInts(c, "strides", sp, 1, 1); err != nil {
		return nil, err
	}
	if g.d, err = spatialInts(c, "dilations", sp, 1, 1); err != nil {
		return nil, err
	}
	pads := c.Ints("pads")
	g.pb, g.pe = make([]int, sp), make([]int, sp)
	if pads != nil {
		if len(pads) != 2*sp {
			return nil, fmt.Errorf("pads %v: want %d values", pads, 2*sp)
		}
		for _, p := range pads {
			if p < 0 || p > math.MaxInt32 {
				return nil, fmt.Errorf("pads %v: each must be in [0, 2^31)", pads)
			}
		}
		for i := range sp {
			g.pb[i], g.pe[i] = int(pads[i]), int(pads[i+sp])
		}
	}
	ceil := c.Int("ceil_mode", 0) != 0
	autoPad := c.String("auto_pad", "NOTSET")
	g.out = make([]int, sp)
	for i := range sp {
		ek := (g.k[i]-1)*g.d[i] + 1
		in, s := g.in[i], g.s[i]
		switch autoPad {
		case "SAME_UPPER", "SAME_LOWER":
			o := (in + s - 1) / s
			total := max((o-1)*s+ek-in, 0)
			if autoPad == "SAME_UPPER" {
				g.pb[i], g.pe[i] = total/2, total-total/2
			} else {
				g.pb[i], g.pe[i] = total-total/2, total/2
			}
			g.out[i] = o
		case "VALID":
			g.pb[i], g.pe[i] = 0, 0
			g.out[i] = max((in-ek+s)/s, 0)
		case "NOTSET", "":
			span := in + g.pb[i] + g.pe[i] - ek
			if span < 0 {
				g.out[i] = 0
				break
			}
			o := span/s + 1
			if ceil && span%s != 0 {
				o++
				if (o-1)*s >= in+g.pb[i] {
					o--
				}
			}
			g.out[i] = o
		default:
			return nil, fmt.Errorf("auto_pad %q", autoPad)
		}
	}
	return g, nil
}

// floorDiv is a/b rounded down (b > 0).
func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// taps lists, for each output index along axis i, the first input
// coordinate the window reads, the number of taps inside the input, and
// the number before in+pe (for count_include_pad).
func (g *poolGeom) taps(i int) (first, n, padded []int) {
	first, n, padded = make([]int, g.out[i]), make([]int, g.out[i]), make([]int, g.out[i])
	k, d := g.k[i], g.d[i]
	for o := range g.out[i] {
		start := o*g.s[i] - g.pb[i]
		// Taps j in [j0, j1] fall inside [0, in); those below jp before
		// in+pe.
		j0 := 0
		if start < 0 {
			j0 = (-start + d - 1) / d
		}
		j1 := k - 1
		if lim := g.in[i] - 1 - start; lim < (k-1)*d {
			j1 = floorDiv(lim, d)
		}
		jp := k
		if lim := g.in[i] + g.pe[i] - 1 - start; lim < (k-1)*d {
			jp = max(floorDiv(lim, d)+1, 0)
		}
		padded[o] = jp
		if j1 >= j0 {
			first[o], n[o] = start+j0*d, j1-j0+1
		}
	}
	return first, n, padded
}

type poolKind int

const (
	poolMax poolKind = iota
	poolAvg
	poolLp
)

// poolWindows calls f for every output position of one (n, c) plane: the
// output's flat index within the plane, the input offsets of the window's
// taps (in offs, reused), and the number of taps counted with padding.
func (g *poolGeom) poolWindows(f func(o int, offs []int, padded int)) {
	sp := len(g.in)
	firsts, ns, pads := make([][]int, sp), make([][]int, sp), make([][]int, sp)
	for i := range sp {
		firsts[i], ns[i], pads[i] = g.taps(i)
	}
	stride := make([]int, sp) // input strides of the spatial axes
	st := 1
	for i := sp - 1; i >= 0; i-- {
		stride[i] = st
		st *= g.in[i]
	}
	total := shapeSize(g.out)
	oi := make([]int, sp)
	ti := make([]int, sp)
	var offs []int
	for o := range total {
		offs = offs[:0]
		cnt, padded := 1, 1
		for i := range sp {
			cnt *= ns[i][oi[i]]
			padded *= pads[i][oi[i]]
		}
		if cnt > 0 {
			clear(ti)
			for {
				off := 0
				for i := range sp {
					off += (firsts[i][oi[i]] + ti[i]*g.d[i]) * stride[i]
				}
				offs = append(offs, off)
				k := sp - 1
				for ; k >= 0; k-- {
					ti[k]++
					if ti[k] < ns[k][oi[k]] {
						break
					}
					ti[k] = 0
				}
				if k < 0 {
					break
				}
			}
		}
		f(o, offs, padded)
		for k := sp - 1; k >= 0; k-- {
			oi[k]++
			if oi[k] < g.out[k] {
				break
			}
			oi[k] = 0
		}
	}
}

// poolFloat computes AveragePool or LpPool (in float64) into y.
func poolFloat[T Float](y, x []T, planes, inPlane, outPlane int, g *poolGeom, kind poolKind, includePad bool, p float64) {
	for pl := range planes {
		xs, ys := x[pl*inPlane:(pl+1)*inPlane], y[pl*outPlane:(pl+1)*outPlane]
		g.poolWindows(func(o int, offs []int, padded int) {
			var acc float64
			switch kind {
			case poolAvg:
				for _, off := range offs {
					acc += float64(xs[off])
				}
				n := len(offs)
				if includePad {
					n = padded
				}
				acc /= float64(n)
			case poolLp:
				for _, off := range offs {
					acc += math.Pow(math.Abs(float64(xs[off])), p)
				}
				acc = math.Pow(acc, 1/p)
			}
			ys[o] = T(acc)
		})
	}
}

// poolMaxT computes MaxPool into y and, when idx is not nil, the flat
// index of each maximum (the first one) in the whole input (row-major
// spatial order, or column-major with colMajor).
func poolMaxT[T Num](y []T, idx []int64, x []T, planes, inPlane, outPlane int, g *poolGeom, colMajor bool) {
	sp := len(g.in)
	coords := make([]int, sp)
	for pl := range planes {
		xs, ys := x[pl*inPlane:(pl+1)*inPlane], y[pl*outPlane:(pl+1)*outPlane]
		g.poolWindows(func(o int, offs []int, _ int) {
			if len(offs) == 0 {
				ys[o] = 0
				if idx != nil {
					idx[pl*outPlane+o] = -1
				}
				return
			}
			best := offs[0]
			for _, off := range offs[1:] {
				if xs[off] > xs[best] {
					best = off
				}
			}
			ys[o] = xs[best]
			if idx == nil {
				return
			}
			flat := best
			if colMajor {
				// The same element numbered with the first spatial axis
				// fastest.
				flat = 0
				rest, mul := best, 1
				for i := sp - 1; i >= 0; i-- {
					coords[i] = rest % g.in[i]
					rest /= g.in[i]
				}
				for i := range sp {
					flat += coords[i] * mul
					mul *= g.in[i]
				}
			}
			idx[pl*outPlane+o] = int64(pl*inPlane + flat)
		})
	}
}

func poolKernel(kind poolKind) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		x := in[0]
		g, err := poolGeometry(c, x)
		if err != nil {
			return nil, err
		}
		return pool(c, x, g, kind)
	}
}

// pool runs a pooling of the given geometry on x.
func pool(c *Call, x *Tensor, g *poolGeom, kind poolKind) ([]*Tensor, error) {
	shape := slices.Concat(x.Shape[:2], g.out)
	planes := x.Shape[0] * x.Shape[1]
	inPlane, outPlane := shapeSize(g.in), shapeSize(g.out)
	y := c.alloc(x.DType, shape...)
	if kind == poolMax {
		var idx []int64
		var ind *Tensor
		if c.HasOutput(1) {
			ind = c.alloc(graph.Int64, shape...)
			idx = Data[int64](ind)
		}
		colMajor := c.Int("storage_order", 0) == 1
		switch x.DType {
		case graph.Float:
			poolMaxT(Data[float32](y), idx, Data[float32](x), planes, inPlane, outPlane, g, colMajor)
		case graph.Double:
			poolMaxT(Data[float64](y), idx, Data[float64](x), planes, inPlane, outPlane, g, colMajor)
		case graph.Int8:
			poolMaxT(Data[int8](y), idx, Data[int8](x), planes, inPlane, outPlane, g, colMajor)
		case graph.Uint8:
			poolMaxT(Data[uint8](y), idx, Data[uint8](x), planes, inPlane, outPlane, g, colMajor)
		default:
			return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
		}
		return []*Tensor{y, ind}, nil
	}
	includePad := c.Int("count_include_pad", 0) != 0
	p := 2.0
	if a := c.Attr("p"); a != nil {
		p = float64(a.Int())
		if a.Type() == graph.AttrFloat { // LpPool and GlobalLpPool 1
			p = float64(a.Float())
		}
	}
	switch x.DType {
	case graph.Float:
		poolFloat(Data[float32](y), Data[float32](x), planes, inPlane, outPlane, g, kind, includePad, p)
	case graph.Double:
		poolFloat(Data[float64](y), Data[float64](x), planes, inPlane, outPlane, g, kind, includePad, p)
	default:
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
	return []*Tensor{y}, nil
}

// globalPool pools over all spatial axes (GlobalAveragePool,
// GlobalMaxPool, GlobalLpPool).
func globalPool(kind poolKind) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		x := in[0]
		if len(x.Shape) < 3 {
			return nil, fmt.Errorf("input %v: pooling needs N, C and at least one spatial axis", x.Shape)
		}
		sp := len(x.Shape) - 2
		g := &poolGeom{in: x.Shape[2:], k: slices.Clone(x.Shape[2:]), s: make([]int, sp), d: make([]int, sp),
			pb: make([]int, sp), pe: make([]int, sp), out: make([]int, sp)}
		for i := range sp {
			g.s[i], g.d[i], g.out[i] = 1, 1, 1
			if g.in[i] == 0 {
				g.k[i] = 1 // an empty axis: windows without taps
			}
		}
		return pool(c, x, g, kind)
	}
}

// maxUnpool scatters X to the positions its indices name in a zero tensor
// of the shape MaxPool's input had, computed from kernel_shape, strides
// and pads; with output_shape that tensor is the leading corner of a
// larger zero output, as ONNX's reference places it.
func maxUnpool(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, ind := in[0], in[1]
	if len(x.Shape) < 3 || !equalShape(x.Shape, ind.Shape) {
		return nil, fmt.Errorf("X %v and I %v must have the same shape of rank 3 or more", x.Shape, ind.Shape)
	}
	sp := len(x.Shape) - 2
	if c.Ints("kernel_shape") == nil {
		return nil, fmt.Errorf("kernel_shape is required")
	}
	k, err := spatialInts(c, "kernel_shape", sp, 1, 1)
	if err != nil {
		return nil, err
	}
	s, err := spatialInts(c, "strides", sp, 1, 1)
	if err != nil {
		return nil, err
	}
	pads, err := spatialInts2(c, "pads", sp)
	if err != nil {
		return nil, err
	}
	inferred := slices.Clone(x.Shape)
	for i := range sp {
		inferred[i+2] = (x.Shape[i+2]-1)*s[i] + k[i] - pads[i] - pads[i+sp]
		if inferred[i+2] < 0 {
			return nil, fmt.Errorf("output size %d along spatial axis %d", inferred[i+2], i)
		}
	}
	shape := inferred
	if os := optIn(in, 2); os != nil {
		v := os.Int64s()
		if len(v) != len(x.Shape) {
			return nil, fmt.Errorf("output_shape %v: want %d values", v, len(x.Shape))
		}
		shape = make([]int, len(v))
		for i, d := range v {
			if d < int64(inferred[i]) || d > math.MaxInt32 {
				return nil, fmt.Errorf("output_shape %v: smaller than the pooled input's shape %v", v, inferred)
			}
			shape[i] = int(d)
		}
	}
	block := c.alloc(x.DType, inferred...)
	n := shapeSize(inferred)
	vals := make([]float64, n)
	xs := x.Float64s()
	for i, j := range ind.Int64s() {
		if j < 0 || j >= int64(n) {
			return nil, fmt.Errorf("index %d outside the pooled input of %d elements", j, n)
		}
		vals[j] = xs[i]
	}
	fromFloat64(block, vals)
	if equalShape(shape, inferred) {
		return []*Tensor{block}, nil
	}
	y := c.zeros(x.DType, shape...)
	strides := make([]int, len(shape))
	st := 1
	for i := len(shape) - 1; i >= 0; i-- {
		strides[i] = st
		st *= shape[i]
	}
	// Copy block's rows (its last axis) into y at the same coordinates.
	last := inferred[len(inferred)-1]
	idx := make([]int, len(inferred))
	for o := 0; o < n && last > 0; o += last {
		off := 0
		for i := range idx {
			off += idx[i] * strides[i]
		}
		copyAny(y, off, block, o, last)
		for a := len(idx) - 2; a >= 0; a-- {
			idx[a]++
			if idx[a] < inferred[a] {
				break
			}
			idx[a] = 0
		}
	}
	return []*Tensor{y}, nil
}

// spatialInts2 reads a pads-like attribute of 2*sp values (zeros when
// absent).
func spatialInts2(c *Call, name string, sp int) ([]int, error) {
	v := c.Ints(name)
	out := make([]int, 2*sp)
	if v == nil {
		return out, nil
	}
	if len(v) != 2*sp {
		return nil, fmt.Errorf("%s %v: want %d values", name, v, 2*sp)
	}
	for i, x := range v {
		if x < 0 || x > math.MaxInt32 {
			return nil, fmt.Errorf("%s %v: each must be in [0, 2^31)", name, v)
		}
		out[i] = int(x)
	}
	return out, nil
}

func init() {
	reg("MaxPool", 1, 0, poolKernel(poolMax))
	reg("AveragePool", 1, 0, poolKernel(poolAvg))
	reg("LpPool", 1, 0, poolKernel(poolLp))
	reg("GlobalMaxPool", 1, 0, globalPool(poolMax))
	reg("GlobalAveragePool", 1, 0, globalPool(poolAvg))
	reg("GlobalLpPool", 1, 0, globalPool(poolLp))
	reg("MaxUnpool", 9, 0, maxUnpool)
}
