package gemm

import "fmt"

// PackedB is a right-hand side op(B) (k x n) packed once into the panel
// layout of the implementation path that was active when PackB ran, for
// constant weights that many SgemmPacked calls reuse. It is immutable and
// safe for concurrent use.
type PackedB struct {
	ar   *arch
	k, n int
	kc   int
	// data holds, for each k block [pc, pc+kcur) in steps of kc, the
	// ceil(n/nr) panels of kcur x nr values, starting at pc*roundUp(n, nr).
	data []float32
}

// K and N report the shape of op(B).
func (pb *PackedB) K() int { return pb.k }
func (pb *PackedB) N() int { return pb.n }

// PackB packs op(B), where B is k x n with row stride ldb (n x k when
// transB), for SgemmPacked. It allocates k*n (rounded up to the panel
// width) float32s.
func PackB(transB bool, k, n int, b []float32, ldb int) *PackedB {
	return PackBInto(nil, transB, k, n, b, ldb)
}

// PackedLen is the number of float32s PackB needs for a k x n op(B).
func PackedLen(k, n int) int { return k * roundUp(n, active.nr) }

// PackBTo is PackB into dst (at least PackedLen(k, n) long), storage the
// caller owns (outside the Go heap, say); the PackedB refers to it.
func PackBTo(dst []float32, transB bool, k, n int, b []float32, ldb int) *PackedB {
	if len(dst) < PackedLen(k, n) {
		panic(fmt.Sprintf("gemm: %d floats to pack a %dx%d B into, need %d", len(dst), k, n, PackedLen(k, n)))
	}
	return PackBInto(&PackedB{data: dst}, transB, k, n, b, ldb)
}

// PackBInto is PackB into the storage of reuse when it is large enough
// (reuse is then changed and returned; nil allocates), for scratch that
// packs one operand after another.
func PackBInto(reuse *PackedB, transB bool, k, n int, b []float32, ldb int) *PackedB {
	if k < 0 || n < 0 {
		panic(fmt.Sprintf("gemm: negative dimension k=%d n=%d", k, n))
	}
	checkMat("B", len(b), transB, k, n, ldb)
	ar := active
	nr := ar.nr
	npad := roundUp(n, nr)
	pb := reuse
	if pb == nil || cap(pb.data) < k*npad {
		pb = &PackedB{data: make([]float32, k*npad)}
	}
	*pb = PackedB{ar: ar, k: k, n: n, kc: ar.kc, data: pb.data[:k*npad]}
	for pc := 0; pc < k; pc += pb.kc {
		kcur := min(pb.kc, k-pc)
		blk := pb.data[pc*npad : pc*npad+kcur*npad]
		for jp := 0; jp*nr < n; jp++ {
			w := min(nr, n-jp*nr)
			packBPanel(blk[jp*kcur*nr:], transB, b, ldb, pc, kcur, jp*nr, w, nr)
		}
	}
	return pb
}
