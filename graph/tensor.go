package graph

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/x448/float16"
	"google.golang.org/protobuf/proto"

	"github.com/onnxpe/onnxpe/internal/onnxpb"
)

// MaxTensorBytes bounds the decoded size of one tensor. A model that
// declares a larger tensor is refused before anything is allocated.
const MaxTensorBytes = 1 << 40

// ErrTensorSize is wrapped by errors about dims that do not fit the data.
var ErrTensorSize = errors.New("tensor size does not match its data")

// Tensor is a constant tensor of a model: an initializer, the value of a
// Constant node or of a tensor attribute. Its elements are decoded only when
// asked for; elements stored in an external file are read from it then.
//
// A Tensor keeps every field it was loaded with, so saving it unchanged
// writes the same bytes.
type Tensor struct {
	pb  *onnxpb.TensorProto
	ext *External // non-nil when the elements live in a side file
}

// NewTensor makes a tensor from a Go slice whose element type matches dt:
// []float32 (Float), []float64 (Double), []float16.Float16 (Float16),
// []BF16 (BFloat16), []int8, []int16, []int32, []int64, []uint8,
// []uint16, []uint32, []uint64, []bool, []string; the 8-bit float types as their
// bit patterns in []uint8, int4 and int2 as []int8 and uint4, uint2 and
// float4e2m1 as []uint8, one element per entry (packed on the way). The
// elements are stored in raw_data.
func NewTensor(name string, dt DataType, dims []int64, data any) (*Tensor, error) {
	n, err := numElements(dims)
	if err != nil {
		return nil, err
	}
	if v, ok := data.([]string); ok && dt == String {
		if int64(len(v)) != n {
			return nil, fmt.Errorf("tensor %q: %d elements for dims %v: %w", name, len(v), dims, ErrTensorSize)
		}
		b := make([][]byte, len(v))
		for i, x := range v {
			b[i] = []byte(x)
		}
		return stringTensor(name, append([]int64(nil), dims...), b), nil
	}
	raw, m, err := encodeRaw(dt, data)
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	if int64(m) != n {
		return nil, fmt.Errorf("tensor %q: %d elements for dims %v: %w", name, m, dims, ErrTensorSize)
	}
	p := &onnxpb.TensorProto{Dims: append([]int64(nil), dims...), DataType: proto.Int32(int32(dt)), RawData: raw}
	if name != "" {
		p.Name = proto.String(name)
	}
	return &Tensor{pb: p}, nil
}

// NewExternalTensor makes a tensor of dt and dims whose elements are
// length bytes at offset in the side file location (a plain name beside
// the model): a tensor written to a side file as it was made, which a
// model saved with KeepStorage in that file's folder refers to. Its
// elements cannot be read until the saved model is loaded again.
func NewExternalTensor(name string, dt DataType, dims []int64, location string, offset, length int64) (*Tensor, error) {
	n, err := numElements(dims)
	if err != nil {
		return nil, err
	}
	if want := dt.ByteSize(n); want != length || offset < 0 {
		return nil, fmt.Errorf("tensor %q: %d bytes at offset %d for dims %v of %v (%d bytes): %w", name, length, offset, dims, dt, want, ErrTensorSize)
	}
	if _, err := resolveLocationName(location); err != nil {
		return nil, err
	}
	pb := &onnxpb.TensorProto{
		Name: proto.String(name), DataType: proto.Int32(int32(dt)), Dims: append([]int64(nil), dims...),
		DataLocation: onnxpb.TensorProto_EXTERNAL.Enum(),
		ExternalData: []*onnxpb.StringStringEntryProto{
			{Key: proto.String("location"), Value: proto.String(location)},
			{Key: proto.String("offset"), Value: proto.String(strconv.FormatInt(offset, 10))},
			{Key: proto.String("length"), Value: proto.String(strconv.FormatInt(length, 10))},
		},
	}
	return &Tensor{pb: pb, ext: &External{Location: location, Offset: offset, Length: length}}, nil
}

// TensorFromFloat64 stores float64 values as a tensor of the floating-point
// type dt, rounding each element once (to nearest, ties to even).
func TensorFromFloat64(name string, dt DataType, dims []int64, v []float64) (*Tensor, error) {
	var data any
	switch dt {
	case Double:
		data = v
	case Float:
		d := make([]float32, len(v))
		for i, x := range v {
			d[i] = float32(x)
		}
		data = d
	case Float16:
		d := make([]float16.Float16, len(v))
		for i, x := range v {
			d[i] = float16.Fromfloat32(roundTo32For16(x))
		}
		data = d
	case BFloat16:
		d := make([]BF16, len(v))
		for i, x := range v {
			d[i] = BF16FromFloat32(float32(x))
		}
		data = d
	default:
		return nil, fmt.Errorf("tensor %q: TensorFromFloat64 needs a float type, not %v", name, dt)
	}
	return NewTensor(name, dt, dims, data)
}

// roundTo32For16 narrows x to float32 without a second rounding error for
// the later float32->float16 step: float32 has 13 more mantissa bits than
// float16, and ties produced by the first rounding are broken by rounding
// the float32 toward x.
func roundTo32For16(x float64) float32 {
	f := float32(x)
	if float64(f) == x || math.IsInf(x, 0) || math.IsNaN(x) {
		return f
	}
	// Make the float32 "sticky": if rounding lost bits, set the lowest bit
	// so that a tie at half precision is resolved the way x would be.
	u := math.Float32bits(f)
	if float64(f) > x && x > 0 || float64(f) < x && x < 0 {
		u--
	}
	return math.Float32frombits(u | 1)
}

// Name is the tensor's name (the initializer's value name), maybe empty.
func (t *Tensor) Name() string { return t.pb.GetName() }

// SetName renames the tensor.
func (t *Tensor) SetName(s string) { t.pb.Name = proto.String(s) }

// DataType is the element type.
func (t *Tensor) DataType() DataType { return DataType(t.pb.GetDataType()) }

// Dims is the shape. The slice is the tensor's own: do not change it.
func (t *Tensor) Dims() []int64 { return t.pb.Dims }

// Len is the number of elements (1 for a scalar).
func (t *Tensor) Len() int64 {
	n, _ := numElements(t.pb.Dims)
	return n
}

// IsExternal reports whether the elements are stored in a side file.
func (t *Tensor) IsExternal() bool { return t.ext != nil }

// External describes where the elements are stored, or nil when inline.
func (t *Tensor) External() *External { return t.ext }

// ByteSize is the size of the elements in raw form, or -1 for strings.
func (t *Tensor) ByteSize() int64 { return t.DataType().ByteSize(t.Len()) }

// Doc is the tensor's doc_string.
func (t *Tensor) Doc() string { return t.pb.GetDocString() }

// numElements multiplies dims, refusing negative dims and products past
// MaxTensorBytes elements.
func numElements(dims []int64) (int64, error) {
	n := int64(1)
	for _, d := range dims {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension %d in %v: %w", d, dims, ErrTensorSize)
		}
		if d != 0 && n > MaxTensorBytes/d {
			return 0, fmt.Errorf("dims %v have more than 2^40 elements: %w", dims, ErrTensorSize)
		}
		n *= d
	}
	return n, nil
}

// check verifies that the dims agree with the stored elements. It reads no
// external data (the side file's size was checked when it was resolved).
func (t *Tensor) check() error {
	n, err := numElements(t.pb.Dims)
	if err != nil {
		return err
	}
	if t.pb.Segment != nil {
		return nil // one segment of a larger tensor: no whole-tensor count to check
	}
	dt := t.DataType()
	if !dt.Known() {
		return fmt.Errorf("unknown element type %d", int32(dt))
	}
	if t.ext != nil {
		if t.ext.missing && t.ext.Length == -1 {
			return nil // nothing to check against
		}
		if want := dt.ByteSize(n); want >= 0 && t.ext.Length != want {
			return fmt.Errorf("dims %v of %v need %d bytes, external data has %d: %w", t.pb.Dims, dt, want, t.ext.Length, ErrTensorSize)
		}
		return nil
	}
	if t.pb.RawData != nil {
		if want := dt.ByteSize(n); want < 0 || int64(len(t.pb.RawData)) != want {
			return fmt.Errorf("dims %v of %v need %d bytes, raw_data has %d: %w", t.pb.Dims, dt, want, len(t.pb.RawData), ErrTensorSize)
		}
		return nil
	}
	have := int64(t.typedLen())
	want := n
	switch dt {
	case Complex64, Complex128:
		want = 2 * n
	case Int4, Uint4, Float4E2M1, Int2, Uint2:
		want = dt.ByteSize(n) // one packed byte per int32 entry
	}
	if have != want {
		return fmt.Errorf("dims %v of %v need %d values, the tensor holds %d: %w", t.pb.Dims, dt, want, have, ErrTensorSize)
	}
	return nil
}

// typedLen is the number of values in the typed field that dt uses.
func (t *Tensor) typedLen() int {
	switch t.DataType() {
	case Float, Complex64:
		return len(t.pb.FloatData)
	case Double, Complex128:
		return len(t.pb.DoubleData)
	case Int64:
		return len(t.pb.Int64Data)
	case Uint32, Uint64:
		return len(t.pb.Uint64Data)
	case String:
		return len(t.pb.StringData)
	default:
		return len(t.pb.Int32Data)
	}
}

// RawBytes returns the elements in raw form (little-endian, fixed width),
// reading them from the side file if they are external. For inline raw_data
// the returned slice is the tensor's own: do not change it.
func (t *Tensor) RawBytes() ([]byte, error) {
	if t.DataType() == String {
		return nil, fmt.Errorf("tensor %q: string tensors have no raw form", t.Name())
	}
	if t.pb.Segment != nil {
		return nil, fmt.Errorf("tensor %q: holds one segment of a larger tensor, which onnxpe does not assemble", t.Name())
	}
	if t.ext != nil {
		return t.ext.read()
	}
	if t.pb.RawData != nil {
		return t.pb.RawData, nil
	}
	if err := t.check(); err != nil {
		return nil, fmt.Errorf("tensor %q: %w", t.Name(), err)
	}
	return t.typedToRaw(), nil
}

// typedToRaw converts the typed field to raw form.
func (t *Tensor) typedToRaw() []byte {
	dt := t.DataType()
	n := t.Len()
	out := make([]byte, dt.ByteSize(n))
	switch dt {
	case Float, Complex64:
		for i, v := range t.pb.FloatData {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
	case Double, Complex128:
		for i, v := range t.pb.DoubleData {
			binary.LittleEndian.PutUint64(out[8*i:], math.Float64bits(v))
		}
	case Int64:
		for i, v := range t.pb.Int64Data {
			binary.LittleEndian.PutUint64(out[8*i:], uint64(v))
		}
	case Uint64:
		for i, v := range t.pb.Uint64Data {
			binary.LittleEndian.PutUint64(out[8*i:], v)
		}
	case Uint32:
		for i, v := range t.pb.Uint64Data {
			binary.LittleEndian.PutUint32(out[4*i:], uint32(v))
		}
	case Int32:
		for i, v := range t.pb.Int32Data {
			binary.LittleEndian.PutUint32(out[4*i:], uint32(v))
		}
	case Int16, Uint16, Float16, BFloat16:
		for i, v := range t.pb.Int32Data {
			binary.LittleEndian.PutUint16(out[2*i:], uint16(v))
		}
	default: // one byte per int32 entry (8-bit types and packed sub-byte groups)
		for i, v := range t.pb.Int32Data {
			out[i] = byte(v)
		}
	}
	return out
}

// Data decodes the elements into a new Go slice of the natural type:
// []float32, []float64, []float16.Float16, []BF16, []int8, []int16,
// []int32, []int64, []uint8, []uint16, []uint32, []uint64, []bool,
// []string, []complex64, []complex128. The 8-bit float types come as their
// bit patterns in []uint8; int4 and int2 as []int8, uint4, uint2 and
// float4e2m1 as []uint8, one element per entry (unpacked). Use Float64s
// for numbers.
func (t *Tensor) Data() (any, error) {
	dt := t.DataType()
	if dt == String {
		if err := t.check(); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", t.Name(), err)
		}
		s := make([]string, len(t.pb.StringData))
		for i, b := range t.pb.StringData {
			s[i] = string(b)
		}
		return s, nil
	}
	raw, err := t.RawBytes()
	if err != nil {
		return nil, err
	}
	n := int(t.Len())
	if want := dt.ByteSize(int64(n)); int64(len(raw)) != want {
		return nil, fmt.Errorf("tensor %q: dims %v of %v need %d bytes, have %d: %w", t.Name(), t.Dims(), dt, want, len(raw), ErrTensorSize)
	}
	return decodeRaw(dt, raw, n)
}

// decodeRaw decodes n elements of dt from little-endian raw bytes.
func decodeRaw(dt DataType, raw []byte, n int) (any, error) {
	le := binary.LittleEndian
	switch dt {
	case Float:
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
		return v, nil
	case Double:
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Float64frombits(le.Uint64(raw[8*i:]))
		}
		return v, nil
	case Float16:
		v := make([]float16.Float16, n)
		for i := range v {
			v[i] = float16.Frombits(le.Uint16(raw[2*i:]))
		}
		return v, nil
	case BFloat16:
		v := make([]BF16, n)
		for i := range v {
			v[i] = BF16(le.Uint16(raw[2*i:]))
		}
		return v, nil
	case Int8:
		v := make([]int8, n)
		for i := range v {
			v[i] = int8(raw[i])
		}
		return v, nil
	case Uint8, Float8E4M3FN, Float8E4M3FNUZ, Float8E5M2, Float8E5M2FNUZ, Float8E8M0:
		return append([]uint8(nil), raw[:n]...), nil
	case Int16:
		v := make([]int16, n)
		for i := range v {
			v[i] = int16(le.Uint16(raw[2*i:]))
		}
		return v, nil
	case Uint16:
		v := make([]uint16, n)
		for i := range v {
			v[i] = le.Uint16(raw[2*i:])
		}
		return v, nil
	case Int32:
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(le.Uint32(raw[4*i:]))
		}
		return v, nil
	case Uint32:
		v := make([]uint32, n)
		for i := range v {
			v[i] = le.Uint32(raw[4*i:])
		}
		return v, nil
	case Int64:
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(le.Uint64(raw[8*i:]))
		}
		return v, nil
	case Uint64:
		v := make([]uint64, n)
		for i := range v {
			v[i] = le.Uint64(raw[8*i:])
		}
		return v, nil
	case Bool:
		v := make([]bool, n)
		for i := range v {
			v[i] = raw[i] != 0
		}
		return v, nil
	case Complex64:
		v := make([]complex64, n)
		for i := range v {
			v[i] = complex(math.Float32frombits(le.Uint32(raw[8*i:])), math.Float32frombits(le.Uint32(raw[8*i+4:])))
		}
		return v, nil
	case Complex128:
		v := make([]complex128, n)
		for i := range v {
			v[i] = complex(math.Float64frombits(le.Uint64(raw[16*i:])), math.Float64frombits(le.Uint64(raw[16*i+8:])))
		}
		return v, nil
	case Int4:
		v := make([]int8, n)
		for i := range v {
			nib := raw[i/2] >> (4 * (i % 2)) & 0xf
			v[i] = int8(nib<<4) >> 4
		}
		return v, nil
	case Uint4, Float4E2M1:
		v := make([]uint8, n)
		for i := range v {
			v[i] = raw[i/2] >> (4 * (i % 2)) & 0xf
		}
		return v, nil
	case Int2:
		v := make([]int8, n)
		for i := range v {
			crumb := raw[i/4] >> (2 * (i % 4)) & 3
			v[i] = int8(crumb<<6) >> 6
		}
		return v, nil
	case Uint2:
		v := make([]uint8, n)
		for i := range v {
			v[i] = raw[i/4] >> (2 * (i % 4)) & 3
		}
		return v, nil
	}
	return nil, fmt.Errorf("cannot decode element type %v", dt)
}

// Float64s decodes any numeric or bool tensor to float64 values.
func (t *Tensor) Float64s() ([]float64, error) {
	d, err := t.Data()
	if err != nil {
		return nil, err
	}
	dt := t.DataType()
	switch v := d.(type) {
	case []float64:
		return v, nil
	case []float32:
		return convert(v, func(x float32) float64 { return float64(x) }), nil
	case []float16.Float16:
		return convert(v, func(x float16.Float16) float64 { return float64(x.Float32()) }), nil
	case []BF16:
		return convert(v, func(x BF16) float64 { return float64(x.Float32()) }), nil
	case []int8:
		return convert(v, func(x int8) float64 { return float64(x) }), nil
	case []int16:
		return convert(v, func(x int16) float64 { return float64(x) }), nil
	case []int32:
		return convert(v, func(x int32) float64 { return float64(x) }), nil
	case []int64:
		return convert(v, func(x int64) float64 { return float64(x) }), nil
	case []uint16:
		return convert(v, func(x uint16) float64 { return float64(x) }), nil
	case []uint32:
		return convert(v, func(x uint32) float64 { return float64(x) }), nil
	case []uint64:
		return convert(v, func(x uint64) float64 { return float64(x) }), nil
	case []bool:
		return convert(v, func(x bool) float64 {
			if x {
				return 1
			}
			return 0
		}), nil
	case []uint8:
		switch dt {
		case Uint8, Uint4, Uint2:
			return convert(v, func(x uint8) float64 { return float64(x) }), nil
		case Float4E2M1:
			return convert(v, func(x uint8) float64 { return float64(float4ToFloat32(x)) }), nil
		default:
			return convert(v, func(x uint8) float64 { return float64(float8ToFloat32(dt, x)) }), nil
		}
	}
	return nil, fmt.Errorf("tensor %q: %v is not numeric", t.Name(), dt)
}

// Int64s decodes an integer or bool tensor to int64 values (uint64 values
// past 2^63 wrap, as a C cast would).
func (t *Tensor) Int64s() ([]int64, error) {
	dt := t.DataType()
	if !dt.IsInt() && dt != Bool {
		return nil, fmt.Errorf("tensor %q: %v is not an integer type", t.Name(), dt)
	}
	d, err := t.Data()
	if err != nil {
		return nil, err
	}
	switch v := d.(type) {
	case []int64:
		return v, nil
	case []uint64:
		return convert(v, func(x uint64) int64 { return int64(x) }), nil
	}
	f, err := t.Float64s() // every other integer type fits a float64 exactly
	if err != nil {
		return nil, err
	}
	return convert(f, func(x float64) int64 { return int64(x) }), nil
}

func convert[S, D any](s []S, f func(S) D) []D {
	d := make([]D, len(s))
	for i, x := range s {
		d[i] = f(x)
	}
	return d
}

// encodeRaw encodes a Go slice as raw_data for dt, returning the bytes and
// the element count.
func encodeRaw(dt DataType, data any) ([]byte, int, error) {
	le := binary.LittleEndian
	mismatch := func() ([]byte, int, error) {
		return nil, 0, fmt.Errorf("a %T cannot hold %v elements", data, dt)
	}
	switch v := data.(type) {
	case []float32:
		if dt != Float {
			return mismatch()
		}
		b := make([]byte, 4*len(v))
		for i, x := range v {
			le.PutUint32(b[4*i:], math.Float32bits(x))
		}
		return b, len(v), nil
	case []float64:
		if dt != Double {
			return mismatch()
		}
		b := make([]byte, 8*len(v))
		for i, x := range v {
			le.PutUint64(b[8*i:], math.Float64bits(x))
		}
		return b, len(v), nil
	case []float16.Float16:
		if dt != Float16 {
			return mismatch()
		}
		b := make([]byte, 2*len(v))
		for i, x := range v {
			le.PutUint16(b[2*i:], x.Bits())
		}
		return b, len(v), nil
	case []BF16:
		if dt != BFloat16 {
			return mismatch()
		}
		b := make([]byte, 2*len(v))
		for i, x := range v {
			le.PutUint16(b[2*i:], uint16(x))
		}
		return b, len(v), nil
	case []int8:
		if dt == Int4 || dt == Int2 {
			return packSubByte(dt, len(v), func(i int) byte { return byte(v[i]) }), len(v), nil
		}
		if dt != Int8 {
			return mismatch()
		}
		b := make([]byte, len(v))
		for i, x := range v {
			b[i] = byte(x)
		}
		return b, len(v), nil
	case []uint8:
		if dt == Uint4 || dt == Float4E2M1 || dt == Uint2 {
			return packSubByte(dt, len(v), func(i int) byte { return v[i] }), len(v), nil
		}
		if dt != Uint8 && dt.Bits() != 8 {
			return mismatch()
		}
		return append([]byte(nil), v...), len(v), nil
	case []int16:
		if dt != Int16 {
			return mismatch()
		}
		b := make([]byte, 2*len(v))
		for i, x := range v {
			le.PutUint16(b[2*i:], uint16(x))
		}
		return b, len(v), nil
	case []uint16:
		if dt != Uint16 {
			return mismatch()
		}
		b := make([]byte, 2*len(v))
		for i, x := range v {
			le.PutUint16(b[2*i:], x)
		}
		return b, len(v), nil
	case []int32:
		if dt != Int32 {
			return mismatch()
		}
		b := make([]byte, 4*len(v))
		for i, x := range v {
			le.PutUint32(b[4*i:], uint32(x))
		}
		return b, len(v), nil
	case []uint32:
		if dt != Uint32 {
			return mismatch()
		}
		b := make([]byte, 4*len(v))
		for i, x := range v {
			le.PutUint32(b[4*i:], x)
		}
		return b, len(v), nil
	case []int64:
		if dt != Int64 {
			return mismatch()
		}
		b := make([]byte, 8*len(v))
		for i, x := range v {
			le.PutUint64(b[8*i:], uint64(x))
		}
		return b, len(v), nil
	case []uint64:
		if dt != Uint64 {
			return mismatch()
		}
		b := make([]byte, 8*len(v))
		for i, x := range v {
			le.PutUint64(b[8*i:], x)
		}
		return b, len(v), nil
	case []bool:
		if dt != Bool {
			return mismatch()
		}
		b := make([]byte, len(v))
		for i, x := range v {
			if x {
				b[i] = 1
			}
		}
		return b, len(v), nil
	}
	return mismatch()
}

// packSubByte packs n elements of a 4-bit or 2-bit type (element i is
// at(i), its low bits used) into bytes, the first element in the lowest
// bits.
func packSubByte(dt DataType, n int, at func(int) byte) []byte {
	bits := dt.Bits()
	per := 8 / bits
	mask := byte(1)<<bits - 1
	b := make([]byte, dt.ByteSize(int64(n)))
	for i := range n {
		b[i/per] |= (at(i) & mask) << (bits * (i % per))
	}
	return b
}

// Clone returns a deep copy of t (external data stays where it is).
func (t *Tensor) Clone() *Tensor {
	c := &Tensor{pb: proto.Clone(t.pb).(*onnxpb.TensorProto)}
	if t.ext != nil {
		e := *t.ext
		c.ext = &e
	}
	return c
}
