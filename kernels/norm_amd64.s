//go:build amd64 && !purego

#include "textflag.h"

// func lnStatsPS(x *float32, n int) (s1, s2 float64)
// The sum and the sum of squares of x[:n] (n a multiple of 8) in float64,
// over eight lanes (x*x is exact in float64), the lanes added at the end.
TEXT ·lnStatsPS(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	SHRQ $3, CX
	JZ   statsdone
statsloop:
	VCVTPS2PD (SI), Z2
	VADDPD  Z2, Z0, Z0
	VMULPD  Z2, Z2, Z3
	VADDPD  Z3, Z1, Z1
	ADDQ    $32, SI
	DECQ    CX
	JNZ     statsloop
statsdone:
	VEXTRACTF64X4 $1, Z0, Y2
	VADDPD  Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X2
	VADDPD  X2, X0, X0
	VPERMILPD $1, X0, X2
	VADDSD  X2, X0, X0
	VEXTRACTF64X4 $1, Z1, Y2
	VADDPD  Y2, Y1, Y1
	VEXTRACTF128 $1, Y1, X2
	VADDPD  X2, X1, X1
	VPERMILPD $1, X1, X2
	VADDSD  X2, X1, X1
	VMOVSD  X0, s1+16(FP)
	VMOVSD  X1, s2+24(FP)
	VZEROUPPER
	RET

// func lnRowPS(y, x, s, b *float32, n int, mu, is float64)
// y[i] = float32(((x[i]-mu)*is)*s[i] + b[i]) in float64 (n a multiple of
// 8): layerNormT's operations, the same bits. s or b nil leaves out its
// step.
TEXT ·lnRowPS(SB), NOSPLIT, $0-56
	MOVQ y+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ s+16(FP), DX
	MOVQ b+24(FP), BX
	MOVQ n+32(FP), CX
	VBROADCASTSD mu+40(FP), Z4
	VBROADCASTSD is+48(FP), Z5
	SHRQ $3, CX
	JZ   rowdone
rowloop:
	VCVTPS2PD (SI), Z0
	VSUBPD  Z4, Z0, Z0
	VMULPD  Z5, Z0, Z0
	TESTQ   DX, DX
	JZ      rownoscale
	VCVTPS2PD (DX), Z1
	VMULPD  Z1, Z0, Z0
	ADDQ    $32, DX
rownoscale:
	TESTQ   BX, BX
	JZ      rownobias
	VCVTPS2PD (BX), Z1
	VADDPD  Z1, Z0, Z0
	ADDQ    $32, BX
rownobias:
	VCVTPD2PS Z0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     rowloop
rowdone:
	VZEROUPPER
	RET
