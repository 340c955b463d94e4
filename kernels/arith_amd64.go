//go:build amd64 && !purego

package kernels

import "unsafe"

// The AVX-512 loops of arith_amd64.s (vv: a[i] op b[i], vs: a[i] op b[0],
// sv: a[0] op b[i]).

//go:noescape
func addPSVV(d, a, b *float32, n int)

//go:noescape
func addPSVS(d, a, b *float32, n int)

//go:noescape
func addPSSV(d, a, b *float32, n int)

//go:noescape
func subPSVV(d, a, b *float32, n int)

//go:noescape
func subPSVS(d, a, b *float32, n int)

//go:noescape
func subPSSV(d, a, b *float32, n int)

//go:noescape
func mulPSVV(d, a, b *float32, n int)

//go:noescape
func mulPSVS(d, a, b *float32, n int)

//go:noescape
func mulPSSV(d, a, b *float32, n int)

//go:noescape
func divPSVV(d, a, b *float32, n int)

//go:noescape
func divPSVS(d, a, b *float32, n int)

//go:noescape
func divPSSV(d, a, b *float32, n int)

//go:noescape
func reluPS(d, s *float32, n int)

var arithPS = [4][3]func(d, a, b *float32, n int){
	opAdd: {addPSVV, addPSVS, addPSSV},
	opSub: {subPSVV, subPSVS, subPSSV},
	opMul: {mulPSVV, mulPSVS, mulPSSV},
	opDiv: {divPSVV, divPSVS, divPSSV},
}

// binVec32 computes binRun(op, d, a, b, ia, ib) for float32 with AVX-512
// (the same bits: one IEEE operation per element) and reports whether it
// did: only Add, Sub, Mul and Div, and runs where a and b are contiguous
// or one of them is a scalar.
func binVec32(op binOp, d, a, b []float32, ia, ib int) bool {
	n := len(d)
	if !hasAVX512 || op > opDiv || n == 0 {
		return false
	}
	var mode int
	switch {
	case ia == 1 && ib == 1:
		_, _ = a[n-1], b[n-1]
	case ia == 1 && ib == 0:
		_, _ = a[n-1], b[0]
		mode = 1
	case ia == 0 && ib == 1:
		_, _ = a[0], b[n-1]
		mode = 2
	default:
		return false
	}
	arithPS[op][mode](unsafe.SliceData(d), unsafe.SliceData(a), unsafe.SliceData(b), n)
	return true
}

// reluVec32 sets d[i] = reluT(s[i]) with AVX-512 and reports whether it
// did.
func reluVec32(d, s []float32) bool {
	if !hasAVX512 || len(s) == 0 {
		return false
	}
	_ = d[len(s)-1]
	reluPS(unsafe.SliceData(d), unsafe.SliceData(s), len(s))
	return true
}
