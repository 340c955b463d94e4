//go:build !amd64 || purego

package kernels

// vectorExpected reports whether the AVX-512 loops must run here: never
// in this build.
func vectorExpected() bool { return false }
