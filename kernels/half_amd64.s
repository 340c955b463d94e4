//go:build amd64 && !purego

#include "textflag.h"

// func widen16F16C(d *float32, s *uint16, n int)
// n is a multiple of 8.
TEXT ·widen16F16C(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   wdone
wloop:
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       wloop
wdone:
	VZEROUPPER
	RET

// func narrow16F16C(d *uint16, s *float32, n int)
// n is a multiple of 8; rounding to nearest even.
TEXT ·narrow16F16C(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   ndone
nloop:
	VMOVUPS   (SI), Y0
	VCVTPS2PH $0, Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $16, DI
	DECQ      CX
	JNZ       nloop
ndone:
	VZEROUPPER
	RET
