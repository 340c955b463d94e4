//go:build amd64 && !purego

package kernels

import "unsafe"

//go:noescape
func q4DequantPS(dst *float32, q *uint8, scales, zps *float32, nblk, bs int)

//go:noescape
func q4DotPS(a *float32, q *uint8, scales, zps *float32, nblk, bs int) float32

// q4Dot returns the dot product of a (nblk*bs floats, permuted per 32 as
// q4Permute does) with a 4-bit weight row q (nblk blocks of bs/2 bytes)
// whose blocks have the given scales and zero points, and true; or false
// when there is no vector kernel (then nothing is computed).
func q4Dot(a []float32, q []uint8, scales, zps []float32, nblk, bs int) (float32, bool) {
	if !hasAVX512 || bs%32 != 0 || nblk == 0 {
		return 0, false
	}
	_ = a[nblk*bs-1]
	_ = q[nblk*bs/2-1]
	_ = scales[nblk-1]
	_ = zps[nblk-1]
	return q4DotPS(unsafe.SliceData(a), unsafe.SliceData(q), unsafe.SliceData(scales), unsafe.SliceData(zps), nblk, bs), true
}

// q4Dequant writes nblk blocks of a 4-bit weight row, dequantized and
// permuted per 32 elements as q4Permute does, into dst and returns true;
// or false when there is no vector kernel.
func q4Dequant(dst []float32, q []uint8, scales, zps []float32, nblk, bs int) bool {
	if !hasAVX512 || bs%32 != 0 || nblk == 0 {
		return false
	}
	_ = dst[nblk*bs-1]
	_ = q[nblk*bs/2-1]
	_ = scales[nblk-1]
	_ = zps[nblk-1]
	q4DequantPS(unsafe.SliceData(dst), unsafe.SliceData(q), unsafe.SliceData(scales), unsafe.SliceData(zps), nblk, bs)
	return true
}

// hasQ4Vec reports whether the 4-bit vector kernels run.
func hasQ4Vec() bool { return hasAVX512 }
