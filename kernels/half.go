package kernels

import (
	"math"

	"github.com/x448/float16"
)

// Fast float16 conversions (branch-light bit manipulation after F. Giesen's
// half_to_float_fast5 and float_to_half_fast3_rtne). They give the same
// bits as github.com/x448/float16 (round to nearest even; NaNs are left to
// that package so their payloads match), which a test checks exhaustively.

// f16to32 widens a float16.
func f16to32(h float16.Float16) float32 {
	const magic = float32(1 << 112)    // 2^(127-15): rebias the exponent
	const wasInfNaN = float32(1 << 16) // (127+16)<<23
	o := math.Float32frombits(uint32(h&0x7fff) << 13)
	o *= magic
	u := math.Float32bits(o)
	if o >= wasInfNaN {
		if h&0x3ff != 0 {
			return h.Float32() // NaN: that package's quiet NaN
		}
		u |= 255 << 23
	}
	return math.Float32frombits(u | uint32(h&0x8000)<<16)
}

// f32to16 rounds f to the nearest float16, ties to even.
func f32to16(f float32) float16.Float16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	u &^= 0x80000000
	switch {
	case u >= (127+16)<<23: // overflow, Inf or NaN
		if u > 0x7f800000 {
			return float16.Fromfloat32(f)
		}
		return float16.Float16(sign | 0x7c00)
	case u < 113<<23: // subnormal or zero: let the FPU round
		const magicBits = ((127 - 15) + (23 - 10) + 1) << 23
		v := math.Float32frombits(u) + math.Float32frombits(magicBits)
		return float16.Float16(sign | uint16(math.Float32bits(v)-magicBits))
	}
	odd := (u >> 13) & 1
	u = u - (127-15)<<23 + 0xfff + odd
	return float16.Float16(sign | uint16(u>>13))
}

// widen16 converts s into d (same length).
func widen16(d []float32, s []float16.Float16) {
	d = d[:len(s)]
	i := widen16Vec(d, s)
	for ; i < len(s); i++ {
		d[i] = f16to32(s[i])
	}
}

// narrow16 rounds s into d (same length).
func narrow16(d []float16.Float16, s []float32) {
	d = d[:len(s)]
	i := narrow16Vec(d, s)
	for ; i < len(s); i++ {
		d[i] = f32to16(s[i])
	}
}
