#include "textflag.h"

// func dotSSE(a, b []float32) float64
// len(b) == len(a). X0 holds the running sums s0..s3 and X1 s4..s7 of
// dotGo: lane j of X0 (X1) adds the products of components i+j (i+4+j)
// for i a multiple of 8; the tail adds to s0; the end adds
// ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)). MULPS then ADDPS rounds as dotGo's
// product then sum do.
TEXT ·dotSSE(SB), NOSPLIT, $0-56
	MOVQ a_base+0(FP), SI
	MOVQ a_len+8(FP), CX
	MOVQ b_base+24(FP), DI
	XORPS X0, X0
	XORPS X1, X1
	MOVQ CX, DX
	ANDQ $-8, DX        // components in whole blocks of 8
	XORQ AX, AX         // i
	CMPQ DX, $0
	JEQ  tail
block:
	MOVUPS (SI)(AX*4), X2
	MOVUPS (DI)(AX*4), X3
	MULPS  X3, X2
	ADDPS  X2, X0
	MOVUPS 16(SI)(AX*4), X4
	MOVUPS 16(DI)(AX*4), X5
	MULPS  X5, X4
	ADDPS  X4, X1
	ADDQ   $8, AX
	CMPQ   AX, DX
	JLT    block
tail:
	CMPQ AX, CX
	JGE  reduce
	MOVSS (SI)(AX*4), X2
	MULSS (DI)(AX*4), X2
	ADDSS X2, X0
	INCQ  AX
	JMP   tail
reduce:
	// X0 = [s0 s1 s2 s3]: add each lane to its neighbour (a sum's
	// operands commute exactly), then the upper pair's sum to the lower's.
	PSHUFD  $0xb1, X0, X2
	ADDPS   X2, X0      // [s0+s1, s1+s0, s2+s3, s3+s2]
	MOVHLPS X0, X2
	ADDSS   X2, X0      // lane 0: (s0+s1)+(s2+s3)
	PSHUFD  $0xb1, X1, X3
	ADDPS   X3, X1
	MOVHLPS X1, X3
	ADDSS   X3, X1      // lane 0: (s4+s5)+(s6+s7)
	ADDSS   X1, X0
	CVTSS2SD X0, X0
	MOVSD   X0, ret+48(FP)
	RET

// func dotsI8SSE(codes []int8, q []int16, out []int32)
// len(q) is a positive multiple of 16, len(codes) == len(out)*len(q):
// dotsI8 answers an empty query itself.
TEXT ·dotsI8SSE(SB), NOSPLIT, $0-72
	MOVQ codes_base+0(FP), SI
	MOVQ q_base+24(FP), DI
	MOVQ q_len+32(FP), BX
	MOVQ out_base+48(FP), R8
	MOVQ out_len+56(FP), R9
	TESTQ R9, R9
	JEQ  done
vec:
	PXOR X0, X0
	PXOR X1, X1
	XORQ AX, AX
comp:
	// Eight codes, each byte doubled into a word and shifted back down:
	// sign-extended to int16.
	MOVQ      (SI)(AX*1), X2
	PUNPCKLBW X2, X2
	PSRAW     $8, X2
	MOVOU     (DI)(AX*2), X3
	PMADDWL   X3, X2
	PADDL     X2, X0
	MOVQ      8(SI)(AX*1), X4
	PUNPCKLBW X4, X4
	PSRAW     $8, X4
	MOVOU     16(DI)(AX*2), X5
	PMADDWL   X5, X4
	PADDL     X4, X1
	ADDQ      $16, AX
	CMPQ      AX, BX
	JLT       comp
	PADDL  X1, X0
	PSHUFD $0x4e, X0, X1
	PADDL  X1, X0
	PSHUFD $0xb1, X0, X1
	PADDL  X1, X0
	MOVQ   X0, AX
	MOVL   AX, (R8)
	ADDQ   BX, SI
	ADDQ   $4, R8
	DECQ   R9
	JNZ    vec
	RET
done:
	RET

// func dotsI8AVX2(codes []int8, q []int16, out []int32)
// dotsI8SSE's sums, sixteen components a step: VPMOVSXBW widens sixteen
// codes to int16 at once, VPMADDWD multiplies them by the query's and
// sums the products in pairs into eight int32 lanes.
TEXT ·dotsI8AVX2(SB), NOSPLIT, $0-72
	MOVQ codes_base+0(FP), SI
	MOVQ q_base+24(FP), DI
	MOVQ q_len+32(FP), BX
	MOVQ out_base+48(FP), R8
	MOVQ out_len+56(FP), R9
	TESTQ R9, R9
	JEQ  avxdone
avxvec:
	VPXOR Y0, Y0, Y0
	XORQ  AX, AX
avxcomp:
	VPMOVSXBW (SI)(AX*1), Y2
	VPMADDWD  (DI)(AX*2), Y2, Y2
	VPADDD    Y2, Y0, Y0
	ADDQ      $16, AX
	CMPQ      AX, BX
	JLT       avxcomp
	VEXTRACTI128 $1, Y0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPADDD       X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPADDD       X1, X0, X0
	VMOVD        X0, (R8)
	ADDQ   BX, SI
	ADDQ   $4, R8
	DECQ   R9
	JNZ    avxvec
	VZEROUPPER
	RET
avxdone:
	RET

// func dotsI8AVX512(codes []int8, q []int16, out []int32)
// dotsI8AVX2's sums, four copies at a time: VPMOVSXBW widens thirty-two
// codes of each copy to int16 at once and VPDPWSSD multiplies them by the
// query's and adds the products in pairs to sixteen int32 lanes (a copy's
// last sixteen components, when len(q) is an odd multiple of sixteen, take
// the 256-bit step). The four copies' lanes are summed together by
// VPHADDD, so a copy's horizontal sum costs a quarter of its own.
TEXT ·dotsI8AVX512(SB), NOSPLIT, $0-72
	MOVQ codes_base+0(FP), SI
	MOVQ q_base+24(FP), DI
	MOVQ q_len+32(FP), BX
	MOVQ out_base+48(FP), R8
	MOVQ out_len+56(FP), R9
	MOVQ BX, R13
	ANDQ $-32, R13 // components in whole 32-component steps
	CMPQ R9, $4
	JLT  z1check
z4vec:
	LEAQ   (SI)(BX*1), R10
	LEAQ   (SI)(BX*2), R11
	LEAQ   (R11)(BX*1), R12
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ   AX, AX
	CMPQ   R13, $0
	JEQ    z4tail
z4comp:
	VMOVDQU64 (DI)(AX*2), Z8
	VPMOVSXBW (SI)(AX*1), Z4
	VPMOVSXBW (R10)(AX*1), Z5
	VPMOVSXBW (R11)(AX*1), Z6
	VPMOVSXBW (R12)(AX*1), Z7
	VPDPWSSD  Z8, Z4, Z0
	VPDPWSSD  Z8, Z5, Z1
	VPDPWSSD  Z8, Z6, Z2
	VPDPWSSD  Z8, Z7, Z3
	ADDQ      $32, AX
	CMPQ      AX, R13
	JLT       z4comp
z4tail:
	CMPQ      AX, BX
	JEQ       z4sum
	VMOVDQU   (DI)(AX*2), Y8
	VPMOVSXBW (SI)(AX*1), Y4
	VPMOVSXBW (R10)(AX*1), Y5
	VPMOVSXBW (R11)(AX*1), Y6
	VPMOVSXBW (R12)(AX*1), Y7
	VPMADDWD  Y8, Y4, Y4
	VPMADDWD  Y8, Y5, Y5
	VPMADDWD  Y8, Y6, Y6
	VPMADDWD  Y8, Y7, Y7
	VPADDD    Z4, Z0, Z0
	VPADDD    Z5, Z1, Z1
	VPADDD    Z6, Z2, Z2
	VPADDD    Z7, Z3, Z3
z4sum:
	VEXTRACTI64X4 $1, Z0, Y4
	VEXTRACTI64X4 $1, Z1, Y5
	VEXTRACTI64X4 $1, Z2, Y6
	VEXTRACTI64X4 $1, Z3, Y7
	VPADDD        Y4, Y0, Y0
	VPADDD        Y5, Y1, Y1
	VPADDD        Y6, Y2, Y2
	VPADDD        Y7, Y3, Y3
	VPHADDD       Y1, Y0, Y0
	VPHADDD       Y3, Y2, Y2
	VPHADDD       Y2, Y0, Y0
	VEXTRACTI128  $1, Y0, X1
	VPADDD        X1, X0, X0
	VMOVDQU       X0, (R8)
	LEAQ          (R12)(BX*1), SI
	ADDQ          $16, R8
	SUBQ          $4, R9
	CMPQ          R9, $4
	JGE           z4vec
z1check:
	TESTQ R9, R9
	JEQ   zdone
z1vec:
	VPXORD Z0, Z0, Z0
	XORQ   AX, AX
	CMPQ   R13, $0
	JEQ    z1tail
z1comp:
	VPMOVSXBW (SI)(AX*1), Z4
	VPDPWSSD  (DI)(AX*2), Z4, Z0
	ADDQ      $32, AX
	CMPQ      AX, R13
	JLT       z1comp
z1tail:
	CMPQ      AX, BX
	JEQ       z1sum
	VPMOVSXBW (SI)(AX*1), Y4
	VPMADDWD  (DI)(AX*2), Y4, Y4
	VPADDD    Z4, Z0, Z0
z1sum:
	VEXTRACTI64X4 $1, Z0, Y4
	VPADDD        Y4, Y0, Y0
	VEXTRACTI128  $1, Y0, X1
	VPADDD        X1, X0, X0
	VPSHUFD       $0x4e, X0, X1
	VPADDD        X1, X0, X0
	VPSHUFD       $0xb1, X0, X1
	VPADDD        X1, X0, X0
	VMOVD         X0, (R8)
	ADDQ          BX, SI
	ADDQ          $4, R8
	DECQ          R9
	JNZ           z1vec
zdone:
	VZEROUPPER
	RET
