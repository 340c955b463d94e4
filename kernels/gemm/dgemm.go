package gemm

// dgemmKC is the depth of a k block in Dgemm: a block of B rows
// (dgemmKC x n) is reused across all rows of C.
const dgemmKC = 128

// Dgemm computes C = alpha*op(A)*op(B) + beta*C in float64 with the same
// conventions and checks as Sgemm. It is plain blocked Go (rows split over
// the goroutines), meant for float64 models and float64-accumulating
// reference runs, not for speed.
func Dgemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	Exec{}.Dgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Dgemm is the package-level Dgemm on e's goroutines.
func (e Exec) Dgemm(transA, transB bool, m, n, k int, alpha float64, a []float64, lda int, b []float64, ldb int, beta float64, c []float64, ldc int) {
	checkDims(m, n, k)
	checkMat("A", len(a), transA, m, k, lda)
	checkMat("B", len(b), transB, k, n, ldb)
	checkMat("C", len(c), false, m, n, ldc)
	if m == 0 || n == 0 {
		return
	}
	scale(beta, c, m, n, ldc)
	if k == 0 || alpha == 0 {
		return
	}
	nt := e.threads()
	if m*n*k < minParallelWork {
		nt = 1
	}
	nt = min(nt, m)
	parallel(nt, func(t int) {
		i0, i1 := t*m/nt, (t+1)*m/nt
		var arow []float64
		if transA {
			arow = make([]float64, k)
		}
		for pc := 0; pc < k; pc += dgemmKC {
			kcur := min(dgemmKC, k-pc)
			for i := i0; i < i1; i++ {
				// Row i of op(A), columns [pc, pc+kcur).
				var ai []float64
				if transA {
					ai = arow[:kcur]
					for q := range ai {
						ai[q] = a[(pc+q)*lda+i]
					}
				} else {
					ai = a[i*lda+pc : i*lda+pc+kcur]
				}
				ci := c[i*ldc : i*ldc+n]
				if transB {
					for j := range ci {
						bj := b[j*ldb+pc : j*ldb+pc+kcur]
						var s0, s1, s2, s3 float64
						q := 0
						for ; q+4 <= kcur; q += 4 {
							s0 += ai[q] * bj[q]
							s1 += ai[q+1] * bj[q+1]
							s2 += ai[q+2] * bj[q+2]
							s3 += ai[q+3] * bj[q+3]
						}
						for ; q < kcur; q++ {
							s0 += ai[q] * bj[q]
						}
						ci[j] += alpha * ((s0 + s1) + (s2 + s3))
					}
					continue
				}
				for q, av := range ai {
					s := alpha * av
					bq := b[(pc+q)*ldb : (pc+q)*ldb+n]
					for j, bv := range bq {
						ci[j] += s * bv
					}
				}
			}
		}
	})
}
