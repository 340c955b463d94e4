//go:build amd64 && !purego

package kernels

import (
	"os"
	"unsafe"

	"github.com/x448/float16"
	"golang.org/x/sys/cpu"
)

//go:noescape
func widen16F16C(d *float32, s *uint16, n int)

//go:noescape
func narrow16F16C(d *uint16, s *float32, n int)

// hasF16C selects the F16C conversions (ONNXPE_PUREGO=1 forces Go).
var hasF16C = cpu.X86.HasF16C && cpu.X86.HasAVX && os.Getenv("ONNXPE_PUREGO") != "1"

// widen16Vec converts the leading multiple of 8 elements of s into d and
// returns how many it converted.
func widen16Vec(d []float32, s []float16.Float16) int {
	n := len(s) &^ 7
	if !hasF16C || n == 0 {
		return 0
	}
	_ = d[n-1]
	widen16F16C(unsafe.SliceData(d), (*uint16)(unsafe.SliceData(s)), n)
	return n
}

// narrow16Vec rounds the leading multiple of 8 elements of s into d (to
// nearest even; NaNs as the float16 package does, which a test checks)
// and returns how many it converted.
func narrow16Vec(d []float16.Float16, s []float32) int {
	n := len(s) &^ 7
	if !hasF16C || n == 0 {
		return 0
	}
	_ = d[n-1]
	narrow16F16C((*uint16)(unsafe.SliceData(d)), unsafe.SliceData(s), n)
	return n
}
