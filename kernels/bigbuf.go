package kernels

import (
	"runtime"
	"sync/atomic"
	"unsafe"
)

// Large constant data a session makes (packed weights) lives outside the
// Go heap where the platform allows (bigbuf_linux.go): in huge pages (one
// page fault per 2 MiB instead of per 4 KiB: loading a model of billions
// of parameters took millions of faults), outside the collector's heap
// goal (gigabytes of weights would let the heap grow by as much before a
// collection), and returned to the system when its owner is unreachable.

// bigMin is the size from which constant data goes outside the heap.
const bigMin = 1 << 20

// offHeapBytes counts the bytes outside the heap held now.
var offHeapBytes atomic.Int64

// bigFloats returns n zeroed float32s owned by owner: outside the Go heap
// (n*4 >= bigMin, on Linux) they are unmapped when owner is unreachable,
// so every holder of the slice must keep owner reachable.
func bigFloats[T any](owner *T, n int) []float32 {
	if n*4 < bigMin {
		return make([]float32, n)
	}
	b := mapAnon(n * 4)
	if b == nil {
		return make([]float32, n)
	}
	offHeapBytes.Add(int64(len(b)))
	runtime.AddCleanup(owner, func(b []byte) {
		offHeapBytes.Add(-int64(len(b)))
		unmapAnon(b)
	}, b)
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
