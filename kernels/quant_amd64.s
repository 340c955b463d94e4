//go:build amd64 && !purego

#include "textflag.h"

// func q4DotPS(a *float32, q *uint8, scales, zps *float32, nblk, bs int) float32
// The dot product of a row of K = nblk*bs floats with a 4-bit MatMulNBits
// weight row: sum over blocks b of scales[b] * sum_i a[i]*(q[i] - zps[b]).
// q holds bs/2 bytes a block, element 2j in the low nibble of byte j and
// 2j+1 in the high one; a is permuted per 32 elements (the 16 even ones,
// then the 16 odd ones) to match. bs is a multiple of 32.
TEXT ·q4DotPS(SB), NOSPLIT, $0-52
	MOVQ a+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ scales+16(FP), R8
	MOVQ zps+24(FP), R9
	MOVQ nblk+32(FP), CX
	MOVQ bs+40(FP), R10
	SHRQ $5, R10
	MOVL $15, AX
	VPBROADCASTD AX, Z15
	VPXORQ Z1, Z1, Z1
	TESTQ CX, CX
	JZ    done
blk:
	VBROADCASTSS (R9), Z14
	VPXORQ Z0, Z0, Z0
	MOVQ R10, DX
chunk:
	VPMOVZXBD (SI), Z2
	VPSRLD $4, Z2, Z3
	VPANDD Z15, Z2, Z2
	VCVTDQ2PS Z2, Z2
	VCVTDQ2PS Z3, Z3
	VSUBPS Z14, Z2, Z2
	VSUBPS Z14, Z3, Z3
	VFMADD231PS (DI), Z2, Z0
	VFMADD231PS 64(DI), Z3, Z0
	ADDQ $16, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  chunk
	VBROADCASTSS (R8), Z13
	VFMADD231PS Z13, Z0, Z1
	ADDQ $4, R8
	ADDQ $4, R9
	DECQ CX
	JNZ  blk
done:
	VEXTRACTF64X4 $1, Z1, Y2
	VADDPS Y2, Y1, Y1
	VEXTRACTF128 $1, Y1, X2
	VADDPS X2, X1, X1
	VPERMILPS $0x0E, X1, X2
	VADDPS X2, X1, X1
	VPERMILPS $0x01, X1, X2
	VADDSS X2, X1, X1
	VZEROUPPER
	MOVSS X1, ret+48(FP)
	RET

// func q4DequantPS(dst *float32, q *uint8, scales, zps *float32, nblk, bs int)
// Dequantizes nblk blocks of a 4-bit weight row into dst: (q - zps[b]) *
// scales[b], each 32 elements written permuted as q4DotPS reads a (the
// 16 even ones, then the 16 odd ones). bs is a multiple of 32.
TEXT ·q4DequantPS(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ scales+16(FP), R8
	MOVQ zps+24(FP), R9
	MOVQ nblk+32(FP), CX
	MOVQ bs+40(FP), R10
	SHRQ $5, R10
	MOVL $15, AX
	VPBROADCASTD AX, Z15
	TESTQ CX, CX
	JZ    ddone
dblk:
	VBROADCASTSS (R9), Z14
	VBROADCASTSS (R8), Z13
	MOVQ R10, DX
dchunk:
	VPMOVZXBD (SI), Z2
	VPSRLD $4, Z2, Z3
	VPANDD Z15, Z2, Z2
	VCVTDQ2PS Z2, Z2
	VCVTDQ2PS Z3, Z3
	VSUBPS Z14, Z2, Z2
	VSUBPS Z14, Z3, Z3
	VMULPS Z13, Z2, Z2
	VMULPS Z13, Z3, Z3
	VMOVUPS Z2, (DI)
	VMOVUPS Z3, 64(DI)
	ADDQ $16, SI
	ADDQ $128, DI
	DECQ DX
	JNZ  dchunk
	ADDQ $4, R8
	ADDQ $4, R9
	DECQ CX
	JNZ  dblk
ddone:
	VZEROUPPER
	RET
