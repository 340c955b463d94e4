package kernels

import (
	"fmt"
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// The normalisations of convolutional models: BatchNormalization,
// InstanceNormalization, GroupNormalization, LpNormalization,
// MeanVarianceNormalization and LRN. Their statistics are computed in
// float64 (half types reach these kernels as float32) and the outputs
// rounded once to the input's type.

// channelStats returns the mean and the population variance of x (N, C,
// spatial...) over the groups of elements that share an index: each
// element (n, c, s) belongs to group key(n, c); there are ngroups.
func channelStats(x []float64, n, ch, inner, ngroups int, key func(n, c int) int) (mean, variance []float64) {
	mean, variance = make([]float64, ngroups), make([]float64, ngroups)
	count := make([]float64, ngroups)
	for b := range n {
		for c := range ch {
			g := key(b, c)
			row := x[(b*ch+c)*inner : (b*ch+c+1)*inner]
			for _, v := range row {
				mean[g] += v
			}
			count[g] += float64(inner)
		}
	}
	// A group without elements (an empty batch) has the mean and variance
	// 0/0 = NaN, as numpy's and ONNX Runtime's.
	for g := range mean {
		mean[g] /= count[g]
	}
	// The variance from the deviations (two passes), as numpy's var.
	for b := range n {
		for c := range ch {
			g := key(b, c)
			row := x[(b*ch+c)*inner : (b*ch+c+1)*inner]
			for _, v := range row {
				d := v - mean[g]
				variance[g] += d * d
			}
		}
	}
	for g := range variance {
		variance[g] /= count[g]
	}
	return mean, variance
}

// ncs splits x's shape into N, C and the size of the remaining axes.
func ncs(x *Tensor) (n, c, inner int, err error) {
	if len(x.Shape) < 2 {
		return 0, 0, 0, fmt.Errorf("input %v: need N and C axes", x.Shape)
	}
	return x.Shape[0], x.Shape[1], shapeSize(x.Shape[2:]), nil
}

// perChannel reads a 1-D input of C values (name for errors).
func perChannel(t *Tensor, ch int, name string) ([]float64, error) {
	if t == nil || t.Len() != ch {
		return nil, fmt.Errorf("%s %v: want %d values (one per channel)", name, t, ch)
	}
	return t.Float64s(), nil
}

// normalizeChannels sets y = scale[c]*(x-mean[g])/sqrt(var[g]+eps)+bias[c]
// with g = key(n, c).
func normalizeChannels(y, x []float64, n, ch, inner int, scale, bias, mean, variance []float64, eps float64, key func(n, c int) int) {
	for b := range n {
		for c := range ch {
			g := key(b, c)
			inv := 1 / math.Sqrt(variance[g]+eps)
			m, s, bb := mean[g], scale[c], bias[c]
			off := (b*ch + c) * inner
			for i := off; i < off+inner; i++ {
				y[i] = s*(x[i]-m)*inv + bb
			}
		}
	}
}

func floatOut(c *Call, dt graph.DataType, shape []int, v []float64) (*Tensor, error) {
	if !isFloatType(dt) || smallFloat(dt) {
		return nil, fmt.Errorf("%v: %w", dt, ErrUnsupportedType)
	}
	t := c.alloc(dt, shape...)
	if c != nil && c.half != 0 && dt == graph.Float {
		// Rounded to float16/bfloat16 next: round once.
		d := Data[float32](t)
		for i, x := range v {
			d[i] = roundTo32For16(x)
		}
		return t, nil
	}
	fromFloat64(t, v)
	return t, nil
}

func batchNorm(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	n, ch, inner, err := ncs(x)
	if err != nil {
		return nil, err
	}
	if !isFloatType(x.DType) {
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
	var p [4][]float64
	for i, name := range []string{"scale", "B", "input_mean", "input_var"} {
		if p[i], err = perChannel(optIn(in, 1+i), ch, name); err != nil {
			return nil, err
		}
	}
	scale, bias, mean, variance := p[0], p[1], p[2], p[3]
	eps := float64(c.Float("epsilon", 1e-5))
	momentum := float64(c.Float("momentum", 0.9))
	training := c.Opset >= 14 && c.Int("training_mode", 0) != 0 ||
		c.Opset < 14 && c.NumOutputs() > 1 || c.Opset < 7 && c.Int("is_test", 0) == 0 && c.NumOutputs() > 1
	xs := x.Float64s()
	y := make([]float64, len(xs))
	perC := func(_, c int) int { return c }
	if !training {
		normalizeChannels(y, xs, n, ch, inner, scale, bias, mean, variance, eps, perC)
		o, err := floatOut(c, x.DType, x.Shape, y)
		return []*Tensor{o}, err
	}
	// Training: normalise with the batch's statistics and update the
	// running ones (running = running*momentum + batch*(1-momentum)).
	bm, bv := channelStats(xs, n, ch, inner, ch, perC)
	normalizeChannels(y, xs, n, ch, inner, scale, bias, bm, bv, eps, perC)
	rm, rv := make([]float64, ch), make([]float64, ch)
	for i := range ch {
		rm[i] = mean[i]*momentum + bm[i]*(1-momentum)
		rv[i] = variance[i]*momentum + bv[i]*(1-momentum)
	}
	outs := make([]*Tensor, 0, 5)
	o, err := floatOut(c, x.DType, x.Shape, y)
	if err != nil {
		return nil, err
	}
	outs = append(outs, o)
	stats := [][]float64{rm, rv}
	if c.Opset < 14 {
		stats = append(stats, bm, bv) // saved_mean, saved_var
	}
	for i, v := range stats {
		if 1+i >= c.NumOutputs() {
			break
		}
		dt := x.DType
		if src := optIn(in, 3+min(i, 1)); src != nil && i < 2 {
			dt = src.DType
		}
		t, err := floatOut(c, dt, []int{ch}, v)
		if err != nil {
			return nil, err
		}
		outs = append(outs, t)
	}
	return outs, nil
}

func instanceNorm(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	n, ch, inner, err := ncs(x)
	if err != nil {
		return nil, err
	}
	scale, err := perChannel(in[1], ch, "scale")
	if err != nil {
		return nil, err
	}
	bias, err := perChannel(in[2], ch, "B")
	if err != nil {
		return nil, err
	}
	xs := x.Float64s()
	key := func(b, c int) int { return b*ch + c }
	mean, variance := channelStats(xs, n, ch, inner, n*ch, key)
	y := make([]float64, len(xs))
	normalizeChannels(y, xs, n, ch, inner, scale, bias, mean, variance, float64(c.Float("epsilon", 1e-5)), key)
	o, err := floatOut(c, x.DType, x.Shape, y)
	return []*Tensor{o}, err
}

// groupNorm normalises each group of C/num_groups channels of each
// sample; scale and bias are per channel (opset 21) or per group (18).
func groupNorm(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	n, ch, inner, err := ncs(x)
	if err != nil {
		return nil, err
	}
	groups := int(c.Int("num_groups", 0))
	if groups <= 0 || ch%groups != 0 {
		return nil, fmt.Errorf("num_groups %d must divide the %d channels", groups, ch)
	}
	per := ch / groups
	var scale, bias []float64
	if c.Opset < 21 {
		sg, err := perChannel(in[1], groups, "scale (one per group before opset 21)")
		if err != nil {
			return nil, err
		}
		bg, err := perChannel(in[2], groups, "bias (one per group before opset 21)")
		if err != nil {
			return nil, err
		}
		scale, bias = make([]float64, ch), make([]float64, ch)
		for i := range ch {
			scale[i], bias[i] = sg[i/per], bg[i/per]
		}
	} else {
		if scale, err = perChannel(in[1], ch, "scale"); err != nil {
			return nil, err
		}
		if bias, err = perChannel(in[2], ch, "bias"); err != nil {
			return nil, err
		}
	}
	xs := x.Float64s()
	key := func(b, c int) int { return b*groups + c/per }
	mean, variance := channelStats(xs, n, ch, inner, n*groups, key)
	y := make([]float64, len(xs))
	normalizeChannels(y, xs, n, ch, inner, scale, bias, mean, variance, float64(c.Float("epsilon", 1e-5)), key)
	o, err := floatOut(c, x.DType, x.Shape, y)
	return []*Tensor{o}, err
}

// lpNorm divides x by its Lp norm along axis ((sum |x|^p)^(1/p), p 1 or
// 2); a zero norm gives 0.
func lpNorm(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	axis, err := normAxis(c.Int("axis", -1), len(x.Shape))
	if err != nil {
		return nil, err
	}
	p := c.Int("p", 2)
	if p != 1 && p != 2 {
		return nil, fmt.Errorf("p=%d: must be 1 or 2", p)
	}
	outer, dim, inner := shapeSize(x.Shape[:axis]), x.Shape[axis], shapeSize(x.Shape[axis+1:])
	xs := x.Float64s()
	y := make([]float64, len(xs))
	for o := range outer {
		for i := range inner {
			base := o*dim*inner + i
			var s float64
			for j := range dim {
				v := math.Abs(xs[base+j*inner])
				if p == 2 {
					v *= v
				}
				s += v
			}
			if p == 2 {
				s = math.Sqrt(s)
			}
			for j := range dim {
				if s != 0 {
					y[base+j*inner] = xs[base+j*inner] / s
				}
			}
		}
	}
	o, err := floatOut(c, x.DType, x.Shape, y)
	return []*Tensor{o}, err
}

// mvn is MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over
// axes (default N and the spatial axes of an NCHW input), as ONNX's
// function body computes it.
func mvn(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	axes := c.Ints("axes")
	if axes == nil {
		axes = []int64{0, 2, 3}
	}
	ax, err := normAxes(axes, len(x.Shape))
	if err != nil {
		return nil, err
	}
	reduced := make([]bool, len(x.Shape))
	for _, a := range ax {
		reduced[a] = true
	}
	// Group key of each element: its index over the kept axes.
	xs := x.Float64s()
	n := len(xs)
	keys := make([]int, n)
	ngroups := 1
	for a := range x.Shape {
		if !reduced[a] {
			ngroups *= x.Shape[a]
		}
	}
	idx := make([]int, len(x.Shape))
	for i := range n {
		k := 0
		for a, d := range x.Shape {
			if !reduced[a] {
				k = k*d + idx[a]
			}
		}
		keys[i] = k
		for a := len(idx) - 1; a >= 0; a-- {
			idx[a]++
			if idx[a] < x.Shape[a] {
				break
			}
			idx[a] = 0
		}
	}
	mean, variance, count := make([]float64, ngroups), make([]float64, ngroups), make([]float64, ngroups)
	for i, v := range xs {
		mean[keys[i]] += v
		count[keys[i]]++
	}
	for g := range mean {
		mean[g] /= max(count[g], 1)
	}
	for i, v := range xs {
		d := v - mean[keys[i]]
		variance[keys[i]] += d * d
	}
	y := make([]float64, n)
	for i, v := range xs {
		g := keys[i]
		y[i] = (v - mean[g]) / (math.Sqrt(variance[g]/max(count[g], 1)) + 1e-9)
	}
	o, err := floatOut(c, x.DType, x.Shape, y)
	return []*Tensor{o}, err
}

// lrn is local response normalisation across channels: y = x / (bias +
// alpha/size * sum of x² over the channels c-floor((size-1)/2) ..
// c+ceil((size-1)/2))^beta.
func lrn(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	n, ch, inner, err := ncs(x)
	if err != nil {
		return nil, err
	}
	size := int(c.Int("size", 0))
	if size <= 0 {
		return nil, fmt.Errorf("size %d must be positive", size)
	}
	alpha, beta, bias := float64(c.Float("alpha", 1e-4)), float64(c.Float("beta", 0.75)), float64(c.Float("bias", 1))
	lo, hi := (size-1)/2, (size-1)-(size-1)/2
	xs := x.Float64s()
	y := make([]float64, len(xs))
	for b := range n {
		for cc := range ch {
			c0, c1 := max(0, cc-lo), min(ch-1, cc+hi)
			for i := range inner {
				var s float64
				for k := c0; k <= c1; k++ {
					v := xs[(b*ch+k)*inner+i]
					s += v * v
				}
				j := (b*ch+cc)*inner + i
				y[j] = xs[j] / math.Pow(bias+alpha/float64(size)*s, beta)
			}
		}
	}
	o, err := floatOut(c, x.DType, x.Shape, y)
	return []*Tensor{o}, err
}

func init() {
	reg("BatchNormalization", 1, 0, batchNorm)
	reg("InstanceNormalization", 1, 0, instanceNorm)
	reg("GroupNormalization", 18, 0, groupNorm)
	reg("LpNormalization", 1, 0, lpNorm)
	reg("MeanVarianceNormalization", 1, 0, mvn)
	reg("LRN", 1, 0, lrn)
}
