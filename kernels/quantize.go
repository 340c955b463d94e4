package kernels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// The quantisation ops of the default domain: QuantizeLinear and
// DequantizeLinear (per tensor, per axis, blocked), DynamicQuantizeLinear,
// MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv.
//
//	QuantizeLinear:   y = saturate(round_half_even(x / scale) + zero_point)
//	DequantizeLinear: y = (x - zero_point) * scale
//
// The 8-bit float types take no zero point (it must be 0) and round x /
// scale to the type (saturating unless saturate=0); float4e2m1 adds its
// zero point before rounding. The divisions and products are done in the
// precision ONNX's reference uses: x / scale in the type of x (or of the
// precision attribute), (x - zero_point) * scale in float32.

// quantIndex maps a flat element index of x to the index of its scale
// and zero point: one for all, one per index along axis (a 1-D scale), or
// one per block of block consecutive indices along axis (a scale of x's
// rank, ceil(dim/block) along axis).
type quantIndex struct {
	per, blocked bool
	dim, inner   int // x's size along axis, and after it
	sdim, block  int // blocked: the scale's size along axis, the block
}

func (q *quantIndex) index(i int) int {
	switch {
	case !q.per:
		return 0
	case !q.blocked:
		return (i / q.inner) % q.dim
	}
	a := (i / q.inner) % q.dim
	o := i / (q.inner * q.dim)
	return (o*q.sdim+a/q.block)*q.inner + i%q.inner
}

// newQuantIndex checks scale's shape against x's for axis and block_size.
func newQuantIndex(x, scale *Tensor, axis int64, block int) (*quantIndex, error) {
	if scale.Len() == 1 && len(scale.Shape) <= 1 {
		return &quantIndex{}, nil
	}
	a, err := normAxis(axis, len(x.Shape))
	if err != nil {
		return nil, err
	}
	q := &quantIndex{per: true, dim: x.Shape[a], inner: shapeSize(x.Shape[a+1:])}
	if block <= 0 {
		if len(scale.Shape) != 1 || scale.Shape[0] != q.dim {
			return nil, fmt.Errorf("scale %v: want one value per index of axis %d of %v", scale.Shape, a, x.Shape)
		}
		return q, nil
	}
	if len(scale.Shape) != len(x.Shape) {
		return nil, fmt.Errorf("blocked scale %v: want the rank of %v", scale.Shape, x.Shape)
	}
	for i := range x.Shape {
		want := x.Shape[i]
		if i == a {
			want = (x.Shape[i] + block - 1) / block
		}
		if scale.Shape[i] != want {
			return nil, fmt.Errorf("blocked scale %v for %v, axis %d, block_size %d", scale.Shape, x.Shape, a, block)
		}
	}
	q.blocked, q.sdim, q.block = true, scale.Shape[a], block
	return q, nil
}

// roundTo rounds float32 v to the float type dt as a division in dt would
// (float16, bfloat16: exactly; float32 and float64: unchanged).
func roundTo(dt graph.DataType, v float32) float32 {
	switch dt {
	case graph.Float16:
		return f16to32(f32to16(v))
	case graph.BFloat16:
		return graph.BF16FromFloat32(v).Float32()
	}
	return v
}

func quantizeLinear(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, scale := in[0], in[1]
	zp := optIn(in, 2)
	if !isFloatType(x.DType) || smallFloat(x.DType) {
		return nil, fmt.Errorf("x of %v: %w", x.DType, ErrUnsupportedType)
	}
	out := graph.Uint8
	if dt := c.Int("output_dtype", 0); dt != 0 {
		out = graph.DataType(dt)
	}
	if zp != nil {
		if c.Attr("output_dtype") != nil && zp.DType != out {
			return nil, fmt.Errorf("output_dtype %v differs from the zero point's %v", out, zp.DType)
		}
		out = zp.DType
	}
	lo, hi, isInt := quantRange(out)
	if !isInt && !smallFloat(out) {
		return nil, fmt.Errorf("output type %v: %w", out, ErrUnsupportedType)
	}
	qi, err := newQuantIndex(x, scale, c.Int("axis", 1), int(c.Int("block_size", 0)))
	if err != nil {
		return nil, err
	}
	if zp != nil && !equalShape(zp.Shape, scale.Shape) && !(zp.Len() == 1 && scale.Len() == 1) {
		return nil, fmt.Errorf("zero point %v and scale %v differ in shape", zp.Shape, scale.Shape)
	}
	// x / scale in the precision of x (or of the precision attribute).
	prec := x.DType
	if p := c.Int("precision", 0); p != 0 {
		prec = graph.DataType(p)
	}
	xs, ss := x.Float64s(), scale.Float64s()
	var zs []float64
	if zp != nil {
		zs = zp.Float64s()
	}
	y := c.alloc(out, x.Shape...)
	q := make([]float64, len(xs))
	saturate := c.Int("saturate", 1) != 0
	for i, v := range xs {
		k := qi.index(i)
		var d float64
		if prec == graph.Double {
			d = v / ss[k]
		} else {
			d = float64(roundTo(prec, float32(v)/float32(ss[k])))
		}
		switch {
		case isInt:
			d = math.RoundToEven(d)
			if zs != nil {
				d += zs[k]
			}
			d = math.Max(lo, math.Min(hi, d))
		case out == graph.Float4E2M1 && zs != nil:
			d = float64(float32(d) + float32(zs[k]))
		}
		q[i] = d
	}
	if isInt {
		fromInt64Small(y, floatsToInts(q))
	} else {
		fromFloat64Sat(y, q, saturate, "up")
	}
	return []*Tensor{y}, nil
}

func floatsToInts(v []float64) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// quantRange is the range of an integer quantisation type.
func quantRange(dt graph.DataType) (lo, hi float64, ok bool) {
	switch dt {
	case graph.Uint8:
		return 0, 255, true
	case graph.Int8:
		return -128, 127, true
	case graph.Uint16:
		return 0, 65535, true
	case graph.Int16:
		return -32768, 32767, true
	case graph.Uint4:
		return 0, 15, true
	case graph.Int4:
		return -8, 7, true
	case graph.Uint2:
		return 0, 3, true
	case graph.Int2:
		return -2, 1, true
	case graph.Int32:
		return math.MinInt32, math.MaxInt32, true
	}
	return 0, 0, false
}

func dequantizeLinear(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, scale := in[0], in[1]
	zp := optIn(in, 2)
	if !isFloatType(scale.DType) || smallFloat(scale.DType) {
		return nil, fmt.Errorf("scale of %v: %w", scale.DType, ErrUnsupportedType)
	}
	out := scale.DType
	if dt := c.Int("output_dtype", 0); dt != 0 {
		out = graph.DataType(dt)
	}
	qi, err := newQuantIndex(x, scale, c.Int("axis", 1), int(c.Int("block_size", 0)))
	if err != nil {
		return nil, err
	}
	xs, ss := x.Float64s(), scale.Float64s()
	var zs []float64
	if zp != nil {
		if zp.DType != x.DType {
			return nil, fmt.Errorf("zero point of %v for x of %v", zp.DType, x.DType)
		}
		zs = zp.Float64s()
		if smallFloat(x.DType) && x.DType != graph.Float4E2M1 {
			for _, z := range zs {
				if z != 0 {
					return nil, fmt.Errorf("the zero point of %v must be 0", x.DType)
				}
			}
			zs = nil
		}
		if zs != nil && len(zs) != len(ss) {
			return nil, fmt.Errorf("zero point %v and scale %v differ in shape", zp.Shape, scale.Shape)
		}
	}
	y := c.alloc(out, x.Shape...)
	v := make([]float64, len(xs))
	for i, d := range xs {
		k := qi.index(i)
		dx := float64(float32(d)) // x as float32, as ONNX's reference
		if zs != nil {
			dx -= zs[k]
		}
		p := dx * ss[k]
		if scale.DType != graph.Double && out != graph.Double {
			p = float64(float32(p)) // a float32 product, then the type
		}
		v[i] = p
	}
	fromFloat64(y, v)
	return []*Tensor{y}, nil
}

// dynamicQuantizeLinear quantises float32 x to uint8 with a scale and
// zero point fitted to x's range (extended to include 0), in float32 as
// ONNX's reference computes them.
func dynamicQuantizeLinear(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	if x.DType != graph.Float {
		return nil, fmt.Errorf("x of %v: %w", x.DType, ErrUnsupportedType)
	}
	xs := Data[float32](x)
	var mx, mn float32
	for _, v := range xs {
		mx, mn = max(mx, v), min(mn, v)
	}
	scale := float32(1)
	if mx != mn {
		scale = mx - mn
	}
	scale /= 255
	zp := float32(math.RoundToEven(float64(max(0, min(255, 0-mn/scale)))))
	y := c.alloc(graph.Uint8, x.Shape...)
	d := Data[uint8](y)
	for i, v := range xs {
		q := float32(math.RoundToEven(float64(v/scale))) + zp
		d[i] = uint8(max(0, min(255, q)))
	}
	return []*Tensor{y, Scalar(scale), Scalar(uint8(zp))}, nil
}

// centeredTensor returns t - zp as a float64 tensor: zp has one element,
// or one per index of axis (rows of A: axis -2; columns of B: axis -1).
func centeredTensor(c *Call, t, zp *Tensor, axis int, name string) (*Tensor, error) {
	out := c.alloc(graph.Double, t.Shape...)
	d := Data[float64](out)
	v := t.Float64s()
	copy(d, v)
	if zp == nil {
		return out, nil
	}
	z := zp.Float64s()
	switch {
	case len(z) == 1:
		for i := range d {
			d[i] -= z[0]
		}
	case axis < 0 && len(t.Shape) >= 2 && len(z) == t.Shape[len(t.Shape)+axis] && len(zp.Shape) <= 1:
		inner := 1
		if axis == -2 {
			inner = t.Shape[len(t.Shape)-1]
		}
		dim := len(z)
		for i := range d {
			d[i] -= z[(i/inner)%dim]
		}
	default:
		return nil, fmt.Errorf("%s %v: want one value or one per %s of %v", name, zp.Shape, map[int]string{-2: "row", -1: "column"}[axis], t.Shape)
	}
	return out, nil
}

// intProduct is the exact integer matrix product (numpy ranks) of a - azp
// and b - bzp, in float64.
func intProduct(c *Call, a, b, azp, bzp *Tensor) (*Tensor, error) {
	if !isIntType(a.DType) || !isIntType(b.DType) {
		return nil, fmt.Errorf("A of %v and B of %v: %w", a.DType, b.DType, ErrUnsupportedType)
	}
	ac, err := centeredTensor(c, a, azp, -2, "a_zero_point")
	if err != nil {
		return nil, err
	}
	bc, err := centeredTensor(c, b, bzp, -1, "b_zero_point")
	if err != nil {
		return nil, err
	}
	return matmulNumpy(c, ac, bc, 1, false, false)
}

func isIntType(dt graph.DataType) bool { return dt.IsInt() }

func matMulInteger(c *Call, in []*Tensor) ([]*Tensor, error) {
	p, err := intProduct(c, in[0], in[1], optIn(in, 2), optIn(in, 3))
	if err != nil {
		return nil, err
	}
	y := c.alloc(graph.Int32, p.Shape...)
	d := Data[int32](y)
	for i, v := range Data[float64](p) {
		d[i] = int32(int64(v))
	}
	return []*Tensor{y}, nil
}

// requantMultiplier is a_scale * w_scale / y_scale in the scales' type
// (each operation rounded to it, as numpy computes float16 scales).
func requantMultiplier(dt graph.DataType, a, w, y float64) float64 {
	switch dt {
	case graph.Double:
		return a * w / y
	case graph.Float, graph.Float16, graph.BFloat16:
		m := roundTo(dt, float32(a)*float32(w))
		return float64(roundTo(dt, m/float32(y)))
	}
	return a * w / y
}

// requantize stores round_half_even(acc * mult + zp), saturated, into y.
func requantize(y *Tensor, acc []float64, mult func(i int) float64, zp float64) {
	lo, hi, _ := quantRange(y.DType)
	v := make([]float64, len(acc))
	for i, a := range acc {
		v[i] = math.Max(lo, math.Min(hi, math.RoundToEven(a*mult(i)+zp)))
	}
	fromInt64(y, floatsToInts(v))
}

// scalarOrPer reads a scale or zero point with one value or n.
func scalarOrPer(t *Tensor, n int, name string) ([]float64, error) {
	if t == nil {
		return []float64{0}, nil
	}
	if t.Len() != 1 && t.Len() != n {
		return nil, fmt.Errorf("%s %v: want 1 or %d values", name, t.Shape, n)
	}
	return t.Float64s(), nil
}

func qLinearMatMul(c *Call, in []*Tensor) ([]*Tensor, error) {
	a, as, azp, b, bs, bzp, ys, yzp := in[0], in[1], optIn(in, 2), in[3], in[4], optIn(in, 5), in[6], optIn(in, 7)
	if smallFloat(a.DType) || smallFloat(b.DType) {
		return nil, fmt.Errorf("QLinearMatMul of %v and %v: %w", a.DType, b.DType, ErrUnsupportedType)
	}
	p, err := intProduct(c, a, b, azp, bzp)
	if err != nil {
		return nil, err
	}
	n := 1 // columns of the product (a scalar for vector . vector)
	if len(p.Shape) > 0 {
		n = p.Shape[len(p.Shape)-1]
	}
	asv, err := scalarOrPer(as, 1, "a_scale")
	if err != nil {
		return nil, err
	}
	bsv, err := scalarOrPer(bs, n, "b_scale")
	if err != nil {
		return nil, err
	}
	ysv, err := scalarOrPer(ys, 1, "y_scale")
	if err != nil {
		return nil, err
	}
	mult := make([]float64, len(bsv))
	for j, s := range bsv {
		mult[j] = requantMultiplier(as.DType, asv[0], s, ysv[0])
	}
	out, zp := a.DType, 0.0
	if yzp != nil {
		if yzp.Len() == 0 {
			return nil, fmt.Errorf("y_zero_point is empty")
		}
		out, zp = yzp.DType, yzp.Float64s()[0]
	}
	y := c.alloc(out, p.Shape...)
	requantize(y, Data[float64](p), func(i int) float64 { return mult[(i%n)%len(mult)] }, zp)
	return []*Tensor{y}, nil
}

// intConv is the exact integer convolution of x - xzp and w - wzp (wzp
// one value or one per output channel), in float64.
func intConv(c *Call, x, w, xzp, wzp, bias *Tensor) (*Tensor, *convGeom, error) {
	if !isIntType(x.DType) || !isIntType(w.DType) {
		return nil, nil, fmt.Errorf("x of %v and w of %v: %w", x.DType, w.DType, ErrUnsupportedType)
	}
	g, err := convSetup(c, x, w)
	if err != nil {
		return nil, nil, err
	}
	xc, err := centeredTensor(c, x, xzp, 0, "x_zero_point")
	if err != nil {
		return nil, nil, err
	}
	wd := w.Float64s()
	if wzp != nil {
		z := wzp.Float64s()
		per := shapeSize(w.Shape[1:])
		switch {
		case len(z) == 1:
			for i := range wd {
				wd[i] -= z[0]
			}
		case len(z) == g.cout:
			for i := range wd {
				wd[i] -= z[i/per]
			}
		default:
			return nil, nil, fmt.Errorf("w_zero_point %v: want 1 or %d values", wzp.Shape, g.cout)
		}
	}
	var b []float64
	if bias != nil {
		if bias.Len() != g.cout {
			return nil, nil, fmt.Errorf("B %v: want %d values", bias.Shape, g.cout)
		}
		b = bias.Float64s()
	}
	y := c.alloc(graph.Double, append([]int{g.n, g.cout}, g.out...)...)
	convT(Data[float64](y), Data[float64](xc), wd, b, g.n, g.cin, g.cout, g.group, g.in, g.ks, g.out, g.strides, g.dil, g.pb, false)
	return y, g, nil
}

func convInteger(c *Call, in []*Tensor) ([]*Tensor, error) {
	p, _, err := intConv(c, in[0], in[1], optIn(in, 2), optIn(in, 3), nil)
	if err != nil {
		return nil, err
	}
	y := c.alloc(graph.Int32, p.Shape...)
	d := Data[int32](y)
	for i, v := range Data[float64](p) {
		d[i] = int32(int64(v))
	}
	return []*Tensor{y}, nil
}

func qLinearConv(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, xs, xzp, w, ws, wzp, ys, yzp := in[0], in[1], in[2], in[3], in[4], in[5], in[6], in[7]
	p, g, err := intConv(c, x, w, xzp, wzp, optIn(in, 8))
	if err != nil {
		return nil, err
	}
	xsv, err := scalarOrPer(xs, 1, "x_scale")
	if err != nil {
		return nil, err
	}
	wsv, err := scalarOrPer(ws, g.cout, "w_scale")
	if err != nil {
		return nil, err
	}
	ysv, err := scalarOrPer(ys, 1, "y_scale")
	if err != nil {
		return nil, err
	}
	mult := make([]float64, len(wsv))
	for j, s := range wsv {
		mult[j] = requantMultiplier(xs.DType, xsv[0], s, ysv[0])
	}
	out, zp := x.DType, 0.0
	if yzp != nil {
		if yzp.Len() == 0 {
			return nil, fmt.Errorf("y_zero_point is empty")
		}
		out, zp = yzp.DType, yzp.Float64s()[0]
	}
	plane := shapeSize(g.out)
	y := c.alloc(out, p.Shape...)
	requantize(y, Data[float64](p), func(i int) float64 { return mult[((i/plane)%g.cout)%len(mult)] }, zp)
	return []*Tensor{y}, nil
}

func init() {
	Register("", "QuantizeLinear", 10, 0, quantizeLinear, Native)
	Register("", "DequantizeLinear", 10, 0, dequantizeLinear, Native)
	reg("DynamicQuantizeLinear", 11, 0, dynamicQuantizeLinear)
	// Native: their float inputs are scales, whose type (float16 too)
	// sets the precision of the requantisation multiplier.
	Register("", "MatMulInteger", 10, 0, matMulInteger, Native)
	Register("", "ConvInteger", 10, 0, convInteger, Native)
	Register("", "QLinearMatMul", 10, 0, qLinearMatMul, Native)
	Register("", "QLinearConv", 10, 0, qLinearConv, Native)
}
