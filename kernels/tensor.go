package kernels

import (
	"fmt"
	"math"
	"slices"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
)

// Elem is the set of Go element types a Tensor can hold.
type Elem interface {
	float32 | float64 | float16.Float16 | graph.BF16 | int64 | int32 | int16 | int8 |
		uint64 | uint32 | uint16 | uint8 | bool | string
}

// Num are the element types arithmetic kernels are written for (float16 and
// bfloat16 are computed as float32).
type Num interface {
	float32 | float64 | int64 | int32 | int16 | int8 | uint64 | uint32 | uint16 | uint8
}

// Float are the floating-point computation types.
type Float interface{ float32 | float64 }

// Int are the integer computation types.
type Int interface {
	int64 | int32 | int16 | int8 | uint64 | uint32 | uint16 | uint8
}

// Tensor is a dense runtime tensor: an element type, a shape and the
// elements in row-major order in a typed slice ([]float32 for graph.Float,
// []float16.Float16 for graph.Float16, []graph.BF16, []bool, ...). The
// small types are held one element per byte: the 8-bit floats and
// float4e2m1 as their bit patterns in []uint8, int4 and int2 as []int8,
// uint4 and uint2 as []uint8 (the model files pack them; see smallType).
//
// Kernels never change their inputs, so tensors may share element slices
// (Reshape and friends return views); treat a tensor you did not make as
// read-only.
type Tensor struct {
	DType graph.DataType
	Shape []int
	data  any
	// seq is set for a sequence value (ONNX sequence type): DType is its
	// element type, Shape is nil and data is nil.
	seq []*Tensor
	// none marks an empty optional value (ONNX optional type): DType is
	// its element type, Shape, data and seq are nil. An optional that
	// holds a value is that value.
	none bool
	// frozen marks a tensor the session keeps from run to run (a constant
	// or a cached output): nobody may change it and runs never recycle it.
	frozen bool
}

// NewSequence makes a sequence value of tensors of element type dt (the
// tensors are not copied).
func NewSequence(dt graph.DataType, ts []*Tensor) *Tensor {
	return &Tensor{DType: dt, seq: append(make([]*Tensor, 0, len(ts)), ts...)}
}

// NewNone makes an empty optional value of element type dt.
func NewNone(dt graph.DataType) *Tensor { return &Tensor{DType: dt, none: true} }

// IsNone reports whether t is an empty optional value.
func (t *Tensor) IsNone() bool { return t != nil && t.none }

// IsSequence reports whether t is a sequence value.
func (t *Tensor) IsSequence() bool { return t != nil && t.seq != nil }

// notTensor reports whether t is a sequence or an empty optional (which
// hold no elements of their own).
func (t *Tensor) notTensor() bool { return t != nil && (t.seq != nil || t.none) }

// Sequence returns the tensors of a sequence value.
func (t *Tensor) Sequence() []*Tensor { return t.seq }

// Supported reports whether the executor holds tensors of dt: every
// numeric type of ONNX, bool and string (not complex numbers); see
// smallTypeOps and stringOps for the ops that take the small types and
// strings.
func Supported(dt graph.DataType) bool {
	switch dt {
	case graph.Float, graph.Double, graph.Float16, graph.BFloat16, graph.Int64, graph.Int32, graph.Int16,
		graph.Int8, graph.Uint64, graph.Uint32, graph.Uint16, graph.Uint8, graph.Bool:
		return true
	}
	return smallType(dt) || dt == graph.String
}

// New makes a zero tensor of dt and shape.
func New(dt graph.DataType, shape ...int) *Tensor {
	n := shapeSize(shape)
	var d any
	switch dt {
	case graph.Float:
		d = make([]float32, n)
	case graph.Double:
		d = make([]float64, n)
	case graph.Float16:
		d = make([]float16.Float16, n)
	case graph.BFloat16:
		d = make([]graph.BF16, n)
	case graph.Int64:
		d = make([]int64, n)
	case graph.Int32:
		d = make([]int32, n)
	case graph.Int16:
		d = make([]int16, n)
	case graph.Int8, graph.Int4, graph.Int2:
		d = make([]int8, n)
	case graph.Uint64:
		d = make([]uint64, n)
	case graph.Uint32:
		d = make([]uint32, n)
	case graph.Uint16:
		d = make([]uint16, n)
	case graph.Uint8, graph.Uint4, graph.Uint2, graph.Float4E2M1,
		graph.Float8E4M3FN, graph.Float8E4M3FNUZ, graph.Float8E5M2, graph.Float8E5M2FNUZ, graph.Float8E8M0:
		d = make([]uint8, n)
	case graph.Bool:
		d = make([]bool, n)
	case graph.String:
		d = make([]string, n)
	default:
		panic(typePanic(fmt.Sprintf("kernels: New: unsupported element type %v", dt)))
	}
	return newTensor(dt, shape, d)
}

// tensorBox is a Tensor with room for a small shape: one allocation.
type tensorBox struct {
	t    Tensor
	dims [4]int
}

// newTensor makes a tensor of a copy of shape and data.
func newTensor(dt graph.DataType, shape []int, data any) *Tensor {
	if shape != nil && len(shape) <= len(tensorBox{}.dims) {
		b := &tensorBox{t: Tensor{DType: dt, data: data}}
		n := copy(b.dims[:], shape)
		b.t.Shape = b.dims[:n:n]
		return &b.t
	}
	return &Tensor{DType: dt, Shape: slices.Clone(shape), data: data}
}

// FromSlice wraps data (not copied) as a tensor of the given shape.
func FromSlice[T Elem](shape []int, data []T) *Tensor {
	if shapeSize(shape) != len(data) {
		panic(fmt.Sprintf("kernels: FromSlice: %d elements for shape %v", len(data), slices.Clone(shape)))
	}
	return newTensor(dtypeOf[T](), shape, data)
}

// Scalar makes a rank-0 tensor.
func Scalar[T Elem](v T) *Tensor { return FromSlice(nil, []T{v}) }

// Data returns t's elements; T must match t.DType.
func Data[T Elem](t *Tensor) []T {
	d, ok := t.data.([]T)
	if !ok {
		panic(typePanic(fmt.Sprintf("kernels: Data[%T] of a %v tensor", *new(T), t.DType)))
	}
	return d
}

// Raw returns the element slice as an any ([]float32, []int64, ...).
func (t *Tensor) Raw() any { return t.data }

func dtypeOf[T Elem]() graph.DataType {
	switch any(*new(T)).(type) {
	case float32:
		return graph.Float
	case float64:
		return graph.Double
	case float16.Float16:
		return graph.Float16
	case graph.BF16:
		return graph.BFloat16
	case int64:
		return graph.Int64
	case int32:
		return graph.Int32
	case int16:
		return graph.Int16
	case int8:
		return graph.Int8
	case uint64:
		return graph.Uint64
	case uint32:
		return graph.Uint32
	case uint16:
		return graph.Uint16
	case uint8:
		return graph.Uint8
	case bool:
		return graph.Bool
	case string:
		return graph.String
	}
	panic("kernels: unreachable")
}

// Len is the number of elements.
func (t *Tensor) Len() int { return shapeSize(t.Shape) }

// Rank is the number of dimensions.
func (t *Tensor) Rank() int { return len(t.Shape) }

// String prints the type and shape ("float32[2,3]").
func (t *Tensor) String() string {
	if t == nil {
		return "<absent>"
	}
	if t.seq != nil {
		return fmt.Sprintf("seq(%v)[%d]", t.DType, len(t.seq))
	}
	if t.none {
		return fmt.Sprintf("optional(%v) without a value", t.DType)
	}
	return fmt.Sprintf("%v%v", t.DType, shapeString(t.Shape))
}

func shapeString(s []int) string {
	b := []byte{'['}
	for i, d := range s {
		if i > 0 {
			b = append(b, ',')
		}
		b = fmt.Appendf(b, "%d", d)
	}
	return string(append(b, ']'))
}

// Reshaped returns a view of t with another shape of the same size.
func (t *Tensor) Reshaped(shape ...int) *Tensor {
	if shapeSize(shape) != t.Len() {
		panic(fmt.Sprintf("kernels: Reshaped %v to %v", t.Shape, slices.Clone(shape)))
	}
	return newTensor(t.DType, shape, t.data)
}

// Clone copies t's elements.
func (t *Tensor) Clone() *Tensor {
	c := New(t.DType, t.Shape...)
	copyAny(c, 0, t, 0, t.Len())
	return c
}

// Float64s converts the elements of a numeric or bool tensor to float64
// (exactly, but for int64 and uint64 beyond 2^53).
func (t *Tensor) Float64s() []float64 {
	out := make([]float64, t.Len())
	t.Float64sAt(out, 0)
	return out
}

// Float64sAt converts len(dst) elements of t from element off to float64
// into dst, as Float64s does: a comparison of two large tensors reads
// them a block at a time instead of holding both whole as float64.
func (t *Tensor) Float64sAt(dst []float64, off int) {
	n := len(dst)
	if smallFloat(t.DType) {
		decodeSmallFloat(dst, t.DType, t.data.([]uint8)[off:off+n])
		return
	}
	switch d := t.data.(type) {
	case []float32:
		toFloat64s(dst, d[off:off+n])
	case []float64:
		copy(dst, d[off:off+n])
	case []float16.Float16:
		for i, v := range d[off : off+n] {
			dst[i] = float64(v.Float32())
		}
	case []graph.BF16:
		for i, v := range d[off : off+n] {
			dst[i] = float64(v.Float32())
		}
	case []int64:
		toFloat64s(dst, d[off:off+n])
	case []int32:
		toFloat64s(dst, d[off:off+n])
	case []int16:
		toFloat64s(dst, d[off:off+n])
	case []int8:
		toFloat64s(dst, d[off:off+n])
	case []uint64:
		toFloat64s(dst, d[off:off+n])
	case []uint32:
		toFloat64s(dst, d[off:off+n])
	case []uint16:
		toFloat64s(dst, d[off:off+n])
	case []uint8:
		toFloat64s(dst, d[off:off+n])
	case []bool:
		for i, v := range d[off : off+n] {
			dst[i] = 0
			if v {
				dst[i] = 1
			}
		}
	}
}

func toFloat64s[T float32 | int64 | int32 | int16 | int8 | uint64 | uint32 | uint16 | uint8](dst []float64, src []T) {
	for i, v := range src {
		dst[i] = float64(v)
	}
}

// Int64s converts the elements of an integer or bool tensor to int64 (float
// elements are truncated; uint64 elements past 2^63 wrap).
func (t *Tensor) Int64s() []int64 {
	if d, ok := t.data.([]int64); ok {
		return d
	}
	out := make([]int64, t.Len())
	if smallFloat(t.DType) {
		for i, v := range t.Float64s() {
			out[i] = int64(v)
		}
		return out
	}
	switch d := t.data.(type) {
	case []int32:
		for i, v := range d {
			out[i] = int64(v)
		}
	case []int16:
		for i, v := range d {
			out[i] = int64(v)
		}
	case []uint64:
		for i, v := range d {
			out[i] = int64(v)
		}
	case []uint32:
		for i, v := range d {
			out[i] = int64(v)
		}
	case []uint16:
		for i, v := range d {
			out[i] = int64(v)
		}
	case []int8:
		for i, v := range d {
			out[i] = int64(v)
		}
	case []uint8:
		for i, v := range d {
			out[i] = int64(v)
		}
	case []bool:
		for i, v := range d {
			if v {
				out[i] = 1
			}
		}
	default:
		for i, v := range t.Float64s() {
			out[i] = int64(v)
		}
	}
	return out
}

// FromGraph decodes a constant tensor of the model.
func FromGraph(gt *graph.Tensor) (*Tensor, error) {
	dt := gt.DataType()
	if !Supported(dt) {
		return nil, fmt.Errorf("tensor %q: element type %v: %w", gt.Name(), dt, ErrUnsupportedType)
	}
	d, err := gt.Data()
	if err != nil {
		return nil, err
	}
	shape := make([]int, len(gt.Dims()))
	for i, v := range gt.Dims() {
		if v < 0 || v > math.MaxInt32 {
			return nil, fmt.Errorf("tensor %q: bad dimension %d", gt.Name(), v)
		}
		shape[i] = int(v)
	}
	t := &Tensor{DType: dt, Shape: shape, data: d}
	if t.Len() != lenAny(d) {
		return nil, fmt.Errorf("tensor %q: %d elements for shape %v", gt.Name(), lenAny(d), shape)
	}
	return t, nil
}

// ToGraph encodes t as a constant tensor named name.
func (t *Tensor) ToGraph(name string) (*graph.Tensor, error) {
	dims := make([]int64, len(t.Shape))
	for i, v := range t.Shape {
		dims[i] = int64(v)
	}
	return graph.NewTensor(name, t.DType, dims, t.data)
}

// ReadTensorFile reads an ONNX test-data file (a TensorProto, such as
// input_0.pb).
func ReadTensorFile(path string) (*Tensor, error) {
	gt, err := graph.ReadTensorFile(path)
	if err != nil {
		return nil, err
	}
	t, err := FromGraph(gt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// WriteTensorFile writes t as a TensorProto file named name inside.
func WriteTensorFile(path, name string, t *Tensor) error {
	gt, err := t.ToGraph(name)
	if err != nil {
		return err
	}
	return graph.WriteTensorFile(path, gt)
}

func lenAny(d any) int {
	switch d := d.(type) {
	case []float32:
		return len(d)
	case []float64:
		return len(d)
	case []float16.Float16:
		return len(d)
	case []graph.BF16:
		return len(d)
	case []int64:
		return len(d)
	case []int32:
		return len(d)
	case []int16:
		return len(d)
	case []int8:
		return len(d)
	case []uint64:
		return len(d)
	case []uint32:
		return len(d)
	case []uint16:
		return len(d)
	case []uint8:
		return len(d)
	case []bool:
		return len(d)
	case []string:
		return len(d)
	}
	return -1
}

func shapeSize(s []int) int {
	n := 1
	for _, d := range s {
		if d < 0 {
			panic(fmt.Sprintf("kernels: negative dimension in %v", slices.Clone(s)))
		}
		n *= d
	}
	return n
}

// copyAny copies n elements from src at so to dst at do; the types must match.
func copyAny(dst *Tensor, do int, src *Tensor, so, n int) {
	switch d := dst.data.(type) {
	case []float32:
		copy(d[do:do+n], src.data.([]float32)[so:so+n])
	case []float64:
		copy(d[do:do+n], src.data.([]float64)[so:so+n])
	case []float16.Float16:
		copy(d[do:do+n], src.data.([]float16.Float16)[so:so+n])
	case []graph.BF16:
		copy(d[do:do+n], src.data.([]graph.BF16)[so:so+n])
	case []int64:
		copy(d[do:do+n], src.data.([]int64)[so:so+n])
	case []int32:
		copy(d[do:do+n], src.data.([]int32)[so:so+n])
	case []int16:
		copy(d[do:do+n], src.data.([]int16)[so:so+n])
	case []int8:
		copy(d[do:do+n], src.data.([]int8)[so:so+n])
	case []uint64:
		copy(d[do:do+n], src.data.([]uint64)[so:so+n])
	case []uint32:
		copy(d[do:do+n], src.data.([]uint32)[so:so+n])
	case []uint16:
		copy(d[do:do+n], src.data.([]uint16)[so:so+n])
	case []uint8:
		copy(d[do:do+n], src.data.([]uint8)[so:so+n])
	case []bool:
		copy(d[do:do+n], src.data.([]bool)[so:so+n])
	case []string:
		copy(d[do:do+n], src.data.([]string)[so:so+n])
	default:
		panic(typePanic("kernels: copyAny of " + dst.DType.String()))
	}
}
