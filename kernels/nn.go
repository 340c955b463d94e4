package kernels

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

// softmaxRows computes softmax (or log-softmax) over rows of length d whose
// elements are inner apart (row r starts at base(r)).
func softmaxT[T Float](dst, src []T, outer, d, inner int, log bool) {
	for o := range outer {
		for in := range inner {
			base := o*d*inner + in
			m := src[base]
			for j := 1; j < d; j++ {
				m = max(m, src[base+j*inner])
			}
			var s float64
			for j := range d {
				p := base + j*inner
				e := math.Exp(float64(src[p]) - float64(m))
				if !log {
					dst[p] = T(e)
				}
				s += e
			}
			if log {
				ls := math.Log(s)
				for j := range d {
					p := base + j*inner
					dst[p] = T(float64(src[p]) - float64(m) - ls)
				}
				continue
			}
			inv := T(1 / s)
			for j := range d {
				dst[base+j*inner] *= inv
			}
		}
	}
}

// rowMax is the largest element of x (len(x) > 0), NaNs ignored: a NaN
// makes the softmax row NaN through its sum anyway. Four independent
// maxima keep the comparisons from waiting on each other.
func rowMax(x []float32) float32 {
	m0 := x[0]
	m1, m2, m3 := m0, m0, m0
	i := 0
	for ; i+4 <= len(x); i += 4 {
		v := x[i : i+4 : i+4]
		if v[0] > m0 {
			m0 = v[0]
		}
		if v[1] > m1 {
			m1 = v[1]
		}
		if v[2] > m2 {
			m2 = v[2]
		}
		if v[3] > m3 {
			m3 = v[3]
		}
	}
	for ; i < len(x); i++ {
		if x[i] > m0 {
			m0 = x[i]
		}
	}
	if m1 > m0 {
		m0 = m1
	}
	if m3 > m2 {
		m2 = m3
	}
	if m2 > m0 {
		m0 = m2
	}
	return m0
}

// softmaxFast32 is the contiguous float32 case (inner == 1) for rows
// [r0, r1): the max, then e^(x-max) stored and summed in one pass, then
// the scaling (log: x - max - log(sum), the exponentials only summed).
func softmaxFast32(dst, src []float32, r0, r1, d int, log bool) {
	if 2*d <= vecChunk {
		softmaxShort32(dst, src, r0, r1, d, log)
		return
	}
	var buf [vecChunk]float64 // the exponentials of a chunk of a row
	for r := r0; r < r1; r++ {
		x := src[r*d : r*d+d]
		y := dst[r*d : r*d+d]
		m := rowMax(x)
		if math.IsInf(float64(m), 0) {
			// -Inf rows (fully masked) and +Inf entries: the general path
			// gives NaN or the limit as math.Exp does.
			softmaxT(y, x, 1, d, 1, log)
			continue
		}
		m64 := float64(m)
		var s float64
		for lo := 0; lo < d; lo += vecChunk {
			xx := x[lo:min(lo+vecChunk, d)]
			yy, b := y[lo:lo+len(xx)], buf[:len(xx)]
			for j, v := range xx {
				b[j] = widen(v) - m64
			}
			expN(b, b)
			if log {
				for _, e := range b {
					s += e
				}
				continue
			}
			for j, e := range b {
				yy[j] = float32(e)
				s += e
			}
		}
		if log {
			ls := math.Log(s)
			for j, v := range x {
				y[j] = float32(float64(v) - m64 - ls)
			}
			continue
		}
		inv := float32(1 / s)
		for j := range y {
			y[j] *= inv
		}
	}
}

// softmaxShort32 is softmaxFast32 for short rows (2*d <= vecChunk): the
// exponentials of as many whole rows as fit in a chunk are computed by one
// expN call (a call per row would leave most of each row to the scalar
// tail). Each element and each row's sum are computed as softmaxFast32
// computes them, so the results have the same bits.
func softmaxShort32(dst, src []float32, r0, r1, d int, log bool) {
	var buf [vecChunk]float64 // x-max of the rows of a group, then e^(x-max)
	var rows [vecChunk]int
	var maxes [vecChunk]float64
	for r := r0; r < r1; {
		nr := 0
		for ; r < r1 && (nr+1)*d <= vecChunk; r++ {
			x := src[r*d : r*d+d]
			m := rowMax(x)
			if math.IsInf(float64(m), 0) {
				softmaxT(dst[r*d:r*d+d], x, 1, d, 1, log) // as softmaxFast32
				continue
			}
			m64 := float64(m)
			b := buf[nr*d : nr*d+d]
			for j, v := range x {
				b[j] = widen(v) - m64
			}
			rows[nr], maxes[nr] = r, m64
			nr++
		}
		b := buf[:nr*d]
		expN(b, b)
		for t := range nr {
			r := rows[t]
			e := buf[t*d : t*d+d]
			y := dst[r*d : r*d+d]
			var s float64
			if log {
				for _, v := range e {
					s += v
				}
				ls := math.Log(s)
				m64 := maxes[t]
				for j, v := range src[r*d : r*d+d] {
					y[j] = float32(float64(v) - m64 - ls)
				}
				continue
			}
			for j, v := range e {
				y[j] = float32(v)
				s += v
			}
			inv := float32(1 / s)
			for j := range y {
				y[j] *= inv
			}
		}
	}
}

func softmaxKernel(log bool) Kernel {
	return func(c *Call, in []*Tensor) ([]*Tensor, error) {
		x := in[0]
		r := len(x.Shape)
		def := int64(-1)
		if c.Opset < 13 {
			def = 1
		}
		a := c.Int("axis", def)
		if r == 0 {
			return nil, fmt.Errorf("Softmax of a scalar")
		}
		axis, err := normAxis(a, r)
		if err != nil {
			return nil, err
		}
		var outer, d, inner int
		if c.Opset < 13 {
			// The input is coerced to 2-D at axis and normalised per row.
			outer, d, inner = shapeSize(x.Shape[:axis]), shapeSize(x.Shape[axis:]), 1
		} else {
			outer, d, inner = shapeSize(x.Shape[:axis]), x.Shape[axis], shapeSize(x.Shape[axis+1:])
		}
		if d == 0 || x.Len() == 0 {
			return []*Tensor{c.alloc(x.DType, x.Shape...)}, nil
		}
		out := c.alloc(x.DType, x.Shape...)
		switch x.DType {
		case graph.Float:
			if inner == 1 {
				y, s := Data[float32](out), Data[float32](x)
				parallelFor(c, outer, outer*d*unaryCost, func(r0, r1 int) { softmaxFast32(y, s, r0, r1, d, log) })
			} else {
				softmaxT(Data[float32](out), Data[float32](x), outer, d, inner, log)
			}
		case graph.Double:
			softmaxT(Data[float64](out), Data[float64](x), outer, d, inner, log)
		default:
			return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
		}
		return []*Tensor{out}, nil
	}
}

// layerNormT normalises rows of length d: y = (x-mean)/sqrt(var+eps)*scale
// + bias (simplified: y = x/sqrt(mean(x²)+eps)*scale). scale and bias
// are full-size (already broadcast) or nil. mean and inv receive the
// statistics per row when non-nil.
//
// The statistics take one pass (sum and sum of squares in float64, whose
// cancellation costs nothing at float32 precision unless |mean| exceeds
// the standard deviation by 1e4); rows [r0, r1) are done.
func layerNormT[T Float](y, x, scale, bias []T, r0, r1, d int, eps float64, simplified bool, mean, inv []float64) {
	for r := r0; r < r1; r++ {
		xr := x[r*d : r*d+d]
		yr := y[r*d : r*d+d]
		var s1, s2 float64
		for _, v := range xr {
			f := float64(v)
			s1 += f
			s2 += f * f
		}
		mu, vr := 0.0, s2/float64(d)
		if !simplified {
			mu = s1 / float64(d)
			vr = max(vr-mu*mu, 0)
		}
		if _, ok := any(x).([]float64); ok && !simplified {
			// float64 tensors keep the two-pass variance.
			vs := 0.0
			for _, v := range xr {
				dv := float64(v) - mu
				vs += dv * dv
			}
			vr = vs / float64(d)
		}
		is := 1 / math.Sqrt(vr+eps)
		if mean != nil {
			mean[r] = mu
		}
		if inv != nil {
			inv[r] = is
		}
		var sr, br []T
		if scale != nil {
			sr = scale[(r*d)%len(scale):]
		}
		if bias != nil {
			br = bias[(r*d)%len(bias):]
		}
		for j, v := range xr {
			o := (float64(v) - mu) * is
			if sr != nil {
				o *= float64(sr[j])
			}
			if br != nil {
				o += float64(br[j])
			}
			yr[j] = T(o)
		}
	}
}

// layerNorm32 is layerNormT for float32 written for speed: the sums over
// eight float64 lanes (AVX-512) or four accumulators (the order of a
// float64 sum of float32 values moves the statistics by about 1e-16, far
// below float32 resolution), and the output pass vectorised with
// layerNormT's operations.
func layerNorm32(y, x, scale, bias []float32, r0, r1, d int, eps float64, simplified bool, mean, inv []float64) {
	for r := r0; r < r1; r++ {
		xr := x[r*d : r*d+d]
		yr := y[r*d : r*d+d]
		s1, s2, j := lnStatsVec(xr)
		var a0, a1, a2, a3, q0, q1, q2, q3 float64
		for ; j+4 <= len(xr); j += 4 {
			v := xr[j : j+4 : j+4]
			f0, f1, f2, f3 := float64(v[0]), float64(v[1]), float64(v[2]), float64(v[3])
			a0, a1, a2, a3 = a0+f0, a1+f1, a2+f2, a3+f3
			q0, q1, q2, q3 = q0+f0*f0, q1+f1*f1, q2+f2*f2, q3+f3*f3
		}
		for ; j < len(xr); j++ {
			f := float64(xr[j])
			a0 += f
			q0 += f * f
		}
		s1 += (a0 + a1) + (a2 + a3)
		s2 += (q0 + q1) + (q2 + q3)
		mu, vr := 0.0, s2/float64(d)
		if !simplified {
			mu = s1 / float64(d)
			vr = max(vr-mu*mu, 0)
		}
		is := 1 / math.Sqrt(vr+eps)
		if mean != nil {
			mean[r] = mu
		}
		if inv != nil {
			inv[r] = is
		}
		var sr, br []float32
		if scale != nil {
			sr = scale[(r*d)%len(scale):][:d]
		}
		if bias != nil {
			br = bias[(r*d)%len(bias):][:d]
		}
		j = lnRowVec(yr, xr, sr, br, mu, is)
		for ; j < len(xr); j++ {
			o := (float64(xr[j]) - mu) * is
			if sr != nil {
				o *= float64(sr[j])
			}
			if br != nil {
				o += float64(br[j])
			}
			yr[j] = float32(o)
		}
	}
}

// normalize runs (Simplified)LayerNormalization over the dims from axis.
// It returns Y and, when statType is not 0, the per-row mean and inverse
// std dev of that type (stat shape: X's shape with the normalised dims
// set to 1).
func normalize(c *Call, x, scale, bias *Tensor, axis int, eps float64, simplified bool, statType graph.DataType) (y, mean, inv *Tensor, err error) {
	stats := statType != 0
	if axis < 0 || axis > len(x.Shape) {
		return nil, nil, nil, fmt.Errorf("axis %d for a tensor of rank %d", axis, len(x.Shape))
	}
	rows := shapeSize(x.Shape[:axis])
	d := shapeSize(x.Shape[axis:])
	if d == 0 {
		// As ONNX Runtime: there is nothing to normalise over.
		return nil, nil, nil, fmt.Errorf("the normalised dimensions %v have no elements", x.Shape[axis:])
	}
	norm := x.Shape[axis:]
	prep := func(t *Tensor) (*Tensor, error) {
		if t == nil {
			return nil, nil
		}
		if t.DType != x.DType {
			return nil, fmt.Errorf("scale/bias type %v differs from X %v", t.DType, x.DType)
		}
		if len(t.Shape) > len(norm) || shapeSize(t.Shape) != d {
			// broadcast the parameter to the normalised shape
			sh, err := broadcastShape(t.Shape, norm)
			if err != nil || !equalShape(sh, norm) {
				return nil, fmt.Errorf("parameter shape %v does not broadcast to %v", t.Shape, norm)
			}
			return expandC(c, t, norm), nil
		}
		return t, nil
	}
	if scale, err = prep(scale); err != nil {
		return
	}
	if bias, err = prep(bias); err != nil {
		return
	}
	y = c.alloc(x.DType, x.Shape...)
	var mv, iv []float64
	if stats {
		c.reserveElems(2*rows, 8)
		mv, iv = make([]float64, rows), make([]float64, rows)
	}
	work := rows * d * 4
	switch x.DType {
	case graph.Float:
		yd, xd, sd, bd := Data[float32](y), Data[float32](x), dataOrNil[float32](scale), dataOrNil[float32](bias)
		parallelFor(c, rows, work, func(r0, r1 int) { layerNorm32(yd, xd, sd, bd, r0, r1, d, eps, simplified, mv, iv) })
	case graph.Double:
		yd, xd, sd, bd := Data[float64](y), Data[float64](x), dataOrNil[float64](scale), dataOrNil[float64](bias)
		parallelFor(c, rows, work, func(r0, r1 int) { layerNormT(yd, xd, sd, bd, r0, r1, d, eps, simplified, mv, iv) })
	default:
		return nil, nil, nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
	if stats {
		sshape := slices.Clone(x.Shape)
		for i := axis; i < len(sshape); i++ {
			sshape[i] = 1
		}
		mean, inv = c.alloc(statType, sshape...), c.alloc(statType, sshape...)
		fromFloat64(mean, mv)
		fromFloat64(inv, iv)
	}
	return y, mean, inv, nil
}

func dataOrNil[T Elem](t *Tensor) []T {
	if t == nil {
		return nil
	}
	return Data[T](t)
}

func optIn(in []*Tensor, i int) *Tensor {
	if i < len(in) {
		return in[i]
	}
	return nil
}

// stashType is the type U of the Mean and InvStdDev outputs of a
// normalisation (attribute stash_type, float32 by default), or 0 when the
// node does not use them.
func stashType(c *Call) (graph.DataType, error) {
	if c.NumOutputs() < 2 {
		return 0, nil
	}
	u := graph.DataType(c.Int("stash_type", int64(graph.Float)))
	if !isFloatType(u) {
		return 0, fmt.Errorf("stash_type %v: %w", u, ErrUnsupportedType)
	}
	return u, nil
}

func layerNorm(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	axis, err := normAxis(c.Int("axis", -1), len(x.Shape))
	if err != nil {
		return nil, err
	}
	u, err := stashType(c)
	if err != nil {
		return nil, err
	}
	y, mean, inv, err := normalize(c, x, optIn(in, 1), optIn(in, 2), axis, float64(c.Float("epsilon", 1e-5)), false, u)
	if err != nil {
		return nil, err
	}
	return []*Tensor{y, mean, inv}, nil
}

func clipT[T Num](c *Call, x *Tensor, lo, hi T) *Tensor {
	out := c.alloc(x.DType, x.Shape...)
	d, s := Data[T](out), Data[T](x)
	for i, v := range s {
		d[i] = min(max(v, lo), hi)
		if v != v {
			d[i] = v
		}
	}
	return out
}

func clip(c *Call, in []*Tensor) ([]*Tensor, error) {
	x := in[0]
	lo, hi := math.Inf(-1), math.Inf(1)
	if c.Opset < 11 {
		lo, hi = float64(c.Float("min", float32(math.Inf(-1)))), float64(c.Float("max", float32(math.Inf(1))))
	} else {
		for i, p := range []*float64{&lo, &hi} {
			if t := optIn(in, 1+i); t != nil {
				if t.Len() != 1 || t.DType != x.DType {
					return nil, fmt.Errorf("%s must be a one-element %v tensor, got %v", []string{"min", "max"}[i], x.DType, t)
				}
				*p = t.Float64s()[0]
			}
		}
	}
	var o *Tensor
	switch x.DType {
	case graph.Float:
		o = clipT(c, x, float32(lo), float32(hi))
	case graph.Double:
		o = clipT(c, x, lo, hi)
	case graph.Int64:
		o = clipT(c, x, int64(clampF(lo, math.MinInt64, math.MaxInt64)), int64(clampF(hi, math.MinInt64, math.MaxInt64)))
	case graph.Int32:
		o = clipT(c, x, int32(clampF(lo, math.MinInt32, math.MaxInt32)), int32(clampF(hi, math.MinInt32, math.MaxInt32)))
	case graph.Int8:
		o = clipT(c, x, int8(clampF(lo, math.MinInt8, math.MaxInt8)), int8(clampF(hi, math.MinInt8, math.MaxInt8)))
	case graph.Uint8:
		o = clipT(c, x, uint8(clampF(lo, 0, math.MaxUint8)), uint8(clampF(hi, 0, math.MaxUint8)))
	case graph.Int16:
		o = clipT(c, x, int16(clampF(lo, math.MinInt16, math.MaxInt16)), int16(clampF(hi, math.MinInt16, math.MaxInt16)))
	case graph.Uint16:
		o = clipT(c, x, uint16(clampF(lo, 0, math.MaxUint16)), uint16(clampF(hi, 0, math.MaxUint16)))
	case graph.Uint32:
		o = clipT(c, x, uint32(clampF(lo, 0, math.MaxUint32)), uint32(clampF(hi, 0, math.MaxUint32)))
	case graph.Uint64:
		// The bounds as uint64 (float64 would round those past 2^53).
		l, h := uint64(0), uint64(math.MaxUint64)
		if t := optIn(in, 1); t != nil {
			l = Data[uint64](t)[0]
		}
		if t := optIn(in, 2); t != nil {
			h = Data[uint64](t)[0]
		}
		o = clipT(c, x, l, h)
	default:
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
	return []*Tensor{o}, nil
}

func clampF(v, lo, hi float64) float64 { return math.Max(lo, math.Min(v, hi)) }

// convGemm is an N-D convolution (N = 1, 2 or 3) in NC[D]HW layout as
// one matrix product per image and group: the weights of the group
// (opg x cpg*ksz) times the im2col matrix of the image (cpg*ksz x osz,
// skipped for 1x1 kernels with unit strides and no padding, where the
// image itself is that matrix).
func convGemm(c *Call, y, x, w, b []float32, n, cin, cout, group int, in, ks, out, strides, dil, padBegin []int) {
	e := c.mm()
	I, K, O := pad3(in, 1), pad3(ks, 1), pad3(out, 1)
	S, D, P := pad3(strides, 1), pad3(dil, 1), pad3(padBegin, 0)
	cpg, opg := cin/group, cout/group
	isz, ksz, osz := I[0]*I[1]*I[2], K[0]*K[1]*K[2], O[0]*O[1]*O[2]
	kdim := cpg * ksz
	direct := ksz == 1 && S == [3]int{1, 1, 1} && P == [3]int{} && isz == osz
	var col []float32
	if !direct && kdim*osz > 0 {
		col = Data[float32](c.alloc(graph.Float, kdim*osz))
	}
	for ni := range n {
		for g := range group {
			xg := x[(ni*cin+g*cpg)*isz : (ni*cin+(g+1)*cpg)*isz]
			yg := y[(ni*cout+g*opg)*osz : (ni*cout+(g+1)*opg)*osz]
			wg := w[g*opg*kdim : (g+1)*opg*kdim]
			src := xg
			if !direct {
				im2col(col, xg, cpg, I, K, O, S, D, P)
				src = col
			}
			if opg > 0 && osz > 0 {
				if kdim == 0 {
					clear(yg)
				} else {
					e.Sgemm(false, false, opg, osz, kdim, 1, wg, kdim, src, osz, 0, yg, osz)
				}
			}
			if b != nil {
				for oc := range opg {
					bv := b[g*opg+oc]
					row := yg[oc*osz : (oc+1)*osz]
					for i := range row {
						row[i] += bv
					}
				}
			}
		}
	}
}

// pad3 pads a spatial shape (or per-axis attribute) of 1 to 3 axes to 3-D
// with leading fills.
func pad3(v []int, fill int) [3]int {
	r := [3]int{fill, fill, fill}
	copy(r[3-len(v):], v)
	return r
}

// im2col fills col (cpg*ksz rows of osz) with the input element each
// kernel tap of each channel reads at each output position (0 in the
// padding).
func im2col(col, x []float32, cpg int, I, K, O, S, D, P [3]int) {
	isz, osz := I[0]*I[1]*I[2], O[0]*O[1]*O[2]
	r := 0
	for ci := range cpg {
		xc := x[ci*isz : (ci+1)*isz]
		for k0 := range K[0] {
			for k1 := range K[1] {
				for k2 := range K[2] {
					row := col[r*osz : (r+1)*osz]
					r++
					j := 0
					for o0 := range O[0] {
						i0 := o0*S[0] - P[0] + k0*D[0]
						if i0 < 0 || i0 >= I[0] {
							clear(row[j : j+O[1]*O[2]])
							j += O[1] * O[2]
							continue
						}
						for o1 := range O[1] {
							i1 := o1*S[1] - P[1] + k1*D[1]
							seg := row[j : j+O[2]]
							j += O[2]
							if i1 < 0 || i1 >= I[1] {
								clear(seg)
								continue
							}
							base := xc[(i0*I[1]+i1)*I[2] : (i0*I[1]+i1+1)*I[2]]
							i2 := -P[2] + k2*D[2]
							if S[2] == 1 && i2 >= 0 && i2+O[2] <= I[2] {
								copy(seg, base[i2:i2+O[2]])
								continue
							}
							for o2 := range seg {
								if i2 >= 0 && i2 < I[2] {
									seg[o2] = base[i2]
								} else {
									seg[o2] = 0
								}
								i2 += S[2]
							}
						}
					}
				}
			}
		}
	}
}

// convT is a direct N-D convolution (N = 1, 2 or 3) in NC[D]HW layout.
func convT[T Float](y, x, w, b []T, n, cin, cout, group int, in, ks, out, strides, dil, padBegin []int, acc64 bool) {
	I, K, O := pad3(in, 1), pad3(ks, 1), pad3(out, 1)
	S, D, P := pad3(strides, 1), pad3(dil, 1), pad3(padBegin, 0)
	cpg, opg := cin/group, cout/group
	isz, ksz, osz := I[0]*I[1]*I[2], K[0]*K[1]*K[2], O[0]*O[1]*O[2]
	for bi := range n {
		for oc := range cout {
			g := oc / opg
			yo := y[(bi*cout+oc)*osz : (bi*cout+oc+1)*osz]
			for o0 := range O[0] {
				for o1 := range O[1] {
					for o2 := range O[2] {
						var s T
						var s64 float64
						for ic := range cpg {
							xc := x[(bi*cin+g*cpg+ic)*isz:]
							wc := w[(oc*cpg+ic)*ksz:]
							for k0 := range K[0] {
								i0 := o0*S[0] - P[0] + k0*D[0]
								if i0 < 0 || i0 >= I[0] {
									continue
								}
								for k1 := range K[1] {
									i1 := o1*S[1] - P[1] + k1*D[1]
									if i1 < 0 || i1 >= I[1] {
										continue
									}
									for k2 := range K[2] {
										i2 := o2*S[2] - P[2] + k2*D[2]
										if i2 < 0 || i2 >= I[2] {
											continue
										}
										xv := xc[(i0*I[1]+i1)*I[2]+i2]
										wv := wc[(k0*K[1]+k1)*K[2]+k2]
										if acc64 {
											s64 += float64(xv) * float64(wv)
										} else {
											s += xv * wv
										}
									}
								}
							}
						}
						if acc64 {
							s = T(s64)
						}
						if b != nil {
							s += b[oc]
						}
						yo[(o0*O[1]+o1)*O[2]+o2] = s
					}
				}
			}
		}
	}
}

// convGeom is the geometry of a convolution: batch, channels, group, and
// per spatial axis the input, kernel and output sizes, strides,
// dilations and leading pads.
type convGeom struct {
	n, cin, cout, group           int
	in, ks, out, strides, dil, pb []int
}

// convSetup reads a Conv-like node's attributes (group, kernel_shape,
// strides, dilations, pads, auto_pad) for input x and weights w.
func convSetup(c *Call, x, w *Tensor) (*convGeom, error) {
	r := len(x.Shape)
	if r < 3 || r > 5 || len(w.Shape) != r {
		return nil, fmt.Errorf("Conv supports 1-D to 3-D inputs with matching weights")
	}
	sp := r - 2
	n, cin := x.Shape[0], x.Shape[1]
	cout := w.Shape[0]
	group := int(c.Int("group", 1))
	if group <= 0 || cin%group != 0 || cout%group != 0 || w.Shape[1] != cin/group {
		return nil, fmt.Errorf("channels %d/%d do not fit group %d and weights %v", cin, cout, group, w.Shape)
	}
	ks := w.Shape[2:]
	if slices.Contains(ks, 0) {
		return nil, fmt.Errorf("weights %v have an empty kernel", w.Shape)
	}
	if k := c.Ints("kernel_shape"); k != nil && !slices.Equal(toInts(k), ks) {
		return nil, fmt.Errorf("kernel_shape %v differs from weights %v", k, ks)
	}
	ones := func() []int {
		v := make([]int, sp)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	strides, dil := ones(), ones()
	pads := make([]int, 2*sp)
	for _, a := range []struct {
		name string
		dst  []int
		min  int64
	}{{"strides", strides, 1}, {"dilations", dil, 1}, {"pads", pads, 0}} {
		v := c.Ints(a.name)
		if v == nil {
			continue
		}
		if len(v) != len(a.dst) {
			return nil, fmt.Errorf("%s %v: want %d values for %d spatial axes", a.name, v, len(a.dst), sp)
		}
		for i, x := range v {
			if x < a.min || x > math.MaxInt32 {
				return nil, fmt.Errorf("%s %v: each must be in [%d, 2^31)", a.name, v, a.min)
			}
			a.dst[i] = int(x)
		}
	}
	inS := x.Shape[2:]
	out := make([]int, sp)
	autoPad := c.String("auto_pad", "NOTSET")
	for i := range sp {
		ek := (ks[i]-1)*dil[i] + 1
		switch autoPad {
		case "SAME_UPPER", "SAME_LOWER":
			o := (inS[i] + strides[i] - 1) / strides[i]
			total := max((o-1)*strides[i]+ek-inS[i], 0)
			if autoPad == "SAME_UPPER" {
				pads[i], pads[i+sp] = total/2, total-total/2
			} else {
				pads[i], pads[i+sp] = total-total/2, total/2
			}
		case "VALID":
			pads[i], pads[i+sp] = 0, 0
		case "NOTSET":
		default:
			return nil, fmt.Errorf("auto_pad %q", autoPad)
		}
		span := inS[i] + pads[i] + pads[i+sp] - ek
		if span < 0 {
			// As ONNX Runtime: the dilated kernel must fit the padded input.
			return nil, fmt.Errorf("kernel %v (dilations %v) does not fit input %v with pads %v", ks, dil, inS, pads)
		}
		out[i] = span/strides[i] + 1
	}
	return &convGeom{n: n, cin: cin, cout: cout, group: group, in: inS, ks: ks, out: out, strides: strides, dil: dil, pb: pads[:sp]}, nil
}

func conv(c *Call, in []*Tensor) ([]*Tensor, error) {
	x, w := in[0], in[1]
	b := optIn(in, 2)
	if w.DType != x.DType || b != nil && b.DType != x.DType {
		return nil, fmt.Errorf("X, W and B must have one element type, got %v, %v and %v", x, w, b)
	}
	g, err := convSetup(c, x, w)
	if err != nil {
		return nil, err
	}
	if b != nil && (len(b.Shape) != 1 || b.Shape[0] != g.cout) {
		return nil, fmt.Errorf("B %v must have the %d output channels", b.Shape, g.cout)
	}
	n, cin, cout, group, inS, ks, out, strides, dil, pads := g.n, g.cin, g.cout, g.group, g.in, g.ks, g.out, g.strides, g.dil, g.pb
	if b != nil && (len(b.Shape) != 1 || b.Shape[0] != cout) {
		return nil, fmt.Errorf("B %v: want %d values", b.Shape, cout)
	}
	y := c.alloc(x.DType, slices.Concat([]int{n, cout}, out)...)
	switch x.DType {
	case graph.Float:
		if !c.Acc64() {
			convGemm(c, Data[float32](y), Data[float32](x), Data[float32](w), dataOrNil[float32](b), n, cin, cout, group, inS, ks, out, strides, dil, pads)
			break
		}
		convT(Data[float32](y), Data[float32](x), Data[float32](w), dataOrNil[float32](b), n, cin, cout, group, inS, ks, out, strides, dil, pads, c.Acc64())
	case graph.Double:
		convT(Data[float64](y), Data[float64](x), Data[float64](w), dataOrNil[float64](b), n, cin, cout, group, inS, ks, out, strides, dil, pads, false)
	default:
		return nil, fmt.Errorf("%v: %w", x.DType, ErrUnsupportedType)
	}
	return []*Tensor{y}, nil
}

func init() {
	reg("Softmax", 1, 0, softmaxKernel(false))
	reg("LogSoftmax", 1, 0, softmaxKernel(true))
	reg("LayerNormalization", 17, 0, layerNorm)
	reg("Clip", 6, 0, clip)
	reg("Conv", 1, 0, conv)
}
