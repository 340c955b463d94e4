package kernels

import (
	"os"
	"slices"
	"sync"
	"unsafe"

	"github.com/x448/float16"

	"github.com/onnxpe/onnxpe/graph"
)

// SpillMin is the size from which Spill.Tensor moves a tensor's elements
// out of memory.
const SpillMin = 64 << 20

// Spill keeps large tensors out of memory while they wait: verify holds
// every output of one side until the other side has run (the logits of
// 8192 positions of a Llama of 32000 tokens are 1 GB a set), and the
// planner keeps the long probe's outputs for the sweep. Tensor writes a
// tensor's elements to a temporary file (removed at once: only the
// mapping names it) and returns a tensor over that file mapped read-only,
// whose pages are read back only when used and are the page cache's, not
// the process's memory, while they wait.
//
// The tensors it returns are frozen (read-only memory: a write faults)
// and valid until Close, which unmaps them: their owner closes the Spill
// when none of them is used any more. A nil *Spill keeps every tensor in
// memory.
type Spill struct {
	mu   sync.Mutex
	maps [][]byte
}

// NewSpill returns a Spill, or nil where files cannot be mapped.
func NewSpill() *Spill {
	if !canSpill || !littleEndian {
		return nil
	}
	return &Spill{}
}

// Tensor returns t (also when t is spilled already: a session wrote it
// into a Spill as it made it, see Session.RunInto), or t's elements moved to a mapped temporary file when
// t holds SpillMin bytes or more of a fixed-width numeric type. Any
// failure to write the file (a full disk) keeps t as it is.
func (s *Spill) Tensor(t *Tensor) *Tensor {
	if s == nil || t == nil || t.seq != nil || t.none || isSpilled(t) {
		return t
	}
	size := elemBytes(t.DType)
	n := t.Len()
	if size == 0 || n != lenAny(t.data) || int64(n)*int64(size) < SpillMin {
		return t
	}
	src := unsafe.Slice((*byte)(dataPointer(t.data)), n*size)
	b, err := spillBytes(src)
	if err != nil {
		return t
	}
	d := typedOver(t.DType, unsafe.Pointer(unsafe.SliceData(b)), n)
	if d == nil {
		unmapSpilled(b)
		return t
	}
	s.keep(b)
	return &Tensor{DType: t.DType, Shape: slices.Clone(t.Shape), data: d, frozen: true}
}

// keep registers the mapping b as the Spill's and the process's.
func (s *Spill) keep(b []byte) {
	s.mu.Lock()
	s.maps = append(s.maps, b)
	s.mu.Unlock()
	spilled.mu.Lock()
	if spilled.maps == nil {
		spilled.maps = map[uintptr][]byte{}
	}
	spilled.maps[uintptr(unsafe.Pointer(unsafe.SliceData(b)))] = b
	spilled.mu.Unlock()
}

// sink returns a zeroed tensor of dt and shape over a new temporary file
// mapped read-write, for a kernel to write a graph output into as it makes
// it (releasing the pages behind its writing with ReleaseSpilled), or nil
// when s is nil or the file cannot be made. The tensor is the Spill's
// like those Tensor returns, but writable until it is handed out.
func (s *Spill) sink(dt graph.DataType, shape []int) *Tensor {
	size := elemBytes(dt)
	n := shapeSize(shape)
	if s == nil || size == 0 || n == 0 {
		return nil
	}
	b, err := spillFile(n * size)
	if err != nil {
		return nil
	}
	d := typedOver(dt, unsafe.Pointer(unsafe.SliceData(b)), n)
	if d == nil {
		unmapSpilled(b)
		return nil
	}
	s.keep(b)
	return &Tensor{DType: dt, Shape: slices.Clone(shape), data: d}
}

// isSpilled reports whether t's elements are in a mapping of a Spill.
func isSpilled(t *Tensor) bool {
	if t == nil || t.data == nil {
		return false
	}
	p := uintptr(dataPointer(t.data))
	spilled.mu.Lock()
	defer spilled.mu.Unlock()
	for base, b := range spilled.maps {
		if p >= base && p < base+uintptr(len(b)) {
			return true
		}
	}
	return false
}

// Outputs returns m with its large tensors spilled (m itself is not
// changed).
func (s *Spill) Outputs(m map[string]*Tensor) map[string]*Tensor {
	if s == nil || m == nil {
		return m
	}
	var out map[string]*Tensor
	for k, t := range m {
		if st := s.Tensor(t); st != t {
			if out == nil {
				out = make(map[string]*Tensor, len(m))
				for k2, t2 := range m {
					out[k2] = t2
				}
			}
			out[k] = st
		}
	}
	if out == nil {
		return m
	}
	return out
}

// Release drops the pages of a spilled tensor that were read back (the
// file keeps them); it does nothing to other tensors. The tensor may come
// from any Spill of the process (a Prepared's probe compared by a
// comparison of its own).
func (s *Spill) Release(t *Tensor) {
	if t == nil {
		return
	}
	ReleaseSpilled(t, 0, t.Len())
}

var pageSize = os.Getpagesize()

// spilled is every mapping a Spill of the process holds, so that a range
// is released only while it is mapped (an address unmapped and mapped
// again as ordinary memory must never be advised to drop its pages).
var spilled struct {
	mu   sync.Mutex
	maps map[uintptr][]byte
}

// ReleaseSpilled drops the read-back pages of elements [off, off+n) of
// t when t is a spilled tensor (whole pages inside the range; the file
// keeps them, a later read faults them in again). It does nothing to
// other tensors. A comparison calls it behind its reading of a spilled
// output of gigabytes, so that the output's pages do not all come back
// into the process at once.
func ReleaseSpilled(t *Tensor, off, n int) {
	if t == nil || t.data == nil || n <= 0 {
		return
	}
	size := elemBytes(t.DType)
	if size == 0 {
		return
	}
	p := uintptr(dataPointer(t.data)) + uintptr(off*size)
	end := p + uintptr(n*size)
	spilled.mu.Lock()
	defer spilled.mu.Unlock()
	for base, b := range spilled.maps {
		if p < base || end > base+uintptr(len(b)) {
			continue
		}
		page := uintptr(pageSize)
		lo := (p + page - 1) &^ (page - 1)
		hi := end &^ (page - 1)
		if end == base+uintptr(len(b)) {
			hi = end // the mapping's last page is its own
		}
		if hi > lo {
			releaseSpilled(b[lo-base : hi-base])
		}
		return
	}
}

// Bytes is the size of the tensors spilled and not yet closed.
func (s *Spill) Bytes() int64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, b := range s.maps {
		n += int64(len(b))
	}
	return n
}

// Close unmaps every tensor the Spill returned.
func (s *Spill) Close() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	spilled.mu.Lock()
	defer spilled.mu.Unlock()
	for _, b := range s.maps {
		delete(spilled.maps, uintptr(unsafe.Pointer(unsafe.SliceData(b))))
		unmapSpilled(b)
	}
	s.maps = nil
}

// dataPointer is the address of the first element of a typed slice.
func dataPointer(d any) unsafe.Pointer {
	switch d := d.(type) {
	case []float32:
		return unsafe.Pointer(unsafe.SliceData(d))
	case []float64:
		return unsafe.Pointer(unsafe.SliceData(d))
	case []float16.Float16:
		return unsafe.Pointer(unsafe.SliceData(d))
	case []graph.BF16:
		return unsafe.Pointer(unsafe.SliceData(d))
	case []int64:
		return unsafe.Pointer(unsafe.SliceData(d))
	case []int32:
		return unsafe.Pointer(unsafe.SliceData(d))
	case []int16:
		return unsafe.Pointer(unsafe.SliceData(d))
	case []int8:
		return unsafe.Pointer(unsafe.SliceData(d))
	case []uint64:
		return unsafe.Pointer(unsafe.SliceData(d))
	case []uint32:
		return unsafe.Pointer(unsafe.SliceData(d))
	case []uint16:
		return unsafe.Pointer(unsafe.SliceData(d))
	case []uint8:
		return unsafe.Pointer(unsafe.SliceData(d))
	}
	return nil
}

// typedOver is the typed slice of n elements of dt at p (nil for a type
// elemBytes does not cover).
func typedOver(dt graph.DataType, p unsafe.Pointer, n int) any {
	switch dt {
	case graph.Float:
		return unsafe.Slice((*float32)(p), n)
	case graph.Double:
		return unsafe.Slice((*float64)(p), n)
	case graph.Float16:
		return unsafe.Slice((*float16.Float16)(p), n)
	case graph.BFloat16:
		return unsafe.Slice((*graph.BF16)(p), n)
	case graph.Int64:
		return unsafe.Slice((*int64)(p), n)
	case graph.Int32:
		return unsafe.Slice((*int32)(p), n)
	case graph.Int16:
		return unsafe.Slice((*int16)(p), n)
	case graph.Int8:
		return unsafe.Slice((*int8)(p), n)
	case graph.Uint64:
		return unsafe.Slice((*uint64)(p), n)
	case graph.Uint32:
		return unsafe.Slice((*uint32)(p), n)
	case graph.Uint16:
		return unsafe.Slice((*uint16)(p), n)
	case graph.Uint8:
		return unsafe.Slice((*uint8)(p), n)
	}
	return nil
}
