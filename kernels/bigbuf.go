package kernels

import (
	"sync/atomic"
	"unsafe"
)

// Large constant data a session makes (packed weights) lives outside the
// Go heap where the platform allows (bigbuf_linux.go): in huge pages (one
// page fault per 2 MiB instead of per 4 KiB: loading a model of billions
// of parameters took millions of faults) and outside the collector's heap
// goal (gigabytes of weights would let the heap grow by as much before a
// collection). Its holder frees it explicitly.

// bigMin is the size from which constant data goes outside the heap.
const bigMin = 1 << 20

// offHeapBytes counts the bytes outside the heap held now.
var offHeapBytes atomic.Int64

// bigBuf is n zeroed float32s: outside the Go heap (raw is the mapping)
// when n*4 >= bigMin and the platform maps memory, else on the heap (raw
// nil). freeBig gives the mapping back; nothing may use f afterwards.
func bigBuf(n int) (f []float32, raw []byte) {
	if n*4 >= bigMin {
		if raw = mapAnon(n * 4); raw != nil {
			offHeapBytes.Add(int64(len(raw)))
			return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(raw))), n), raw
		}
	}
	return make([]float32, n), nil
}

// freeBig unmaps what bigBuf mapped (raw nil: heap memory, collected).
func freeBig(raw []byte) {
	if raw != nil {
		offHeapBytes.Add(-int64(len(raw)))
		unmapAnon(raw)
	}
}
