//go:build amd64 && !purego

package gemm

import (
	"os"
	"unsafe"

	"golang.org/x/sys/cpu"
)

//go:noescape
func widen16F16C(d *float32, s *uint16, n int)

var hasF16C = cpu.X86.HasF16C && cpu.X86.HasAVX && os.Getenv("ONNXPE_PUREGO") != "1"

// widen16Vec converts the leading multiple of 8 elements of s (float16
// bits) into d and returns how many it converted.
func widen16Vec(d []float32, s []uint16) int {
	n := len(s) &^ 7
	if !hasF16C || n == 0 {
		return 0
	}
	_ = d[n-1]
	widen16F16C(unsafe.SliceData(d), unsafe.SliceData(s), n)
	return n
}
