package kernels

import (
	"unsafe"

	"github.com/onnxpe/onnxpe/graph"
)

// Weights of a session: an initializer stored as external data is used
// in place, over the side file mapped read-only (graph.Tensor.Mapped),
// when its element type has a fixed width of whole bytes and the mapping
// is aligned to it (onnxpe aligns the tensors of the side files it writes
// to 4096 bytes); kernels never write their inputs, so the file's pages
// serve as the tensor. Others are decoded into memory of their own.

// constOf converts an initializer for the session.
func (s *Session) constOf(gt *graph.Tensor) (*Tensor, error) {
	if t, ok, err := mappedConst(gt); err != nil || ok {
		if ok {
			if s.mapped == nil {
				s.mapped = map[*Tensor][]byte{}
			}
			b, _, _ := gt.Mapped()
			s.mapped[t] = b
		}
		return t, err
	}
	return FromGraph(gt)
}

// mappedConst is the tensor over gt's mapped bytes; ok is false when gt
// is not mapped or its type or alignment does not allow it.
func mappedConst(gt *graph.Tensor) (t *Tensor, ok bool, err error) {
	dt := gt.DataType()
	size := elemBytes(dt)
	if size == 0 || !littleEndian {
		return nil, false, nil
	}
	b, ok, err := gt.Mapped()
	if err != nil || !ok {
		return nil, false, err
	}
	n := int(gt.Len())
	if int64(len(b)) != int64(n)*int64(size) {
		return nil, false, nil // FromGraph names the size mismatch
	}
	if n > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%uintptr(size) != 0 {
		return nil, false, nil
	}
	shape := make([]int, len(gt.Dims()))
	for i, d := range gt.Dims() {
		shape[i] = int(d)
	}
	d := typedOver(dt, unsafe.Pointer(unsafe.SliceData(b)), n)
	if n == 0 {
		return nil, false, nil
	}
	return &Tensor{DType: dt, Shape: shape, data: d}, true, nil
}

// elemBytes is the width of dt's elements when a tensor of dt holds them
// as they are stored (little-endian, whole bytes), else 0 (bool, whose
// bytes may be other than 0 and 1; the packed and 8-bit float types,
// held one per byte decoded; strings).
func elemBytes(dt graph.DataType) int {
	switch dt {
	case graph.Double, graph.Int64, graph.Uint64:
		return 8
	case graph.Float, graph.Int32, graph.Uint32:
		return 4
	case graph.Float16, graph.BFloat16, graph.Int16, graph.Uint16:
		return 2
	case graph.Int8, graph.Uint8:
		return 1
	}
	return 0
}

// littleEndian says whether the machine stores numbers as the format does.
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// mappedBytes is the size of the constants used in place.
func (s *Session) mappedBytes() int64 {
	var n int64
	for _, b := range s.mapped {
		n += int64(len(b))
	}
	return n
}
