//go:build amd64 && !purego

#include "textflag.h"

// Vector erf and Gelu (erf form) for float32 slices: the operations of
// erfSlice and geluErfSlice in fastmath.go (expf, erfcPoly, erfFrom,
// geluErfFrom), in the same order and without fused multiply-adds, so the
// results are the same bits. The coefficient table (erfVecTab) is looked up
// with permutes: entries 0-15 with VPERMT2PD, 16-20 with a masked VPERMPD.

DATA erfk<>+0(SB)/8, $0x7fffffffffffffff  // abs mask
DATA erfk<>+8(SB)/8, $0x8000000000000000  // sign mask
DATA erfk<>+16(SB)/8, $0x3fd0000000000000 // 0.25
DATA erfk<>+24(SB)/8, $0x3f30000000000000 // 2^-12
DATA erfk<>+32(SB)/8, $0x3ff20dd750429b6d // 2/sqrt(pi)
DATA erfk<>+40(SB)/8, $0x3fd5555555555555 // 1/3
DATA erfk<>+48(SB)/8, $0x3fe6a09e667f3bcd // 1/sqrt(2)
GLOBL erfk<>(SB), RODATA|NOPTR, $56

// SETUP loads the constants of exp (Z17-Z31, as in expPDAVX512) and of
// erfcPoly (Z13-Z16).
#define SETUP \
	MOVQ $0x40571547652b82fe, DX; VPBROADCASTQ DX, Z20; \
	MOVQ $0x4338000000000000, DX; VPBROADCASTQ DX, Z21; \
	MOVQ $0x3f862e42fee00000, DX; VPBROADCASTQ DX, Z22; \
	MOVQ $0x3d8a39ef35793c76, DX; VPBROADCASTQ DX, Z23; \
	MOVQ $0x3f56c16c16c16c17, DX; VPBROADCASTQ DX, Z24; \
	MOVQ $0x3f81111111111111, DX; VPBROADCASTQ DX, Z25; \
	MOVQ $0x3fa5555555555555, DX; VPBROADCASTQ DX, Z26; \
	MOVQ $0x3fc5555555555555, DX; VPBROADCASTQ DX, Z27; \
	MOVQ $0x3fe0000000000000, DX; VPBROADCASTQ DX, Z28; \
	MOVQ $0x3ff0000000000000, DX; VPBROADCASTQ DX, Z29; \
	MOVQ $0x4085e00000000000, DX; VPBROADCASTQ DX, Z30; \
	MOVQ $0xc085e00000000000, DX; VPBROADCASTQ DX, Z31; \
	MOVQ $0x7ff0000000000000, DX; VPBROADCASTQ DX, Z19; \
	MOVQ $63, DX; VPBROADCASTQ DX, Z18; \
	MOVQ $1023, DX; VPBROADCASTQ DX, Z17; \
	MOVQ $0x4025000000000000, DX; VPBROADCASTQ DX, Z13; \
	MOVQ $20, DX; VPBROADCASTQ DX, Z14; \
	MOVQ $15, DX; VPBROADCASTQ DX, Z15; \
	MOVQ $0x3fe0000000000000, DX; VPBROADCASTQ DX, Z16

// EXP sets Z2 = expf(Z2) (the steps of expPDAVX512; temporaries Z3-Z12).
#define EXP \
	VMULPD  Z20, Z2, Z3; \
	VADDPD  Z21, Z3, Z3; \
	VSUBPD  Z21, Z3, Z4; \
	VCVTPD2QQ Z4, Z5; \
	VMULPD  Z22, Z4, Z6; \
	VSUBPD  Z6, Z2, Z6; \
	VMULPD  Z23, Z4, Z7; \
	VSUBPD  Z7, Z6, Z6; \
	VMULPD  Z24, Z6, Z7; \
	VADDPD  Z25, Z7, Z7; \
	VMULPD  Z7, Z6, Z7; \
	VADDPD  Z26, Z7, Z7; \
	VMULPD  Z7, Z6, Z7; \
	VADDPD  Z27, Z7, Z7; \
	VMULPD  Z7, Z6, Z7; \
	VADDPD  Z28, Z7, Z7; \
	VMULPD  Z6, Z6, Z8; \
	VMULPD  Z7, Z8, Z7; \
	VADDPD  Z7, Z6, Z7; \
	VPANDQ  Z18, Z5, Z9; \
	VPSRAQ  $6, Z5, Z10; \
	VPADDQ  Z17, Z10, Z10; \
	VPSLLQ  $52, Z10, Z10; \
	KXNORB  K1, K1, K1; \
	VGATHERQPD (AX)(Z9*8), K1, Z11; \
	VMULPD  Z10, Z11, Z11; \
	VADDPD  Z29, Z7, Z7; \
	VMULPD  Z7, Z11, Z11; \
	VCMPPD  $0x1e, Z30, Z2, K2; \
	VMOVAPD Z19, K2, Z11; \
	VCMPPD  $0x11, Z31, Z2, K3; \
	VPXORQ  Z12, Z12, Z12; \
	VMOVAPD Z12, K3, Z11; \
	VMOVAPD Z11, Z2

// IDX computes, for erfcPoly(Z1), the table index (Z3), t (Z4), t² (Z5),
// t⁴ (Z6) and K4 = the lanes whose index is 16 or more.
#define IDX \
	VMINPD  Z1, Z13, Z12; \
	VADDPD  Z12, Z12, Z3; \
	VCVTTPD2QQ Z3, Z3; \
	VPMINUQ Z14, Z3, Z3; \
	VCVTQQ2PD Z3, Z4; \
	VMULPD  Z16, Z4, Z4; \
	VADDPD.BCST erfk<>+16(SB), Z4, Z4; \
	VSUBPD  Z4, Z12, Z4; \
	VPCMPGTQ Z15, Z3, K4; \
	VMULPD  Z4, Z4, Z5; \
	VMULPD  Z5, Z5, Z6

// POLY sets Z7 = erfcPoly(Z1) after IDX (temporaries Z8-Z12).
#define POLY \
	VMOVUPD 0(BX), Z7; \
	VPERMT2PD 64(BX), Z3, Z7; \
	VPERMPD 128(BX), Z3, K4, Z7; \
	VMOVUPD 192(BX), Z10; \
	VPERMT2PD 256(BX), Z3, Z10; \
	VPERMPD 320(BX), Z3, K4, Z10; \
	VMULPD  Z4, Z10, Z10; \
	VADDPD  Z10, Z7, Z7; \
	VMOVUPD 384(BX), Z11; \
	VPERMT2PD 448(BX), Z3, Z11; \
	VPERMPD 512(BX), Z3, K4, Z11; \
	VMOVUPD 576(BX), Z10; \
	VPERMT2PD 640(BX), Z3, Z10; \
	VPERMPD 704(BX), Z3, K4, Z10; \
	VMULPD  Z4, Z10, Z10; \
	VADDPD  Z10, Z11, Z11; \
	VMULPD  Z5, Z11, Z11; \
	VADDPD  Z11, Z7, Z7; \
	VMOVUPD 768(BX), Z8; \
	VPERMT2PD 832(BX), Z3, Z8; \
	VPERMPD 896(BX), Z3, K4, Z8; \
	VMOVUPD 960(BX), Z10; \
	VPERMT2PD 1024(BX), Z3, Z10; \
	VPERMPD 1088(BX), Z3, K4, Z10; \
	VMULPD  Z4, Z10, Z10; \
	VADDPD  Z10, Z8, Z8; \
	VMOVUPD 1152(BX), Z11; \
	VPERMT2PD 1216(BX), Z3, Z11; \
	VPERMPD 1280(BX), Z3, K4, Z11; \
	VMOVUPD 1344(BX), Z10; \
	VPERMT2PD 1408(BX), Z3, Z10; \
	VPERMPD 1472(BX), Z3, K4, Z10; \
	VMULPD  Z4, Z10, Z10; \
	VADDPD  Z10, Z11, Z11; \
	VMULPD  Z5, Z11, Z11; \
	VADDPD  Z11, Z8, Z8; \
	VMOVUPD 1536(BX), Z9; \
	VPERMT2PD 1600(BX), Z3, Z9; \
	VPERMPD 1664(BX), Z3, K4, Z9; \
	VMOVUPD 1728(BX), Z10; \
	VPERMT2PD 1792(BX), Z3, Z10; \
	VPERMPD 1856(BX), Z3, K4, Z10; \
	VMULPD  Z4, Z10, Z10; \
	VADDPD  Z10, Z9, Z9; \
	VMOVUPD 1920(BX), Z10; \
	VPERMT2PD 1984(BX), Z3, Z10; \
	VPERMPD 2048(BX), Z3, K4, Z10; \
	VMULPD  Z5, Z10, Z10; \
	VADDPD  Z10, Z9, Z9; \
	VMULPD  Z6, Z8, Z8; \
	VADDPD  Z8, Z7, Z7; \
	VMULPD  Z6, Z6, Z10; \
	VMULPD  Z10, Z9, Z9; \
	VADDPD  Z9, Z7, Z7

// POLY16 is POLY when every index is below 16 (|y| < 8: the common case).
#define POLY16 \
	VMOVUPD 0(BX), Z7; \
	VPERMT2PD 64(BX), Z3, Z7; \
	VMOVUPD 192(BX), Z10; \
	VPERMT2PD 256(BX), Z3, Z10; \
	VMULPD  Z4, Z10, Z10; \
	VADDPD  Z10, Z7, Z7; \
	VMOVUPD 384(BX), Z11; \
	VPERMT2PD 448(BX), Z3, Z11; \
	VMOVUPD 576(BX), Z10; \
	VPERMT2PD 640(BX), Z3, Z10; \
	VMULPD  Z4, Z10, Z10; \
	VADDPD  Z10, Z11, Z11; \
	VMULPD  Z5, Z11, Z11; \
	VADDPD  Z11, Z7, Z7; \
	VMOVUPD 768(BX), Z8; \
	VPERMT2PD 832(BX), Z3, Z8; \
	VMOVUPD 960(BX), Z10; \
	VPERMT2PD 1024(BX), Z3, Z10; \
	VMULPD  Z4, Z10, Z10; \
	VADDPD  Z10, Z8, Z8; \
	VMOVUPD 1152(BX), Z11; \
	VPERMT2PD 1216(BX), Z3, Z11; \
	VMOVUPD 1344(BX), Z10; \
	VPERMT2PD 1408(BX), Z3, Z10; \
	VMULPD  Z4, Z10, Z10; \
	VADDPD  Z10, Z11, Z11; \
	VMULPD  Z5, Z11, Z11; \
	VADDPD  Z11, Z8, Z8; \
	VMOVUPD 1536(BX), Z9; \
	VPERMT2PD 1600(BX), Z3, Z9; \
	VMOVUPD 1728(BX), Z10; \
	VPERMT2PD 1792(BX), Z3, Z10; \
	VMULPD  Z4, Z10, Z10; \
	VADDPD  Z10, Z9, Z9; \
	VMOVUPD 1920(BX), Z10; \
	VPERMT2PD 1984(BX), Z3, Z10; \
	VMULPD  Z5, Z10, Z10; \
	VADDPD  Z10, Z9, Z9; \
	VMULPD  Z6, Z8, Z8; \
	VADDPD  Z8, Z7, Z7; \
	VMULPD  Z6, Z6, Z10; \
	VMULPD  Z10, Z9, Z9; \
	VADDPD  Z9, Z7, Z7

// func erfPSAVX512(d, s *float32, n int, exp *float64, tab *erfVecTab)
// d[i] = erf(s[i]) as erfSlice computes it, for n a multiple of 8.
TEXT ·erfPSAVX512(SB), NOSPLIT, $0-40
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ exp+24(FP), AX
	MOVQ tab+32(FP), BX
	SHRQ $3, CX
	JZ   erfdone
	SETUP

erfloop:
	VCVTPS2PD (SI), Z0                   // x
	VPANDQ.BCST erfk<>+0(SB), Z0, Z1     // y = |x|
	VMULPD  Z1, Z1, Z2
	VPXORQ.BCST erfk<>+8(SB), Z2, Z2     // -x²
	EXP
	IDX
	KORTESTB K4, K4
	JNZ     erffar
	POLY16
	JMP     erfpoly
erffar:
	POLY
erfpoly:
	VMULPD  Z7, Z2, Z8                   // e*p
	VSUBPD  Z8, Z29, Z8                  // 1 - e*p
	VPANDQ.BCST erfk<>+0(SB), Z8, Z8
	VPANDQ.BCST erfk<>+8(SB), Z0, Z9
	VPORQ   Z9, Z8, Z8                   // Copysign(1 - e*p, x)
	VMULPD.BCST erfk<>+32(SB), Z0, Z9    // x*(2/√π)
	VMULPD  Z0, Z0, Z10
	VMULPD.BCST erfk<>+40(SB), Z10, Z10  // x*x*(1/3)
	VSUBPD  Z10, Z29, Z10
	VMULPD  Z10, Z9, Z9                  // the |x| < 2^-12 form
	VBROADCASTSD erfk<>+24(SB), Z10
	VCMPPD  $0x11, Z10, Z1, K5           // |x| < 2^-12 (LT_OQ)
	VMOVAPD Z9, K5, Z8
	VCVTPD2PS Z8, Y8
	VMOVUPS Y8, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     erfloop
erfdone:
	VZEROUPPER
	RET

// func geluErfPSAVX512(d, s *float32, n int, exp *float64, tab *erfVecTab)
// d[i] = x·Φ(x) as geluErfSlice computes it, for n a multiple of 8.
TEXT ·geluErfPSAVX512(SB), NOSPLIT, $0-40
	MOVQ d+0(FP), DI
	MOVQ s+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ exp+24(FP), AX
	MOVQ tab+32(FP), BX
	SHRQ $3, CX
	JZ   geludone
	SETUP

geluloop:
	VCVTPS2PD (SI), Z0                   // x
	VPANDQ.BCST erfk<>+0(SB), Z0, Z1
	VMULPD.BCST erfk<>+48(SB), Z1, Z1    // y = |x|/√2
	VMULPD  Z1, Z1, Z2
	VPXORQ.BCST erfk<>+8(SB), Z2, Z2     // -y²
	EXP
	IDX
	KORTESTB K4, K4
	JNZ     gelufar
	POLY16
	JMP     gelupoly
gelufar:
	POLY
gelupoly:
	VMULPD  Z7, Z2, Z8                   // e*p
	VMULPD  Z16, Z0, Z9                  // 0.5*x
	VMULPD  Z8, Z9, Z8                   // he
	VSUBPD  Z8, Z0, Z9                   // x - he
	VPMOVQ2M Z0, K5                      // x's sign bit
	VMOVAPD Z8, K5, Z9
	VCMPPD  $0, Z19, Z0, K6              // x == +Inf
	VMOVAPD Z19, K6, Z9
	VCVTPD2PS Z9, Y9
	VMOVUPS Y9, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     geluloop
geludone:
	VZEROUPPER
	RET
