//go:build !amd64 || purego

package kernels

func q4Dot(a []float32, q []uint8, scales, zps []float32, nblk, bs int) (float32, bool) {
	return 0, false
}

func q4Dequant(dst []float32, q []uint8, scales, zps []float32, nblk, bs int) bool { return false }

func hasQ4Vec() bool { return false }
