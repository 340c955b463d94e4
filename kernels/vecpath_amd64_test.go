//go:build amd64 && !purego

package kernels

import "golang.org/x/sys/cpu"

// vectorExpected reports whether the AVX-512 loops must run here: the CPU
// has them and neither the purego tag nor ONNXPE_PUREGO=1 turns them off.
func vectorExpected() bool {
	return cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && !pureGoEnv()
}
