//go:build !amd64 || purego

package kernels

func expVec(d, s []float64) int { return 0 }
