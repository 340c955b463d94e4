//go:build amd64 && !purego

#include "textflag.h"

// func expPDAVX512(d, s *float64, n int, tab *float64)
// d[i] = expf(s[i]) for n a multiple of 8: the operations of expf in
// fastmath.go, in the same order and without fused multiply-adds, so the
// results are the same bits. tab is expTab.
TEXT ·expPDAVX512(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ tab+24(FP), AX
	SHRQ $3, CX
	JZ   done

	MOVQ $0x40571547652b82fe, DX // 64/ln2
	VPBROADCASTQ DX, Z20
	MOVQ $0x4338000000000000, DX // 0x1.8p52
	VPBROADCASTQ DX, Z21
	MOVQ $0x3f862e42fee00000, DX // ln2/64 high
	VPBROADCASTQ DX, Z22
	MOVQ $0x3d8a39ef35793c76, DX // ln2/64 low
	VPBROADCASTQ DX, Z23
	MOVQ $0x3f56c16c16c16c17, DX // 1/720
	VPBROADCASTQ DX, Z24
	MOVQ $0x3f81111111111111, DX // 1/120
	VPBROADCASTQ DX, Z25
	MOVQ $0x3fa5555555555555, DX // 1/24
	VPBROADCASTQ DX, Z26
	MOVQ $0x3fc5555555555555, DX // 1/6
	VPBROADCASTQ DX, Z27
	MOVQ $0x3fe0000000000000, DX // 0.5
	VPBROADCASTQ DX, Z28
	MOVQ $0x3ff0000000000000, DX // 1
	VPBROADCASTQ DX, Z29
	MOVQ $0x4085e00000000000, DX // 700
	VPBROADCASTQ DX, Z30
	MOVQ $0xc085e00000000000, DX // -700
	VPBROADCASTQ DX, Z31
	MOVQ $0x7ff0000000000000, DX // +Inf
	VPBROADCASTQ DX, Z19
	MOVQ $63, DX
	VPBROADCASTQ DX, Z18
	MOVQ $1023, DX
	VPBROADCASTQ DX, Z17

loop:
	VMOVUPD (SI), Z0           // x
	VMULPD  Z20, Z0, Z1        // x*invL
	VADDPD  Z21, Z1, Z1        // t
	VSUBPD  Z21, Z1, Z2        // kf
	VCVTPD2QQ Z2, Z3           // k
	VMULPD  Z22, Z2, Z4        // kf*LHi
	VSUBPD  Z4, Z0, Z4         // x - kf*LHi
	VMULPD  Z23, Z2, Z5        // kf*LLo
	VSUBPD  Z5, Z4, Z4         // r
	VMULPD  Z24, Z4, Z5        // r/720
	VADDPD  Z25, Z5, Z5
	VMULPD  Z5, Z4, Z5
	VADDPD  Z26, Z5, Z5
	VMULPD  Z5, Z4, Z5
	VADDPD  Z27, Z5, Z5
	VMULPD  Z5, Z4, Z5
	VADDPD  Z28, Z5, Z5
	VMULPD  Z4, Z4, Z6         // r*r
	VMULPD  Z5, Z6, Z5
	VADDPD  Z5, Z4, Z5         // p = r + r*r*(...)
	VPANDQ  Z18, Z3, Z7        // j
	VPSRAQ  $6, Z3, Z8         // q
	VPADDQ  Z17, Z8, Z8
	VPSLLQ  $52, Z8, Z8        // scale
	KXNORB  K1, K1, K1
	VGATHERQPD (AX)(Z7*8), K1, Z9
	VMULPD  Z8, Z9, Z9         // tab*scale
	VADDPD  Z29, Z5, Z5        // 1+p
	VMULPD  Z5, Z9, Z9
	VCMPPD  $0x1e, Z30, Z0, K2 // x > 700 (GT_OQ)
	VMOVAPD Z19, K2, Z9
	VCMPPD  $0x11, Z31, Z0, K3 // x < -700 (LT_OQ)
	VPXORQ  Z10, Z10, Z10
	VMOVAPD Z10, K3, Z9
	VMOVUPD Z9, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     loop
done:
	VZEROUPPER
	RET
