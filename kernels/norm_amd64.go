//go:build amd64 && !purego

package kernels

import "unsafe"

//go:noescape
func lnStatsPS(x *float32, n int) (s1, s2 float64)

//go:noescape
func lnRowPS(y, x, s, b *float32, n int, mu, is float64)

// lnStatsVec returns the sum and sum of squares (float64) of the leading
// multiple of 8 elements of x, and how many it summed.
func lnStatsVec(x []float32) (s1, s2 float64, n int) {
	n = len(x) &^ 7
	if !hasAVX512 || n == 0 {
		return 0, 0, 0
	}
	s1, s2 = lnStatsPS(unsafe.SliceData(x), n)
	return s1, s2, n
}

// lnRowVec sets y[i] = float32(((x[i]-mu)*is)*s[i] + b[i]) (s or b nil:
// without that step; the bits of layerNormT) for the leading multiple of
// 8 elements of x and returns how many it did.
func lnRowVec(y, x, s, b []float32, mu, is float64) int {
	n := len(x) &^ 7
	if !hasAVX512 || n == 0 {
		return 0
	}
	_ = y[n-1]
	var sp, bp *float32
	if s != nil {
		sp = unsafe.SliceData(s[:n])
	}
	if b != nil {
		bp = unsafe.SliceData(b[:n])
	}
	lnRowPS(unsafe.SliceData(y), unsafe.SliceData(x), sp, bp, n, mu, is)
	return n
}
