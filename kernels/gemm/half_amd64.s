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
