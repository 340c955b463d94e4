package gemm

import "unsafe"

// smallWork is the m*n*k at or below which Sgemm multiplies in place,
// without packing: for small matrices (attention scores and context of
// short sequences) packing costs more than it saves. Measured on AVX-512
// (BenchmarkSgemmSmall, one thread): 17x17x16 205 ns in place against 461
// packed, 64x64x32 2.0 us against 2.8, 64x64x64 3.2 us against 5.3.
var smallWork = 1 << 17

// With B transposed, the native paths take the product in place only when
// it has at most smallDotWork multiply-adds and k at least smallDotVecs
// whole vectors: their dot-product kernel sums each element across the
// lanes, which only pays for long k and few outputs (12x12x64: 370 ns
// against 1277 packed; 32x32x32: 1.95 us against 1.71). Both layouts with
// A and B transposed are packed on the native paths.
var (
	smallDotWork = 1 << 14
	smallDotVecs = 2
)

// smallRows is the number of rows of C up to which the native paths
// multiply in place whatever the size: with a few rows (a decoding step's
// attention: 4 query heads of one token against 2048 keys) packing B
// costs more than the product, which reads B once in place. Measured on
// AVX-512 (BenchmarkSgemmSmall, one thread, packing included): 4x2048x128
// 41 us in place against 92 packed, 219 against 44 with B transposed;
// 8x768x768 116 against 233 (transposed 355 against 513); at 16 rows the
// two are even.
var smallRows = 8

// smallBcastFunc sets an r x w tile of C (r and the vector count fixed per
// function, the last vector masked by mask):
//
//	C[i*ldc+j] = alpha*sum_p a[i*rsA+p*csA]*b[p*ldb+j] + beta*C[i*ldc+j]
//
// With beta == 0, C is only written. Lanes past the mask are neither read
// nor written.
type smallBcastFunc func(k int, a *float32, rsA, csA int, b *float32, ldb int, c *float32, ldc int, alpha, beta float32, mask *int32)

// smallDotFunc sets C[j] = alpha*sum_p a[p]*b[j*ldb+p] + beta*C[j] for a
// fixed number of columns j; mask covers the k mod vector-length tail.
type smallDotFunc func(k int, a, b *float32, ldb int, c *float32, alpha, beta float32, mask *int32)

// smallKernels is a path's in-place small-matrix kernels.
type smallKernels struct {
	lanes int                 // float32 lanes of a vector
	bcast [][3]smallBcastFunc // bcast[r][v]: r rows, v vectors
	dot   []smallDotFunc      // dot[nc]: nc columns
}

// laneMask holds 16 all-ones then 16 zero lanes: &laneMask[16-w] masks the
// first w lanes of a vector.
var laneMask = [32]int32{-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1}

// inPlace reports whether p is small enough to multiply without packing
// (B not packed already).
func (p *problem) inPlace() bool {
	work := p.m * p.n * p.k
	sk := p.ar.small
	few := sk != nil && p.m <= smallRows
	if p.pb != nil || p.b16 != nil || work > smallWork && !few {
		return false
	}
	if sk == nil || !p.transB {
		return true
	}
	return !p.transA && (work <= smallDotWork || few) && p.k >= smallDotVecs*sk.lanes
}

// smallParallel is small over nt goroutines, each taking a block of the
// columns of C (for products with few rows and much work).
func (p *problem) smallParallel(nt int) {
	n := p.n
	nt = min(nt, ceilDiv(n, 16))
	parallel(nt, func(t int) {
		j0, j1 := t*n/nt/16*16, (t+1)*n/nt/16*16
		if t == nt-1 {
			j1 = n
		}
		if j0 >= j1 {
			return
		}
		q := *p
		q.n, q.c = j1-j0, p.c[j0:]
		if p.transB {
			q.b = p.b[j0*p.ldb:]
		} else {
			q.b = p.b[j0:]
		}
		q.small()
	})
}

// small computes the whole of p in place (p.pb == nil, m, n, k > 0).
func (p *problem) small() {
	sk := p.ar.small
	switch {
	case sk != nil && !p.transB:
		p.smallBcast(sk)
	case sk != nil && !p.transA:
		p.smallDot(sk)
	case sk != nil:
		panic("gemm: in-place product with A and B transposed on a native path")
	default:
		p.smallGo()
	}
}

// smallBcast covers C with tiles of up to len(bcast)-1 rows and two
// vectors, broadcasting elements of op(A) (either layout) against rows
// of B.
func (p *problem) smallBcast(sk *smallKernels) {
	m, n, k := p.m, p.n, p.k
	rsA, csA := p.lda, 1
	if p.transA {
		rsA, csA = 1, p.lda
	}
	// Bounds are checked by the caller (checkMat); the kernels read
	// within op(A), op(B) and C and write within C's rows.
	a, b, c := unsafe.SliceData(p.a), unsafe.SliceData(p.b), unsafe.SliceData(p.c)
	mr, vl := len(sk.bcast)-1, sk.lanes
	for j := 0; j < n; j += 2 * vl {
		w := min(2*vl, n-j)
		v := (w + vl - 1) / vl
		mask := &laneMask[16-(w-(v-1)*vl)]
		for i := 0; i < m; i += mr {
			r := min(mr, m-i)
			sk.bcast[r][v](k, elem(a, i*rsA), rsA, csA, elem(b, j), p.ldb, elem(c, i*p.ldc+j), p.ldc, p.alpha, p.beta, mask)
		}
	}
}

// smallDot computes op(A)*B^T, A not transposed, by dot products of rows.
func (p *problem) smallDot(sk *smallKernels) {
	m, n, k := p.m, p.n, p.k
	a, b, c := unsafe.SliceData(p.a), unsafe.SliceData(p.b), unsafe.SliceData(p.c)
	nc := len(sk.dot) - 1
	mask := &laneMask[16-k%sk.lanes]
	for i := 0; i < m; i++ {
		for j := 0; j < n; j += nc {
			w := min(nc, n-j)
			sk.dot[w](k, elem(a, i*p.lda), elem(b, j*p.ldb), p.ldb, elem(c, i*p.ldc+j), p.alpha, p.beta, mask)
		}
	}
}

func elem(p *float32, i int) *float32 {
	return (*float32)(unsafe.Add(unsafe.Pointer(p), 4*i))
}

// smallGo is the portable in-place product, for every layout: rows of C
// in strips of goNR columns with the accumulators in registers.
func (p *problem) smallGo() {
	m, n, k := p.m, p.n, p.k
	a, b, c := p.a, p.b, p.c
	lda, ldb, ldc := p.lda, p.ldb, p.ldc
	alpha, beta := p.alpha, p.beta
	rsA, csA := lda, 1
	if p.transA {
		rsA, csA = 1, lda
	}
	store := func(ci int, s float32) {
		if beta == 0 {
			c[ci] = alpha * s
		} else {
			c[ci] = alpha*s + beta*c[ci]
		}
	}
	if p.transB {
		// op(B)[q, j] = b[j*ldb+q]: dot products over q, four at a time.
		for i := 0; i < m; i++ {
			for j := 0; j < n; j++ {
				bj := b[j*ldb : j*ldb+k]
				var s0, s1, s2, s3 float32
				q := 0
				if csA == 1 {
					ai := a[i*rsA : i*rsA+k]
					for ; q+4 <= k; q += 4 {
						s0 += ai[q] * bj[q]
						s1 += ai[q+1] * bj[q+1]
						s2 += ai[q+2] * bj[q+2]
						s3 += ai[q+3] * bj[q+3]
					}
				}
				for ; q < k; q++ {
					s0 += a[i*rsA+q*csA] * bj[q]
				}
				store(i*ldc+j, (s0+s1)+(s2+s3))
			}
		}
		return
	}
	for i := 0; i < m; i++ {
		j := 0
		for ; j+goNR <= n; j += goNR {
			var c0, c1, c2, c3, c4, c5, c6, c7 float32
			for q := 0; q < k; q++ {
				av := a[i*rsA+q*csA]
				bb := b[q*ldb+j : q*ldb+j+goNR : q*ldb+j+goNR]
				c0 += av * bb[0]
				c1 += av * bb[1]
				c2 += av * bb[2]
				c3 += av * bb[3]
				c4 += av * bb[4]
				c5 += av * bb[5]
				c6 += av * bb[6]
				c7 += av * bb[7]
			}
			acc := [goNR]float32{c0, c1, c2, c3, c4, c5, c6, c7}
			for t, s := range acc {
				store(i*ldc+j+t, s)
			}
		}
		for ; j < n; j++ {
			var s float32
			for q := 0; q < k; q++ {
				s += a[i*rsA+q*csA] * b[q*ldb+j]
			}
			store(i*ldc+j, s)
		}
	}
}
