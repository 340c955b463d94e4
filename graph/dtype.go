package graph

import "fmt"

// DataType is an ONNX tensor element type. The numbers are the format's
// own (TensorProto.DataType).
type DataType int32

// The element types of the ONNX format.
const (
	Undefined      DataType = 0
	Float          DataType = 1
	Uint8          DataType = 2
	Int8           DataType = 3
	Uint16         DataType = 4
	Int16          DataType = 5
	Int32          DataType = 6
	Int64          DataType = 7
	String         DataType = 8
	Bool           DataType = 9
	Float16        DataType = 10
	Double         DataType = 11
	Uint32         DataType = 12
	Uint64         DataType = 13
	Complex64      DataType = 14
	Complex128     DataType = 15
	BFloat16       DataType = 16
	Float8E4M3FN   DataType = 17
	Float8E4M3FNUZ DataType = 18
	Float8E5M2     DataType = 19
	Float8E5M2FNUZ DataType = 20
	Uint4          DataType = 21
	Int4           DataType = 22
	Float4E2M1     DataType = 23
	Float8E8M0     DataType = 24
	Uint2          DataType = 25
	Int2           DataType = 26
)

var dtypeNames = map[DataType]string{
	Undefined: "undefined", Float: "float32", Uint8: "uint8", Int8: "int8",
	Uint16: "uint16", Int16: "int16", Int32: "int32", Int64: "int64",
	String: "string", Bool: "bool", Float16: "float16", Double: "float64",
	Uint32: "uint32", Uint64: "uint64", Complex64: "complex64",
	Complex128: "complex128", BFloat16: "bfloat16",
	Float8E4M3FN: "float8e4m3fn", Float8E4M3FNUZ: "float8e4m3fnuz",
	Float8E5M2: "float8e5m2", Float8E5M2FNUZ: "float8e5m2fnuz",
	Uint4: "uint4", Int4: "int4", Float4E2M1: "float4e2m1", Float8E8M0: "float8e8m0",
	Uint2: "uint2", Int2: "int2",
}

// String returns the lower-case name used in reports ("float32", "int64", ...).
func (d DataType) String() string {
	if s, ok := dtypeNames[d]; ok {
		return s
	}
	return fmt.Sprintf("dtype(%d)", int32(d))
}

// Known reports whether d is one of the element types this package knows.
func (d DataType) Known() bool {
	_, ok := dtypeNames[d]
	return ok && d != Undefined
}

// ParseDataType maps a name as printed by String back to its DataType.
func ParseDataType(s string) (DataType, bool) {
	for d, n := range dtypeNames {
		if n == s {
			return d, true
		}
	}
	return Undefined, false
}

// Bits is the storage size of one element in raw_data, in bits (4 and 2
// for the packed sub-byte types); 0 for strings and unknown types.
func (d DataType) Bits() int {
	switch d {
	case Bool, Int8, Uint8, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0:
		return 8
	case Int16, Uint16, Float16, BFloat16:
		return 16
	case Int32, Uint32, Float:
		return 32
	case Int64, Uint64, Double, Complex64:
		return 64
	case Complex128:
		return 128
	case Int4, Uint4, Float4E2M1:
		return 4
	case Int2, Uint2:
		return 2
	}
	return 0
}

// IsFloat reports whether d is a real floating-point type.
func (d DataType) IsFloat() bool {
	switch d {
	case Float, Double, Float16, BFloat16, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float4E2M1, Float8E8M0:
		return true
	}
	return false
}

// IsInt reports whether d is an integer type (bool excluded).
func (d DataType) IsInt() bool {
	switch d {
	case Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32, Uint64, Int4, Uint4, Int2, Uint2:
		return true
	}
	return false
}

// ByteSize is the number of bytes n elements of d take in raw_data, or -1
// when d has no fixed size.
func (d DataType) ByteSize(n int64) int64 {
	b := d.Bits()
	if b == 0 {
		return -1
	}
	if b < 8 {
		per := int64(8 / b) // elements per byte, packed from the low bits
		return (n + per - 1) / per
	}
	return n * int64(b/8)
}
