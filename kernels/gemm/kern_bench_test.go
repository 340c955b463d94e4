package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkKernel measures the full-size micro-kernel of each path on
// panels that stay in cache: the ceiling for Sgemm.
func BenchmarkKernel(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, ar := range archs {
		for _, k := range []int{64, 256} {
			b.Run(fmt.Sprintf("%s/%dx%dx%d", ar.name, ar.mr, ar.nr, k), func(b *testing.B) {
				a, bp, c := randSlice(r, ar.mr*k), randSlice(r, ar.nr*k), randSlice(r, ar.mr*ar.nr)
				kern := ar.kernels[ar.mr]
				for b.Loop() {
					kern(k, &a[0], &bp[0], &c[0], ar.nr, 1, 1)
				}
				reportGFLOPS(b, ar.mr, ar.nr, k)
			})
		}
	}
}
