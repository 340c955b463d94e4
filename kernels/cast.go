package kernels

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
)

// castTensor converts t to dt (ONNX Cast semantics: floats to integers
// truncate toward zero, integers wrap, anything nonzero is true, floats
// round to nearest even).
func castTensor(t *Tensor, dt graph.DataType) *Tensor { return castC(nil, t, dt) }

// castC is castTensor with the output allocated by c.
func castC(c *Call, t *Tensor, dt graph.DataType) *Tensor { return castSat(c, t, dt, true, "up") }

// castSat is castC with Cast's saturate and round_mode attributes, which
// apply to the 8-bit float types (see encodeSmallFloat and encodeE8M0).
func castSat(c *Call, t *Tensor, dt graph.DataType, saturate bool, roundMode string) *Tensor {
	if t.DType == dt {
		return t
	}
	if t.DType == graph.String || dt == graph.String {
		panic("kernels: castSat of strings (use castStrings)")
	}
	out := c.alloc(dt, t.Shape...)
	if smallType(dt) || smallType(t.DType) {
		if isFloatType(t.DType) {
			fromFloat64Sat(out, t.Float64s(), saturate, roundMode)
		} else {
			fromInt64Small(out, t.Int64s())
		}
		return out
	}
	switch s := t.data.(type) {
	case []float16.Float16:
		if d, ok := out.data.([]float32); ok {
			widen16(d, s)
			return out
		}
	case []graph.BF16:
		if d, ok := out.data.([]float32); ok {
			for i, v := range s {
				d[i] = v.Float32()
			}
			return out
		}
	case []float32:
		switch d := out.data.(type) {
		case []float16.Float16:
			narrow16(d, s)
			return out
		case []graph.BF16:
			for i, v := range s {
				d[i] = graph.BF16FromFloat32(v)
			}
			return out
		case []float64:
			for i, v := range s {
				d[i] = float64(v)
			}
			return out
		}
	}
	if u, ok := t.data.([]uint64); ok && isFloatType(dt) {
		// Past 2^63 Int64s would wrap: convert from the unsigned values.
		switch d := out.data.(type) {
		case []float32:
			for i, v := range u {
				d[i] = float32(v)
			}
		case []float64:
			for i, v := range u {
				d[i] = float64(v)
			}
		default:
			f := make([]float64, len(u))
			for i, v := range u {
				f[i] = float64(v)
			}
			fromFloat64(out, f)
		}
		return out
	}
	if isFloatType(t.DType) {
		fromFloat64(out, t.Float64s())
	} else {
		fromInt64(out, t.Int64s())
	}
	return out
}

// isFloatType reports whether dt is a floating-point type (the 8-bit and
// 4-bit ones included).
func isFloatType(dt graph.DataType) bool { return dt.IsFloat() }

// fromFloat64Sat is fromFloat64 for any destination type, the small ones
// included: the 8-bit floats round per saturate (float8e8m0 per
// roundMode), float4e2m1 saturates, and the small integers keep the low
// bits of the truncated value.
func fromFloat64Sat(t *Tensor, v []float64, saturate bool, roundMode string) {
	switch {
	case t.DType == graph.Float8E8M0:
		d := t.data.([]uint8)
		for i, x := range v {
			d[i] = encodeE8M0(x, saturate, roundMode)
		}
	case smallFloat(t.DType):
		d := t.data.([]uint8)
		for i, x := range v {
			d[i] = encodeSmallFloat(t.DType, x, saturate)
		}
	case smallType(t.DType):
		n := make([]int64, len(v))
		for i, x := range v {
			n[i] = floatToInt64(x)
		}
		fromInt64Small(t, n)
	default:
		fromFloat64(t, v)
	}
}

// fromInt64Small is fromInt64 for any destination type, the small ones
// included.
func fromInt64Small(t *Tensor, v []int64) {
	switch {
	case smallFloat(t.DType):
		f := make([]float64, len(v))
		for i, x := range v {
			f[i] = float64(x)
		}
		fromFloat64Sat(t, f, true, "up")
	case smallType(t.DType):
		switch d := t.data.(type) {
		case []int8:
			for i, x := range v {
				d[i] = int8(wrapSmallInt(t.DType, x))
			}
		case []uint8:
			for i, x := range v {
				d[i] = uint8(wrapSmallInt(t.DType, x))
			}
		}
	default:
		fromInt64(t, v)
	}
}

// fromFloat64 stores float64 values into t, rounding or truncating per
// Cast's rules.
func fromFloat64(t *Tensor, v []float64) {
	switch d := t.data.(type) {
	case []float32:
		for i, x := range v {
			d[i] = float32(x)
		}
	case []float64:
		copy(d, v)
	case []float16.Float16:
		for i, x := range v {
			d[i] = f32to16(roundTo32For16(x))
		}
	case []graph.BF16:
		for i, x := range v {
			d[i] = graph.BF16FromFloat32(roundTo32For16(x))
		}
	case []int64:
		for i, x := range v {
			d[i] = floatToInt64(x)
		}
	case []int32:
		for i, x := range v {
			d[i] = int32(floatToInt64(x))
		}
	case []int16:
		for i, x := range v {
			d[i] = int16(floatToInt64(x))
		}
	case []uint64:
		for i, x := range v {
			if x >= 9.223372036854775807e18 {
				d[i] = uint64(min(x, 1.8446744073709551615e19))
			} else {
				d[i] = uint64(floatToInt64(x))
			}
		}
	case []uint32:
		for i, x := range v {
			d[i] = uint32(floatToInt64(x))
		}
	case []uint16:
		for i, x := range v {
			d[i] = uint16(floatToInt64(x))
		}
	case []int8:
		for i, x := range v {
			d[i] = int8(floatToInt64(x))
		}
	case []uint8:
		for i, x := range v {
			d[i] = uint8(floatToInt64(x))
		}
	case []bool:
		for i, x := range v {
			d[i] = x != 0
		}
	}
}

func floatToInt64(x float64) int64 {
	switch {
	case math.IsNaN(x):
		return math.MinInt64
	case x >= 9.223372036854775807e18:
		return math.MaxInt64
	case x <= -9.223372036854775808e18:
		return math.MinInt64
	}
	return int64(x)
}

func fromInt64(t *Tensor, v []int64) {
	switch d := t.data.(type) {
	case []float32:
		for i, x := range v {
			d[i] = float32(x)
		}
	case []float64:
		for i, x := range v {
			d[i] = float64(x)
		}
	case []float16.Float16:
		for i, x := range v {
			d[i] = f32to16(intTo32For16(x))
		}
	case []graph.BF16:
		for i, x := range v {
			d[i] = graph.BF16FromFloat32(intTo32For16(x))
		}
	case []int64:
		copy(d, v)
	case []int32:
		for i, x := range v {
			d[i] = int32(x)
		}
	case []int16:
		for i, x := range v {
			d[i] = int16(x)
		}
	case []uint64:
		for i, x := range v {
			d[i] = uint64(x)
		}
	case []uint32:
		for i, x := range v {
			d[i] = uint32(x)
		}
	case []uint16:
		for i, x := range v {
			d[i] = uint16(x)
		}
	case []int8:
		for i, x := range v {
			d[i] = int8(x)
		}
	case []uint8:
		for i, x := range v {
			d[i] = uint8(x)
		}
	case []bool:
		for i, x := range v {
			d[i] = x != 0
		}
	}
}

// roundTo32For16 narrows x to float32 so that a later float32->float16 or
// float32->bfloat16 rounding gives the half nearest to x: it rounds to odd
// (truncates and makes the low bit sticky when inexact), which is exact
// for any later rounding to 2 or more fewer significand bits.
func roundTo32For16(x float64) float32 {
	f := float32(x)
	if float64(f) == x || math.IsInf(x, 0) || math.IsNaN(x) || math.IsInf(float64(f), 0) {
		return f
	}
	u := math.Float32bits(f)
	if float64(f) > x && x > 0 || float64(f) < x && x < 0 {
		u--
	}
	return math.Float32frombits(u | 1)
}

// intTo32For16 is roundTo32For16 of an integer, rounding to odd straight
// from the int64 (float64(x) would round a first time above 2^53).
func intTo32For16(x int64) float32 {
	u := uint64(x)
	if x < 0 {
		u = -u
	}
	if n := bits.Len64(u); n > 24 {
		sh := n - 24
		m := u >> sh
		if u&(1<<sh-1) != 0 {
			m |= 1
		}
		f := float32(math.Ldexp(float64(m), sh))
		if x < 0 {
			f = -f
		}
		return f
	}
	return float32(x)
}

func dtypeAttr(c *Call, name string) (graph.DataType, error) {
	a := c.Attr(name)
	if a == nil {
		return 0, fmt.Errorf("attribute %s is required", name)
	}
	dt := graph.DataType(a.Int())
	if !Supported(dt) {
		return 0, fmt.Errorf("%s=%v: %w", name, dt, ErrUnsupportedType)
	}
	return dt, nil
}

// castKernel is Cast and CastLike of x to dt.
func castKernel(c *Call, x *Tensor, dt graph.DataType) ([]*Tensor, error) {
	if x.DType != dt && (x.DType == graph.String || dt == graph.String) {
		o, err := castStrings(c, x, dt)
		return []*Tensor{o}, err
	}
	return []*Tensor{castSat(c, x, dt, c.Int("saturate", 1) != 0, c.String("round_mode", "up"))}, nil
}

func init() {
	// saturate (opset 19 on; CastLike's too) and round_mode (opset 24
	// on, for float8e8m0) shape conversions to the 8-bit floats only.
	Register("", "Cast", 1, 0, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		dt, err := dtypeAttr(c, "to")
		if err != nil {
			return nil, err
		}
		return castKernel(c, in[0], dt)
	}, Native)
	Register("", "CastLike", 15, 0, func(c *Call, in []*Tensor) ([]*Tensor, error) {
		return castKernel(c, in[0], in[1].DType)
	}, Native)
}
