package gemm

import (
	"fmt"
	"math"
)

// Half is the element type of a B operand stored in 16 bits, which the
// products widen to float32 as they pack it (tile by tile: the operand is
// never held widened).
type Half uint8

const (
	Float16  Half = iota + 1 // IEEE binary16
	BFloat16                 // the upper 16 bits of a float32
)

// SgemmHalfB computes C = alpha*A*op(B) + beta*C like Sgemm with transA
// false, for a B of 16-bit elements of type h (bits in b): each block of
// op(B) is widened to float32 as it is packed, so B stays in its stored
// width. Rounding is Sgemm's on the widened values (the widening is
// exact).
func (e Exec) SgemmHalfB(h Half, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []uint16, ldb int, beta float32, c []float32, ldc int) {
	if h != Float16 && h != BFloat16 {
		panic(fmt.Sprintf("gemm: half type %d", h))
	}
	checkDims(m, n, k)
	checkMat("A", len(a), false, m, k, lda)
	checkMat("B", len(b), transB, k, n, ldb)
	checkMat("C", len(c), false, m, n, ldc)
	p := problem{ar: active, m: m, n: n, k: k, a: a, lda: lda,
		transB: transB, b16: b, half: h, ldb: ldb, alpha: alpha, beta: beta, c: c, ldc: ldc}
	p.run(e.threads())
}

// packBPanelHalf is packBPanel for a 16-bit B.
func packBPanelHalf(dst []float32, h Half, transB bool, b []uint16, ldb, p0, kcur, j0, w, nr int) {
	dst = dst[:kcur*nr]
	if !transB {
		for q := 0; q < kcur; q++ {
			row := dst[q*nr : q*nr+nr]
			widenHalf(row[:w], b[(p0+q)*ldb+j0:(p0+q)*ldb+j0+w], h)
			clear(row[w:])
		}
		return
	}
	if w < nr {
		clear(dst)
	}
	var buf [256]float32
	for j := 0; j < w; j++ {
		src := b[(j0+j)*ldb+p0:]
		for q0 := 0; q0 < kcur; q0 += len(buf) {
			n := min(len(buf), kcur-q0)
			widenHalf(buf[:n], src[q0:q0+n], h)
			for q, v := range buf[:n] {
				dst[(q0+q)*nr+j] = v
			}
		}
	}
}

// widenHalf converts s (16-bit elements of type h) into d.
func widenHalf(d []float32, s []uint16, h Half) {
	d = d[:len(s)]
	if h == BFloat16 {
		for i, v := range s {
			d[i] = math.Float32frombits(uint32(v) << 16)
		}
		return
	}
	i := widen16Vec(d, s)
	for ; i < len(s); i++ {
		d[i] = f16to32(s[i])
	}
}

// f16to32 widens a float16 (bits h), NaN payloads kept in the upper bits.
func f16to32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	man := uint32(h & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp != 0:
		return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
	}
	// Zero or subnormal: man * 2^-24.
	v := float32(man) * 0x1p-24
	if sign != 0 {
		v = -v
	}
	return v
}
