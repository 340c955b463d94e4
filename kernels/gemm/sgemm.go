package gemm

import (
	"fmt"
	"runtime"
	"sync"
)

// Exec says how to run multiplies: on at most Threads goroutines (0 or
// less: GOMAXPROCS; 1: single-threaded). Each call takes its own Exec, so
// callers with different limits can multiply concurrently; the zero Exec
// (and the package-level functions) uses GOMAXPROCS.
type Exec struct {
	Threads int
}

// threads is the goroutine budget of e: Threads, at most GOMAXPROCS.
func (e Exec) threads() int {
	g := runtime.GOMAXPROCS(0)
	if t := e.Threads; t > 0 && t < g {
		return t
	}
	return g
}

// minParallelWork is the m*n*k below which a call stays on one goroutine:
// under it, starting and joining goroutines costs more than it saves.
var minParallelWork = 1 << 19

// Sgemm computes C = alpha*op(A)*op(B) + beta*C for row-major matrices,
// where op(A) is m x k (A is m x k with row stride lda, or k x m when
// transA), op(B) is k x n (B is k x n with row stride ldb, or n x k when
// transB) and C is m x n with row stride ldc. With beta == 0, C is
// overwritten without being read (NaN in C does not propagate).
//
// Tiny products (m*n*k up to a few tens of thousands) are multiplied in
// place on the calling goroutine, reading A and B where they are instead
// of packing them.
//
// It panics with a "gemm:" message if a dimension is negative, a stride is
// smaller than its row length, or a slice is too short.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	Exec{}.Sgemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// Sgemm is the package-level Sgemm on e's goroutines.
func (e Exec) Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	checkDims(m, n, k)
	checkMat("A", len(a), transA, m, k, lda)
	checkMat("B", len(b), transB, k, n, ldb)
	checkMat("C", len(c), false, m, n, ldc)
	p := problem{ar: active, m: m, n: n, k: k, transA: transA, a: a, lda: lda,
		transB: transB, b: b, ldb: ldb, alpha: alpha, beta: beta, c: c, ldc: ldc}
	p.run(e.threads())
}

// SgemmStrided runs batch independent Sgemm calls; matrix i uses
// a[i*strideA:], b[i*strideB:] and c[i*strideC:]. A stride of 0 for A or B
// reuses one matrix for every batch entry (MatMul broadcasting). The C
// matrices must not overlap. Small matrices are spread over the goroutines
// one whole matrix at a time; tiny ones (see Sgemm) stay on the calling
// goroutine.
func SgemmStrided(batch int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda, strideA int, b []float32, ldb, strideB int, beta float32, c []float32, ldc, strideC int) {
	Exec{}.SgemmStrided(batch, transA, transB, m, n, k, alpha, a, lda, strideA, b, ldb, strideB, beta, c, ldc, strideC)
}

// SgemmStrided is the package-level SgemmStrided on e's goroutines.
func (e Exec) SgemmStrided(batch int, transA, transB bool, m, n, k int, alpha float32, a []float32, lda, strideA int, b []float32, ldb, strideB int, beta float32, c []float32, ldc, strideC int) {
	checkDims(m, n, k)
	if batch < 0 || strideA < 0 || strideB < 0 || strideC < 0 {
		panic(fmt.Sprintf("gemm: negative batch or stride (batch %d, strides %d %d %d)", batch, strideA, strideB, strideC))
	}
	if batch == 0 || m == 0 || n == 0 {
		return
	}
	last := batch - 1
	checkMat("A", len(a)-last*strideA, transA, m, k, lda)
	checkMat("B", len(b)-last*strideB, transB, k, n, ldb)
	checkMat("C", len(c)-last*strideC, false, m, n, ldc)
	if batch > 1 && strideC < (m-1)*ldc+n {
		panic(fmt.Sprintf("gemm: C stride %d overlaps a %dx%d matrix with row stride %d", strideC, m, n, ldc))
	}
	ar := active
	nt := e.threads()
	one := func(i, nt int) {
		p := problem{ar: ar, m: m, n: n, k: k,
			transA: transA, a: a[i*strideA:], lda: lda,
			transB: transB, b: b[i*strideB:], ldb: ldb,
			alpha: alpha, beta: beta, c: c[i*strideC:], ldc: ldc}
		p.run(nt)
	}
	// A batch with less work than one product worth splitting stays on
	// this goroutine (its small matrices multiplied in place one after
	// the other).
	if nt == 1 || batch < nt || m*n*k >= 4*minParallelWork || batch*m*n*k < minParallelWork {
		for i := 0; i < batch; i++ {
			one(i, nt)
		}
		return
	}
	parallel(nt, func(t int) {
		for i := t * batch / nt; i < (t+1)*batch/nt; i++ {
			one(i, 1)
		}
	})
}

// SgemmPacked computes C = alpha*A*pb + beta*C like Sgemm with transA false,
// where pb holds a k x n op(B) packed by PackB.
func SgemmPacked(m, n, k int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int) {
	Exec{}.SgemmPacked(m, n, k, alpha, a, lda, pb, beta, c, ldc)
}

// SgemmPacked is the package-level SgemmPacked on e's goroutines.
func (e Exec) SgemmPacked(m, n, k int, alpha float32, a []float32, lda int, pb *PackedB, beta float32, c []float32, ldc int) {
	checkDims(m, n, k)
	if pb == nil || pb.k != k || pb.n != n {
		panic(fmt.Sprintf("gemm: packed B does not match k=%d n=%d", k, n))
	}
	checkMat("A", len(a), false, m, k, lda)
	checkMat("C", len(c), false, m, n, ldc)
	p := problem{ar: pb.ar, m: m, n: n, k: k, a: a, lda: lda, pb: pb,
		alpha: alpha, beta: beta, c: c, ldc: ldc}
	p.run(e.threads())
}

func checkDims(m, n, k int) {
	if m < 0 || n < 0 || k < 0 {
		panic(fmt.Sprintf("gemm: negative dimension m=%d n=%d k=%d", m, n, k))
	}
}

// checkMat checks a row-major matrix that is rows x cols (cols x rows when
// trans) with row stride ld in a slice of length n. The stride must cover
// a row (BLAS's ld >= max(1, cols), except that a matrix with no elements
// may have stride 0: a [2,0] tensor has rows of 0 elements).
func checkMat(name string, n int, trans bool, rows, cols, ld int) {
	if trans {
		rows, cols = cols, rows
	}
	if ld < cols || ld < 1 && rows > 0 && cols > 0 {
		panic(fmt.Sprintf("gemm: %s row stride %d < %d", name, ld, cols))
	}
	if rows > 0 && cols > 0 && n < (rows-1)*ld+cols {
		panic(fmt.Sprintf("gemm: %s has %d elements, needs %d", name, max(n, 0), (rows-1)*ld+cols))
	}
}

// problem is one validated Sgemm call.
type problem struct {
	ar      *arch
	m, n, k int
	transA  bool
	a       []float32
	lda     int
	transB  bool
	b       []float32
	ldb     int
	pb      *PackedB // when set, b is unused
	// b16, when set, is a 16-bit B of type half (b is unused): widened
	// as it is packed.
	b16         []uint16
	half        Half
	alpha, beta float32
	c           []float32
	ldc         int
}

// workspace is one goroutine's scratch: a packed A block, a packed B
// block and an edge tile.
type workspace struct {
	a, b []float32
	tile [12 * 32]float32
}

var workspaces sync.Pool // *workspace

func getWorkspace(asize, bsize int) *workspace {
	w, _ := workspaces.Get().(*workspace)
	if w == nil {
		w = new(workspace)
	}
	if cap(w.a) < asize {
		w.a = make([]float32, asize)
	}
	if cap(w.b) < bsize {
		w.b = make([]float32, bsize)
	}
	w.a, w.b = w.a[:asize], w.b[:bsize]
	return w
}

// packCost is the cost of packing one element of A or B in multiply-adds
// of the micro-kernel; it weighs the packing that a split duplicates.
const packCost = 24

func (p *problem) run(nt int) {
	m, n, k := p.m, p.n, p.k
	if m == 0 || n == 0 {
		return
	}
	if k == 0 || p.alpha == 0 {
		scale(p.beta, p.c, m, n, p.ldc)
		return
	}
	if p.inPlace() {
		if nt > 1 && m*n*k >= minParallelWork {
			p.smallParallel(nt)
			return
		}
		p.small()
		return
	}
	if m*n*k < minParallelWork {
		nt = 1
	}
	mr, nr := p.ar.mr, p.ar.nr
	mPanels, nPanels := ceilDiv(m, mr), ceilDiv(n, nr)
	nt = min(nt, mPanels*nPanels)
	if nt == 1 {
		p.serial(0, m, 0, n)
		return
	}
	// Each goroutine computes an independent block of C, packing its own
	// panels: no synchronisation but the final join.
	// Unpacked B: split rows while every goroutine gets a panel (each packs
	// all of B, but no two read the same rows of B in the same pass); on
	// two cores this measured at least as fast as the column split that the
	// cost model prefers for 128x768x768. With B packed once, the cost
	// model decides.
	gm, gn := nt, 1
	if p.pb != nil || mPanels < nt {
		bCost := packCost
		if p.pb != nil {
			bCost = 0
		}
		gm, gn = grid(nt, mPanels, nPanels, mr, nr, packCost, bCost)
	}
	q := *p // a copy, so that p itself does not escape on the serial path
	parallel(gm*gn, func(t int) {
		ti, tj := t/gn, t%gn
		r0, r1 := ti*mPanels/gm*mr, min(m, (ti+1)*mPanels/gm*mr)
		c0, c1 := tj*nPanels/gn*nr, min(n, (tj+1)*nPanels/gn*nr)
		if r0 < r1 && c0 < c1 {
			q.serial(r0, r1, c0, c1)
		}
	})
}

// serial computes rows [r0,r1) and columns [c0,c1) of C on the calling
// goroutine; c0 is a multiple of nr.
func (p *problem) serial(r0, r1, c0, c1 int) {
	ar := p.ar
	nr := ar.nr
	kc, nc := ar.kc, ar.nc
	bsize := kc * roundUp(min(nc, c1-c0), nr)
	if p.pb != nil {
		kc, nc, bsize = p.pb.kc, roundUp(c1-c0, nr), 0
	}
	w := getWorkspace(ar.mc*kc, bsize)
	for jc := c0; jc < c1; jc += nc {
		ncur := min(nc, c1-jc)
		np := ceilDiv(ncur, nr)
		for pc := 0; pc < p.k; pc += kc {
			kcur := min(kc, p.k-pc)
			beta := p.beta
			if pc > 0 {
				beta = 1
			}
			var bp []float32
			if p.pb != nil {
				bp = p.pb.data[pc*roundUp(p.n, nr)+jc/nr*kcur*nr:]
			} else {
				bp = w.b
				for jp := 0; jp < np; jp++ {
					cols := min(nr, ncur-jp*nr)
					if p.b16 != nil {
						packBPanelHalf(bp[jp*kcur*nr:(jp+1)*kcur*nr], p.half, p.transB, p.b16, p.ldb, pc, kcur, jc+jp*nr, cols, nr)
						continue
					}
					packBPanel(bp[jp*kcur*nr:(jp+1)*kcur*nr], p.transB, p.b, p.ldb, pc, kcur, jc+jp*nr, cols, nr)
				}
			}
			p.block(w, bp, r0, r1, jc, 0, ncur, pc, kcur, beta)
		}
	}
	workspaces.Put(w)
}

// block computes rows [r0,r1) and columns jc+[c0,c1) of C for the k block
// [pc, pc+kcur), whose packed B panels start at bp (panel j covers columns
// jc+j*nr...).
func (p *problem) block(w *workspace, bp []float32, r0, r1, jc, c0, c1, pc, kcur int, beta float32) {
	ar := p.ar
	mr, nr := ar.mr, ar.nr
	alpha, c, ldc := p.alpha, p.c, p.ldc
	for ic := r0; ic < r1; ic += ar.mc {
		mcur := min(ar.mc, r1-ic)
		ap := w.a[:mcur*kcur]
		p.packA(ap, ic, mcur, pc, kcur, mr)
		for jr := c0; jr < c1; jr += nr {
			cols := min(nr, c1-jr)
			bpanel := &bp[jr/nr*kcur*nr]
			for ir := 0; ir < mcur; ir += mr {
				rows := min(mr, mcur-ir)
				apanel := &ap[ir*kcur]
				kern := ar.kernels[rows]
				ci := (ic+ir)*ldc + jc + jr
				if cols == nr {
					kern(kcur, apanel, bpanel, &c[ci], ldc, alpha, beta)
					continue
				}
				kern(kcur, apanel, bpanel, &w.tile[0], nr, alpha, 0)
				for i := 0; i < rows; i++ {
					dst := c[ci+i*ldc : ci+i*ldc+cols]
					src := w.tile[i*nr : i*nr+cols]
					if beta == 0 {
						copy(dst, src)
						continue
					}
					for j := range dst {
						dst[j] = src[j] + beta*dst[j]
					}
				}
			}
		}
	}
}

// packA packs rows [i0, i0+rows) and columns [p0, p0+kcur) of op(A) into
// panels of mr rows: panel ir (height h = min(mr, rows-ir)) starts at
// dst[ir*kcur] and holds element (i, p) at p*h + i.
func (p *problem) packA(dst []float32, i0, rows, p0, kcur, mr int) {
	a, lda := p.a, p.lda
	for ir := 0; ir < rows; ir += mr {
		h := min(mr, rows-ir)
		panel := dst[ir*kcur : ir*kcur+h*kcur]
		if p.transA {
			for q := 0; q < kcur; q++ {
				src := a[(p0+q)*lda+i0+ir:]
				copy(panel[q*h:q*h+h], src[:h])
			}
			continue
		}
		i := 0
		for ; i+4 <= h; i += 4 {
			r := (i0 + ir + i) * lda
			s0 := a[r+p0 : r+p0+kcur]
			s1 := a[r+lda+p0 : r+lda+p0+kcur]
			s2 := a[r+2*lda+p0 : r+2*lda+p0+kcur]
			s3 := a[r+3*lda+p0 : r+3*lda+p0+kcur]
			d := panel[i:]
			for q := range s0 {
				o := q * h
				e := d[o : o+4 : o+4]
				e[0], e[1], e[2], e[3] = s0[q], s1[q], s2[q], s3[q]
			}
		}
		for ; i < h; i++ {
			src := a[(i0+ir+i)*lda+p0:]
			src = src[:kcur]
			for q, v := range src {
				panel[q*h+i] = v
			}
		}
	}
}

// packBPanel packs columns [j0, j0+w) and rows [p0, p0+kcur) of op(B)
// into one panel of nr columns (dst[q*nr+j]), zero-padded to nr.
func packBPanel(dst []float32, transB bool, b []float32, ldb, p0, kcur, j0, w, nr int) {
	dst = dst[:kcur*nr]
	if !transB {
		for q := 0; q < kcur; q++ {
			row := dst[q*nr : q*nr+nr]
			copy(row[:w], b[(p0+q)*ldb+j0:])
			clear(row[w:])
		}
		return
	}
	if w < nr {
		clear(dst)
	}
	for j := 0; j < w; j++ {
		src := b[(j0+j)*ldb+p0:]
		src = src[:kcur]
		for q, v := range src {
			dst[q*nr+j] = v
		}
	}
}

// grid splits nt goroutines into gm row groups x gn column groups over
// mPanels x nPanels micro-tiles of mr x nr, minimising the largest share:
// its multiply-adds per k step plus the packing it does, aCost per row of A
// and bCost per column of B.
func grid(nt, mPanels, nPanels, mr, nr, aCost, bCost int) (gm, gn int) {
	best := -1
	for d := nt; d >= 1; d-- {
		if nt%d != 0 {
			continue
		}
		e := nt / d
		rows, cols := ceilDiv(mPanels, d)*mr, ceilDiv(nPanels, e)*nr
		share := rows*cols + aCost*rows + bCost*cols
		if best < 0 || share < best {
			best, gm, gn = share, d, e
		}
	}
	return gm, gn
}

// parallel runs f(0..nt-1), f(0) on the calling goroutine. A panic in
// any f is raised again on the calling goroutine once all have ended, so
// the caller can recover it (a panic on another goroutine would end the
// process).
func parallel(nt int, f func(t int)) {
	if nt == 1 {
		f(0)
		return
	}
	var wg sync.WaitGroup
	var once sync.Once
	var perr any
	for t := 1; t < nt; t++ {
		wg.Go(func() {
			defer func() {
				if r := recover(); r != nil {
					once.Do(func() { perr = r })
				}
			}()
			f(t)
		})
	}
	func() {
		defer wg.Wait() // also when f(0) panics: no worker outlives the call
		f(0)
	}()
	if perr != nil {
		panic(perr)
	}
}

// scale sets C = beta*C (C = 0 when beta == 0, whatever C held).
func scale[T float32 | float64](beta T, c []T, m, n, ldc int) {
	for i := 0; i < m; i++ {
		row := c[i*ldc : i*ldc+n]
		switch beta {
		case 0:
			clear(row)
		case 1:
		default:
			for j := range row {
				row[j] *= beta
			}
		}
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
func roundUp(a, b int) int { return ceilDiv(a, b) * b }
