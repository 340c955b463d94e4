package gemm

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"
)

func TestDgemm(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 0))
	for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
		e := Exec{Threads: threads}
		for _, s := range shapes() {
			lda := max(1, map[bool]int{false: s.k, true: s.m}[s.transA]+s.pad)
			ldb := max(1, map[bool]int{false: s.n, true: s.k}[s.transB]+s.pad)
			ldc := max(1, s.n+s.pad)
			a := make([]float64, max(matLen(s.transA, s.m, s.k, lda), 0))
			b := make([]float64, max(matLen(s.transB, s.k, s.n, ldb), 0))
			c := make([]float64, max(matLen(false, s.m, s.n, ldc), 0))
			for _, x := range [][]float64{a, b, c} {
				for i := range x {
					x[i] = r.NormFloat64()
				}
			}
			if s.beta == 0 {
				for i := range c {
					c[i] = math.NaN()
				}
			}
			orig := append([]float64(nil), c...)
			e.Dgemm(s.transA, s.transB, s.m, s.n, s.k, float64(s.alpha), a, lda, b, ldb, float64(s.beta), c, ldc)
			for i := 0; i < s.m; i++ {
				for j := 0; j < ldc && (j < s.n || i < s.m-1); j++ {
					got := c[i*ldc+j]
					if j >= s.n {
						if got != orig[i*ldc+j] && !(math.IsNaN(got) && math.IsNaN(orig[i*ldc+j])) {
							t.Fatalf("%v: padding C[%d,%d] overwritten", s, i, j)
						}
						continue
					}
					var want, mag float64
					for p := 0; p < s.k; p++ {
						var av, bv float64
						if s.transA {
							av = a[p*lda+i]
						} else {
							av = a[i*lda+p]
						}
						if s.transB {
							bv = b[j*ldb+p]
						} else {
							bv = b[p*ldb+j]
						}
						want += av * bv
						mag += math.Abs(av * bv)
					}
					want *= float64(s.alpha)
					mag *= math.Abs(float64(s.alpha))
					if s.beta != 0 {
						want += float64(s.beta) * orig[i*ldc+j]
						mag += math.Abs(float64(s.beta) * orig[i*ldc+j])
					}
					if d := math.Abs(got - want); !(d <= 2*float64(s.k+2)*0x1p-53*mag+1e-300) {
						t.Fatalf("%v: C[%d,%d] = %g, want %g", s, i, j, got, want)
					}
				}
			}
		}
	}
}
