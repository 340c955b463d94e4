//go:build amd64 && !purego

package kernels

import (
	"os"
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func expPDAVX512(d, s *float64, n int, tab *float64)

// hasAVX512 selects the AVX-512 exp (ONNXPE_PUREGO=1 forces Go).
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && os.Getenv("ONNXPE_PUREGO") != "1"

// expVec sets d[i] = expf(s[i]) (same bits) for the leading multiple of 8
// elements of s and returns how many it did. d may be s.
func expVec(d, s []float64) int {
	n := len(s) &^ 7
	if !hasAVX512 || n == 0 {
		return 0
	}
	_ = d[n-1]
	expPDAVX512(unsafe.SliceData(d), unsafe.SliceData(s), n, &expTab[0])
	return n
}

//go:noescape
func erfPSAVX512(d, s *float32, n int, exp *float64, tab *erfVecTab)

//go:noescape
func geluErfPSAVX512(d, s *float32, n int, exp *float64, tab *erfVecTab)

// erfVec sets d[i] to erfSlice's d[i] (same bits) for the leading multiple
// of 8 elements of s and returns how many it did.
func erfVec(d, s []float32) int {
	n := len(s) &^ 7
	if !hasAVX512 || n == 0 {
		return 0
	}
	_ = d[n-1]
	erfPSAVX512(unsafe.SliceData(d), unsafe.SliceData(s), n, &expTab[0], &erfcVec)
	return n
}

// geluErfVec is erfVec for geluErfSlice.
func geluErfVec(d, s []float32) int {
	n := len(s) &^ 7
	if !hasAVX512 || n == 0 {
		return 0
	}
	_ = d[n-1]
	geluErfPSAVX512(unsafe.SliceData(d), unsafe.SliceData(s), n, &expTab[0], &erfcVec)
	return n
}
