//go:build amd64 && !purego

#include "textflag.h"

// Elementwise float32 arithmetic with AVX-512: one IEEE operation per
// element, the same bits as the Go loops in binRun. Each function
// d[i] = a[i] op b[i] (vv), a[i] op b[0] (vs) or a[0] op b[i] (sv) for
// n >= 0 elements; the last n%16 go through a lane mask.

// func addPSVV(d, a, b *float32, n int)
TEXT ·addPSVV(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JZ   addPSVVdone
	CMPQ CX, $16
	JB   addPSVVtail
addPSVVloop:
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z1
	VADDPS  Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     addPSVVloop
	TESTQ   CX, CX
	JZ      addPSVVdone
addPSVVtail:
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VPXORD  Z0, Z0, Z0
	VMOVUPS (SI), K1, Z0
	VPXORD  Z1, Z1, Z1
	VMOVUPS (DX), K1, Z1
	VADDPS  Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
addPSVVdone:
	VZEROUPPER
	RET

// func addPSVS(d, a, b *float32, n int)
TEXT ·addPSVS(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JZ   addPSVSdone
	VBROADCASTSS (DX), Z1
	CMPQ CX, $16
	JB   addPSVStail
addPSVSloop:
	VMOVUPS (SI), Z0
	VADDPS  Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     addPSVSloop
	TESTQ   CX, CX
	JZ      addPSVSdone
addPSVStail:
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VPXORD  Z0, Z0, Z0
	VMOVUPS (SI), K1, Z0
	VADDPS  Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
addPSVSdone:
	VZEROUPPER
	RET

// func addPSSV(d, a, b *float32, n int)
TEXT ·addPSSV(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JZ   addPSSVdone
	VBROADCASTSS (SI), Z0
	CMPQ CX, $16
	JB   addPSSVtail
addPSSVloop:
	VMOVUPS (DX), Z1
	VADDPS  Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     addPSSVloop
	TESTQ   CX, CX
	JZ      addPSSVdone
addPSSVtail:
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VPXORD  Z1, Z1, Z1
	VMOVUPS (DX), K1, Z1
	VADDPS  Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
addPSSVdone:
	VZEROUPPER
	RET

// func subPSVV(d, a, b *float32, n int)
TEXT ·subPSVV(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JZ   subPSVVdone
	CMPQ CX, $16
	JB   subPSVVtail
subPSVVloop:
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z1
	VSUBPS  Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     subPSVVloop
	TESTQ   CX, CX
	JZ      subPSVVdone
subPSVVtail:
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VPXORD  Z0, Z0, Z0
	VMOVUPS (SI), K1, Z0
	VPXORD  Z1, Z1, Z1
	VMOVUPS (DX), K1, Z1
	VSUBPS  Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
subPSVVdone:
	VZEROUPPER
	RET

// func subPSVS(d, a, b *float32, n int)
TEXT ·subPSVS(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JZ   subPSVSdone
	VBROADCASTSS (DX), Z1
	CMPQ CX, $16
	JB   subPSVStail
subPSVSloop:
	VMOVUPS (SI), Z0
	VSUBPS  Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     subPSVSloop
	TESTQ   CX, CX
	JZ      subPSVSdone
subPSVStail:
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VPXORD  Z0, Z0, Z0
	VMOVUPS (SI), K1, Z0
	VSUBPS  Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
subPSVSdone:
	VZEROUPPER
	RET

// func subPSSV(d, a, b *float32, n int)
TEXT ·subPSSV(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JZ   subPSSVdone
	VBROADCASTSS (SI), Z0
	CMPQ CX, $16
	JB   subPSSVtail
subPSSVloop:
	VMOVUPS (DX), Z1
	VSUBPS  Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     subPSSVloop
	TESTQ   CX, CX
	JZ      subPSSVdone
subPSSVtail:
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VPXORD  Z1, Z1, Z1
	VMOVUPS (DX), K1, Z1
	VSUBPS  Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
subPSSVdone:
	VZEROUPPER
	RET

// func mulPSVV(d, a, b *float32, n int)
TEXT ·mulPSVV(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JZ   mulPSVVdone
	CMPQ CX, $16
	JB   mulPSVVtail
mulPSVVloop:
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z1
	VMULPS  Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     mulPSVVloop
	TESTQ   CX, CX
	JZ      mulPSVVdone
mulPSVVtail:
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VPXORD  Z0, Z0, Z0
	VMOVUPS (SI), K1, Z0
	VPXORD  Z1, Z1, Z1
	VMOVUPS (DX), K1, Z1
	VMULPS  Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
mulPSVVdone:
	VZEROUPPER
	RET

// func mulPSVS(d, a, b *float32, n int)
TEXT ·mulPSVS(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JZ   mulPSVSdone
	VBROADCASTSS (DX), Z1
	CMPQ CX, $16
	JB   mulPSVStail
mulPSVSloop:
	VMOVUPS (SI), Z0
	VMULPS  Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     mulPSVSloop
	TESTQ   CX, CX
	JZ      mulPSVSdone
mulPSVStail:
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VPXORD  Z0, Z0, Z0
	VMOVUPS (SI), K1, Z0
	VMULPS  Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
mulPSVSdone:
	VZEROUPPER
	RET

// func mulPSSV(d, a, b *float32, n int)
TEXT ·mulPSSV(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JZ   mulPSSVdone
	VBROADCASTSS (SI), Z0
	CMPQ CX, $16
	JB   mulPSSVtail
mulPSSVloop:
	VMOVUPS (DX), Z1
	VMULPS  Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     mulPSSVloop
	TESTQ   CX, CX
	JZ      mulPSSVdone
mulPSSVtail:
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VPXORD  Z1, Z1, Z1
	VMOVUPS (DX), K1, Z1
	VMULPS  Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
mulPSSVdone:
	VZEROUPPER
	RET

// func divPSVV(d, a, b *float32, n int)
TEXT ·divPSVV(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JZ   divPSVVdone
	CMPQ CX, $16
	JB   divPSVVtail
divPSVVloop:
	VMOVUPS (SI), Z0
	VMOVUPS (DX), Z1
	VDIVPS  Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     divPSVVloop
	TESTQ   CX, CX
	JZ      divPSVVdone
divPSVVtail:
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VPXORD  Z0, Z0, Z0
	VMOVUPS (SI), K1, Z0
	VPXORD  Z1, Z1, Z1
	VMOVUPS (DX), K1, Z1
	VDIVPS  Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
divPSVVdone:
	VZEROUPPER
	RET

// func divPSVS(d, a, b *float32, n int)
TEXT ·divPSVS(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JZ   divPSVSdone
	VBROADCASTSS (DX), Z1
	CMPQ CX, $16
	JB   divPSVStail
divPSVSloop:
	VMOVUPS (SI), Z0
	VDIVPS  Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     divPSVSloop
	TESTQ   CX, CX
	JZ      divPSVSdone
divPSVStail:
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VPXORD  Z0, Z0, Z0
	VMOVUPS (SI), K1, Z0
	VDIVPS  Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
divPSVSdone:
	VZEROUPPER
	RET

// func divPSSV(d, a, b *float32, n int)
TEXT ·divPSSV(SB), NOSPLIT, $0-32
	MOVQ d+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	TESTQ CX, CX
	JZ   divPSSVdone
	VBROADCASTSS (SI), Z0
	CMPQ CX, $16
	JB   divPSSVtail
divPSSVloop:
	VMOVUPS (DX), Z1
	VDIVPS  Z1, Z0, Z2
	VMOVUPS Z2, (DI)
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     divPSSVloop
	TESTQ   CX, CX
	JZ      divPSSVdone
divPSSVtail:
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VPXORD  Z1, Z1, Z1
	VMOVUPS (DX), K1, Z1
	VDIVPS  Z1, Z0, Z2
	VMOVUPS Z2, K1, (DI)
divPSSVdone:
	VZEROUPPER
	RET

// func reluPS(d, s *float32, n int)
// d[i] = 0 where s[i] < 0, else s[i] (-0 and NaN kept, as reluT does).
TEXT ·reluPS(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	TESTQ CX, CX
	JZ   reludone
	VPXORD  Z3, Z3, Z3
	CMPQ CX, $16
	JB   relutail
reluloop:
	VMOVUPS (SI), Z0
	VCMPPS  $0x11, Z3, Z0, K2 // s < 0 (LT_OQ)
	VMOVAPS Z3, K2, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	CMPQ    CX, $16
	JAE     reluloop
	TESTQ   CX, CX
	JZ      reludone
relutail:
	MOVL    $1, AX
	SHLL    CX, AX
	DECL    AX
	KMOVW   AX, K1
	VPXORD  Z0, Z0, Z0
	VMOVUPS (SI), K1, Z0
	VCMPPS  $0x11, Z3, Z0, K2
	VMOVAPS Z3, K2, Z0
	VMOVUPS Z0, K1, (DI)
reludone:
	VZEROUPPER
	RET
