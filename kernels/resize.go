package kernels

import (
	"fmt"
	"math"
	"slices"

	"github.com/onnxpe/onnxpe/graph"
)

// Resize (and the older Upsample) interpolate one axis at a time, as
// ONNX's reference does: output index i of an axis maps to the input
// coordinate x by coordinate_transformation_mode, and the output is a
// weighted sum of n input elements around x, the weights given by mode
// (nearest, linear, cubic; widened by antialias when downsampling). With
// r = x - floor(x) (1 when x is an integer), the n taps start at
// floor(x) - n/2 + 1 (at x - n/2 when x is an integer); taps outside the
// input read the nearest edge element, or with exclude_outside are
// dropped and the weights renormalised. The sums are in float64; integer
// outputs are rounded half to even and saturated.

// resizeAxis is the interpolation along one axis: output index i reads
// input indices idx[i*n : (i+1)*n] with weights w[...]; extrap[i] marks
// the outputs tf_crop_and_resize sets to extrapolation_value.
type resizeAxis struct {
	n      int
	idx    []int
	w      []float64
	extrap []bool
}

// resizeParams are a Resize node's attributes.
type resizeParams struct {
	mode, coord, nearest string
	cubicA               float64
	excludeOutside       bool
	antialias            bool
	extrapolation        float64
}

// coeffs returns the weights of the taps for ratio r at scale.
func (p *resizeParams) coeffs(r, scale float64) []float64 {
	switch p.mode {
	case "nearest":
		if r == 1 {
			return []float64{0, 1}
		}
		var right bool
		switch p.nearest {
		case "round_prefer_ceil":
			right = r >= 0.5
		case "floor":
			right = false
		case "ceil":
			right = true
		default: // round_prefer_floor
			right = r > 0.5
		}
		if right {
			return []float64{0, 1}
		}
		return []float64{1, 0}
	case "linear":
		if !p.antialias {
			return []float64{1 - r, r}
		}
		s := math.Min(scale, 1)
		start := int(math.Floor(-1/s)) + 1
		n := 2 - 2*start
		w := make([]float64, n)
		var sum float64
		for k := range w {
			w[k] = math.Max(0, math.Min(1, 1-math.Abs((float64(start+k)-r)*s)))
			sum += w[k]
		}
		for k := range w {
			w[k] /= sum
		}
		return w
	default: // cubic
		a := p.cubicA
		if !p.antialias {
			q := 1 - r
			return []float64{
				((a*(r+1)-5*a)*(r+1)+8*a)*(r+1) - 4*a,
				((a+2)*r-(a+3))*r*r + 1,
				((a+2)*q-(a+3))*q*q + 1,
				((a*(q+1)-5*a)*(q+1)+8*a)*(q+1) - 4*a,
			}
		}
		s := math.Min(scale, 1)
		start := int(math.Floor(-2/s)) + 1
		n := 2 - 2*start
		w := make([]float64, n)
		var sum float64
		for k := range w {
			x := math.Abs(s * (float64(start+k) - r))
			switch {
			case x <= 1:
				w[k] = (a+2)*x*x*x - (a+3)*x*x + 1
			case x < 2:
				w[k] = a*x*x*x - 5*a*x*x + 8*a*x - 4*a
			}
			sum += w[k]
		}
		for k := range w {
			w[k] /= sum
		}
		return w
	}
}

// axis computes the interpolation of an axis of size in to out outputs
// at scale (roi0, roi1 the axis's roi for tf_crop_and_resize).
func (p *resizeParams) axis(in, out int, scale, roi0, roi1 float64) (*resizeAxis, error) {
	ra := &resizeAxis{extrap: make([]bool, out)}
	outW := scale * float64(in)
	for i := range out {
		y := float64(i)
		var x float64
		switch p.coord {
		case "half_pixel":
			x = (y+0.5)/scale - 0.5
		case "half_pixel_symmetric":
			adj := float64(out) / outW
			x = float64(in)/2*(1-adj) + (y+0.5)/scale - 0.5
		case "pytorch_half_pixel":
			x = -0.5
			if outW != 1 {
				x = (y+0.5)/scale - 0.5
			}
		case "align_corners":
			if outW != 1 {
				x = y * float64(in-1) / (outW - 1)
			}
		case "asymmetric":
			x = y / scale
		case "tf_crop_and_resize":
			if outW == 1 {
				x = (roi1 - roi0) * float64(in-1) / 2
			} else {
				x = y * (roi1 - roi0) * float64(in-1) / (outW - 1)
			}
			x += roi0 * float64(in-1)
			ra.extrap[i] = x < 0 || x > float64(in-1)
		default:
			return nil, fmt.Errorf("coordinate_transformation_mode %q", p.coord)
		}
		fl := math.Floor(x)
		r := x - fl
		if r == 0 {
			r = 1
		}
		w := p.coeffs(r, scale)
		n := len(w)
		if ra.n == 0 {
			ra.n = n
			ra.idx, ra.w = make([]int, 0, out*n), make([]float64, 0, out*n)
		} else if n != ra.n {
			return nil, fmt.Errorf("kernels: resize: %d taps, then %d", ra.n, n)
		}
		start := int(fl) - n/2 + 1
		if x == fl {
			start = int(fl) - n/2
		}
		if p.excludeOutside {
			var sum float64
			for k := range w {
				if j := start + k; j < 0 || j >= in {
					w[k] = 0
				}
				sum += w[k]
			}
			if sum != 0 {
				for k := range w {
					w[k] /= sum
				}
			}
		}
		for k := range w {
			ra.idx = append(ra.idx, min(max(start+k, 0), in-1))
		}
		ra.w = append(ra.w, w...)
	}
	return ra, nil
}

// resizeAlong interpolates src (outer x in x inner) along its middle axis
// into dst (outer x out x inner).
func resizeAlong(dst, src []float64, outer, in, out, inner int, ra *resizeAxis, extrap float64) {
	for o := range outer {
		s := src[o*in*inner : (o+1)*in*inner]
		d := dst[o*out*inner : (o+1)*out*inner]
		for i := range out {
			row := d[i*inner : (i+1)*inner]
			if ra.extrap[i] {
				for j := range row {
					row[j] = extrap
				}
				continue
			}
			clear(row)
			for k := range ra.n {
				w := ra.w[i*ra.n+k]
				if w == 0 {
					continue
				}
				sr := s[ra.idx[i*ra.n+k]*inner:]
				for j := range row {
					row[j] += w * sr[j]
				}
			}
		}
	}
}

// floatList reads an optional 1-D input as float64s (nil when absent or
// empty).
func floatList(t *Tensor) []float64 {
	if t == nil || t.Len() == 0 {
		return nil
	}
	return t.Float64s()
}

func resize(c *Call, in []*Tensor) ([]*Tensor, error) { return resizeOp(c, in, c.Opset) }

// resizeOp is Resize of the given opset (Upsample runs as Resize 10).
func resizeOp(c *Call, in []*Tensor, opset int64) ([]*Tensor, error) {
	x := in[0]
	r := len(x.Shape)
	p := &resizeParams{
		mode:           c.String("mode", "nearest"),
		coord:          c.String("coordinate_transformation_mode", "half_pixel"),
		nearest:        c.String("nearest_mode", "round_prefer_floor"),
		cubicA:         float64(c.Float("cubic_coeff_a", -0.75)),
		excludeOutside: c.Int("exclude_outside", 0) != 0,
		antialias:      c.Int("antialias", 0) != 0,
		extrapolation:  float64(c.Float("extrapolation_value", 0)),
	}
	var roi, scales, sizes []float64
	if opset < 11 {
		// Resize 10 and Upsample: scales only, asymmetric coordinates,
		// nearest rounds down.
		p.coord, p.nearest = "asymmetric", "floor"
		scales = floatList(optIn(in, 1))
	} else {
		roi, scales = floatList(optIn(in, 1)), floatList(optIn(in, 2))
		if t := optIn(in, 3); t != nil && t.Len() > 0 {
			sizes = t.Float64s()
		}
	}
	switch p.mode {
	case "nearest", "linear", "cubic":
	default:
		return nil, fmt.Errorf("mode %q", p.mode)
	}
	if p.mode == "nearest" && p.antialias {
		return nil, fmt.Errorf("antialias needs mode linear or cubic")
	}
	axes := make([]int, r)
	for i := range axes {
		axes[i] = i
	}
	if a := c.Ints("axes"); a != nil {
		var err error
		if axes, err = normAxes(a, r); err != nil {
			return nil, err
		}
	}
	na := len(axes)
	if scales == nil && sizes == nil || scales != nil && sizes != nil {
		return nil, fmt.Errorf("exactly one of scales and sizes must be given")
	}
	scale := make([]float64, r)
	out := slices.Clone(x.Shape)
	for i := range scale {
		scale[i] = 1
	}
	if scales != nil {
		if len(scales) != na {
			return nil, fmt.Errorf("scales %v: want %d values", scales, na)
		}
		for i, a := range axes {
			if !(scales[i] > 0) || math.IsInf(scales[i], 0) {
				return nil, fmt.Errorf("scales %v: each must be positive and finite", scales)
			}
			scale[a] = scales[i]
			o := scales[i] * float64(x.Shape[a])
			if o >= math.MaxInt32 {
				return nil, fmt.Errorf("output size %v along axis %d: %w", o, a, ErrTooLarge)
			}
			out[a] = int(o)
		}
	} else {
		if len(sizes) != na {
			return nil, fmt.Errorf("sizes %v: want %d values", sizes, na)
		}
		for i, a := range axes {
			if sizes[i] < 0 || sizes[i] > math.MaxInt32 {
				return nil, fmt.Errorf("sizes %v: bad size", sizes)
			}
			out[a] = int(sizes[i])
			if x.Shape[a] == 0 {
				return nil, fmt.Errorf("sizes given for the empty axis %d", a)
			}
			scale[a] = sizes[i] / float64(x.Shape[a])
		}
		if pol := c.String("keep_aspect_ratio_policy", "stretch"); pol != "stretch" {
			s := scale[axes[0]]
			for _, a := range axes {
				switch pol {
				case "not_larger":
					s = math.Min(s, scale[a])
				case "not_smaller":
					s = math.Max(s, scale[a])
				default:
					return nil, fmt.Errorf("keep_aspect_ratio_policy %q", pol)
				}
			}
			for _, a := range axes {
				scale[a] = s
				out[a] = int(s*float64(x.Shape[a]) + 0.5)
			}
		}
	}
	// roi for tf_crop_and_resize: starts then ends, of the axes.
	roi0, roi1 := make([]float64, r), make([]float64, r)
	for i := range roi1 {
		roi1[i] = 1
	}
	if p.coord == "tf_crop_and_resize" {
		if len(roi) != 2*na {
			return nil, fmt.Errorf("roi %v: want %d values for tf_crop_and_resize", roi, 2*na)
		}
		for i, a := range axes {
			roi0[a], roi1[a] = roi[i], roi[na+i]
		}
	}
	y := c.alloc(x.DType, out...)
	if y.Len() == 0 {
		return []*Tensor{y}, nil
	}
	cur := x.Float64s()
	shape := slices.Clone(x.Shape)
	for _, a := range axes {
		if shape[a] == out[a] && math.Abs(scale[a]-1) <= 1e-9 && roi0[a] == 0 && roi1[a] == 1 {
			continue // the identity along this axis
		}
		if shape[a] == 0 {
			return nil, fmt.Errorf("cannot resize the empty axis %d to %d", a, out[a])
		}
		ra, err := p.axis(shape[a], out[a], scale[a], roi0[a], roi1[a])
		if err != nil {
			return nil, err
		}
		next := slices.Clone(shape)
		next[a] = out[a]
		c.reserve(graph.Double, next)
		buf := make([]float64, shapeSize(next))
		resizeAlong(buf, cur, shapeSize(shape[:a]), shape[a], out[a], shapeSize(shape[a+1:]), ra, p.extrapolation)
		cur, shape = buf, next
	}
	storeRounded(c, y, cur)
	return []*Tensor{y}, nil
}

// storeRounded stores float64 results into t: floats rounded to the type
// (once for float16/bfloat16), integers rounded half to even and
// saturated to the type's range.
func storeRounded(c *Call, t *Tensor, v []float64) {
	if isFloatType(t.DType) {
		if c != nil && c.half != 0 && t.DType == graph.Float {
			d := Data[float32](t)
			for i, x := range v {
				d[i] = roundTo32For16(x)
			}
			return
		}
		fromFloat64(t, v)
		return
	}
	lo, hi := intRange(t.DType)
	for i, x := range v {
		v[i] = math.Max(lo, math.Min(hi, math.RoundToEven(x)))
	}
	fromFloat64(t, v)
}

// intRange is the range of an integer type as float64s (bool: 0..1).
func intRange(dt graph.DataType) (lo, hi float64) {
	switch dt {
	case graph.Int8:
		return math.MinInt8, math.MaxInt8
	case graph.Bool:
		return 0, 1
	case graph.Uint8:
		return 0, math.MaxUint8
	case graph.Int16:
		return math.MinInt16, math.MaxInt16
	case graph.Uint16:
		return 0, math.MaxUint16
	case graph.Int32:
		return math.MinInt32, math.MaxInt32
	case graph.Uint32:
		return 0, math.MaxUint32
	case graph.Uint64:
		return 0, math.MaxUint64
	}
	return math.MinInt64, math.MaxInt64
}

// upsample is Upsample 7 (scales attribute) and 9 (scales input): Resize
// with asymmetric coordinates, nearest rounding down.
func upsample(c *Call, in []*Tensor) ([]*Tensor, error) {
	if c.Opset < 9 {
		sc := c.Attr("scales")
		if sc == nil {
			return nil, fmt.Errorf("attribute scales is required")
		}
		f := sc.Floats()
		in = []*Tensor{in[0], FromSlice([]int{len(f)}, slices.Clone(f))}
	}
	if m := c.String("mode", "nearest"); m == "bilinear" || m == "trilinear" {
		return nil, fmt.Errorf("mode %q: use linear", m)
	}
	return resizeOp(c, in, 10)
}

func init() {
	reg("Resize", 10, 0, resize)
	reg("Upsample", 7, 9, upsample)
}
