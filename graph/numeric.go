package graph

import (
	"math"

	"github.com/x448/float16"
)

// BF16 is a bfloat16 number: the upper 16 bits of a float32.
type BF16 uint16

// Float32 widens b exactly.
func (b BF16) Float32() float32 { return math.Float32frombits(uint32(b) << 16) }

// BF16FromFloat32 rounds f to the nearest bfloat16, ties to even; NaN
// stays NaN.
func BF16FromFloat32(f float32) BF16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 { // NaN: keep it quiet and a NaN
		return BF16(u>>16 | 0x40)
	}
	u += 0x7fff + (u>>16)&1
	return BF16(u >> 16)
}

// RoundTo rounds x to element type dt: float32, or float16 and bfloat16
// through float32 (as the executor rounds a float64 result); x stays as it
// is for float64 and every other type.
func RoundTo(dt DataType, x float64) float64 {
	switch dt {
	case Float:
		return float64(float32(x))
	case Float16:
		return float64(float16.Fromfloat32(float32(x)).Float32())
	case BFloat16:
		return float64(BF16FromFloat32(float32(x)).Float32())
	}
	return x
}

// Float16FromFloat32 rounds f to the nearest IEEE half, ties to even.
func Float16FromFloat32(f float32) float16.Float16 { return float16.Fromfloat32(f) }

// Float8ToFloat32 decodes the bit pattern b of an 8-bit float type dt
// (Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0)
// exactly; other types give NaN.
func Float8ToFloat32(dt DataType, b uint8) float32 { return float8ToFloat32(dt, b) }

// Float4ToFloat32 decodes one float4e2m1 nibble exactly.
func Float4ToFloat32(n uint8) float32 { return float4ToFloat32(n) }

// float8ToFloat32 decodes the 8-bit float formats of ONNX (IR 9 and later).
func float8ToFloat32(dt DataType, b uint8) float32 {
	sign := float32(1)
	if b&0x80 != 0 {
		sign = -1
	}
	switch dt {
	case Float8E4M3FN:
		e, m := int(b>>3)&0xf, int(b&7)
		if e == 0xf && m == 7 {
			return float32(math.NaN())
		}
		return sign * miniFloat(e, m, 3, 7)
	case Float8E4M3FNUZ:
		if b == 0x80 {
			return float32(math.NaN())
		}
		return sign * miniFloat(int(b>>3)&0xf, int(b&7), 3, 8)
	case Float8E5M2:
		e, m := int(b>>2)&0x1f, int(b&3)
		if e == 0x1f {
			if m == 0 {
				return sign * float32(math.Inf(1))
			}
			return float32(math.NaN())
		}
		return sign * miniFloat(e, m, 2, 15)
	case Float8E5M2FNUZ:
		if b == 0x80 {
			return float32(math.NaN())
		}
		return sign * miniFloat(int(b>>2)&0x1f, int(b&3), 2, 16)
	case Float8E8M0:
		if b == 0xff {
			return float32(math.NaN())
		}
		return float32(math.Ldexp(1, int(b)-127))
	}
	return float32(math.NaN())
}

// float4ToFloat32 decodes one float4e2m1 nibble.
func float4ToFloat32(n uint8) float32 {
	sign := float32(1)
	if n&8 != 0 {
		sign = -1
	}
	return sign * miniFloat(int(n>>1)&3, int(n&1), 1, 1)
}

// miniFloat is the value of a small binary float with exponent field e,
// mantissa field m of mbits bits and the given bias (subnormal when e==0).
func miniFloat(e, m, mbits, bias int) float32 {
	frac := float64(m) / float64(int(1)<<mbits)
	if e == 0 {
		return float32(math.Ldexp(frac, 1-bias))
	}
	return float32(math.Ldexp(1+frac, e-bias))
}
