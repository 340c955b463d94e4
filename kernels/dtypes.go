package kernels

import (
	"math"

	"github.com/onnxpe/onnxpe/graph"
)

// The small element types: the 8-bit floats (float8e4m3fn, float8e4m3fnuz,
// float8e5m2, float8e5m2fnuz, float8e8m0), float4e2m1 and the 4-bit and
// 2-bit integers. A tensor holds them one element per byte (the floats as
// bit patterns in []uint8, int4 and int2 sign-extended in []int8, uint4
// and uint2 in []uint8); graph packs and unpacks the sub-byte ones.
//
// ONNX allows them in a few ops only: casts, quantisation, and ops that
// move elements without computing on them. Kernels are written for the
// ordinary types, so the executor refuses a small-typed input to any op
// not in smallTypeOps (a kernel must never compute on bit patterns as if
// they were uint8 values).

// smallType reports whether dt is one of the small types.
func smallType(dt graph.DataType) bool {
	switch dt {
	case graph.Int4, graph.Uint4, graph.Int2, graph.Uint2:
		return true
	}
	return smallFloat(dt)
}

// smallFloat reports whether dt is an 8-bit float type or float4e2m1
// (held as bit patterns).
func smallFloat(dt graph.DataType) bool {
	switch dt {
	case graph.Float8E4M3FN, graph.Float8E4M3FNUZ, graph.Float8E5M2, graph.Float8E5M2FNUZ, graph.Float8E8M0, graph.Float4E2M1:
		return true
	}
	return false
}

// smallTypeOps are the ops (by opName) that accept small-typed inputs:
// those whose ONNX schema allows them (through opset 25), and the ops that
// hold tensors of any type (sequences, optionals).
var smallTypeOps = map[string]bool{
	"Cast": true, "CastLike": true, "BitCast": true, "Constant": true, "ConstantOfShape": true,
	"QuantizeLinear": true, "DequantizeLinear": true, "QLinearMatMul": true,
	"Identity": true, "Dropout": true, "Flatten": true, "Pad": true, "Reshape": true,
	"Shape": true, "Size": true, "Squeeze": true, "Unsqueeze": true, "Transpose": true,
	"IsNaN": true, "IsInf": true, "If": true, "Loop": true, "Scan": true, "TensorScatter": true,
	"SequenceConstruct": true, "SequenceInsert": true, "SequenceAt": true, "SequenceErase": true,
	"SequenceLength": true, "SequenceEmpty": true, "SplitToSequence": true, "ConcatFromSequence": true,
	"Optional": true, "OptionalGetElement": true, "OptionalHasElement": true,
}

// smallFormat describes a small binary float: exponent and mantissa
// widths, the exponent bias, and its special values.
type smallFormat struct {
	ebits, mbits, bias int
	inf                bool  // has infinities (e5m2)
	uz                 bool  // "unsigned zero": no -0, NaN is 0x80 (fnuz)
	maxCode            uint8 // bit pattern of the largest finite value
	nan                uint8 // bit pattern of NaN (positive)
}

var smallFormats = map[graph.DataType]smallFormat{
	graph.Float8E4M3FN:   {ebits: 4, mbits: 3, bias: 7, maxCode: 0x7e, nan: 0x7f},
	graph.Float8E4M3FNUZ: {ebits: 4, mbits: 3, bias: 8, uz: true, maxCode: 0x7f, nan: 0x80},
	graph.Float8E5M2:     {ebits: 5, mbits: 2, bias: 15, inf: true, maxCode: 0x7b, nan: 0x7f},
	graph.Float8E5M2FNUZ: {ebits: 5, mbits: 2, bias: 16, uz: true, maxCode: 0x7f, nan: 0x80},
	// float4e2m1 has neither infinities nor NaN: conversions saturate, and
	// NaN becomes 0b1000 (-0), as ONNX's reference (ml_dtypes) does.
	graph.Float4E2M1: {ebits: 2, mbits: 1, bias: 1, maxCode: 0x7, nan: 0x8},
}

// decodeSmallFloat widens the bit patterns s of the small float type dt
// into d (exactly).
func decodeSmallFloat(d []float64, dt graph.DataType, s []uint8) {
	if dt == graph.Float4E2M1 {
		for i, v := range s {
			d[i] = float64(graph.Float4ToFloat32(v))
		}
		return
	}
	for i, v := range s {
		d[i] = float64(graph.Float8ToFloat32(dt, v))
	}
}

// encodeSmallFloat rounds x to the small float type dt (nearest, ties to
// even). With saturate, values beyond the largest finite one (infinities
// included) become it; without, they become NaN (infinity for e5m2), as
// ONNX's Cast says. float8e8m0 has its own rules (encodeE8M0).
func encodeSmallFloat(dt graph.DataType, x float64, saturate bool) uint8 {
	f := smallFormats[dt]
	signBit := uint8(0)
	if math.Signbit(x) {
		signBit = 1 << (f.ebits + f.mbits)
	}
	if math.IsNaN(x) {
		return f.nan
	}
	a := math.Abs(x)
	maxVal := smallValue(f, f.maxCode)
	over := func() uint8 {
		switch {
		case saturate || dt == graph.Float4E2M1:
			return f.maxCode | signBit
		case f.inf:
			return uint8(1<<f.ebits-1)<<f.mbits | signBit
		case f.uz:
			return f.nan
		}
		return f.nan | signBit
	}
	if math.IsInf(a, 0) {
		return over()
	}
	// The quantum of a's binade (of the subnormals below the smallest
	// normal): a/q is exact, and rounding it to an integer rounds a.
	minExp := 1 - f.bias
	e := minExp
	if a >= math.Ldexp(1, minExp) {
		_, k := math.Frexp(a)
		e = k - 1
	}
	q := math.Ldexp(1, e-f.mbits)
	r := math.RoundToEven(a/q) * q
	if r > maxVal {
		return over()
	}
	if r == 0 {
		if f.uz {
			return 0
		}
		return signBit
	}
	var code uint8
	if r < math.Ldexp(1, minExp) {
		code = uint8(r / math.Ldexp(1, minExp-f.mbits)) // subnormal
	} else {
		_, k := math.Frexp(r)
		ex := k - 1
		m := uint8((r/math.Ldexp(1, ex) - 1) * float64(int(1)<<f.mbits))
		code = uint8(ex+f.bias)<<f.mbits | m
	}
	return code | signBit
}

// smallValue is the (positive) value of the bit pattern code of f.
func smallValue(f smallFormat, code uint8) float64 {
	e := int(code>>f.mbits) & (1<<f.ebits - 1)
	m := float64(int(code)&(1<<f.mbits-1)) / float64(int(1)<<f.mbits)
	if e == 0 {
		return math.Ldexp(m, 1-f.bias)
	}
	return math.Ldexp(1+m, e-f.bias)
}

// encodeE8M0 converts x (rounded to float32 first) to float8e8m0, a bare
// power of two 2^(e-127), as ONNX's reference does: the float32's exponent
// field, rounded up (round_mode "up": when any fraction bit is set),
// "nearest" (ties to even on the guard bits) or "down" (dropped); with
// saturate the largest exponent does not round up to NaN. NaN and
// infinities give NaN (0xff); the sign is ignored (negative inputs are
// undefined in ONNX).
func encodeE8M0(x float64, saturate bool, mode string) uint8 {
	u := math.Float32bits(float32(x))
	exp := (u >> 23) & 0xff
	if exp == 0xff {
		return 0xff
	}
	up := false
	switch mode {
	case "up":
		up = u&0x7fffff != 0
	case "nearest":
		g, r, s := u&0x400000 != 0, u&0x200000 != 0, u&0x1fffff != 0
		up = g && (r || s || exp > 0)
	}
	if up && !(saturate && exp == 0xfe) {
		exp++
	}
	return uint8(exp)
}

// wrapSmallInt reduces an integer to the small integer type dt, keeping
// its low bits (two's complement for int4 and int2), as a cast to a
// narrower integer does.
func wrapSmallInt(dt graph.DataType, v int64) int64 {
	switch dt {
	case graph.Int4:
		return int64(int8(v<<4) >> 4)
	case graph.Uint4:
		return v & 0xf
	case graph.Int2:
		return int64(int8(v<<6) >> 6)
	case graph.Uint2:
		return v & 3
	}
	return v
}
