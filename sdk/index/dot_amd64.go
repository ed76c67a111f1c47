package index

import "golang.org/x/sys/cpu"

// dot is dotGo in SSE (every amd64 processor has it): the same products
// and sums in the same order, so the same bits, two to six times faster
// (docs/benchmarks.md). It panics as dotGo does when b is shorter.
func dot(a, b []float32) float64 { return dotSSE(a, b[:len(a)]) }

//go:noescape
func dotSSE(a, b []float32) float64

// dotsI8 is dotsI8Go in AVX-512 (with VNNI) or AVX2 where the processor
// has it, SSE2 otherwise: products summed in pairs into int32 lanes.
// Integer sums are exact, so the order does not matter and all answer the
// same. AVX2 takes sixteen components a step and widens them in one
// instruction; AVX-512 takes thirty-two and four copies at a time:
// 30,000 copies of 112 components took 0.15-0.20 ms in SSE2, 0.08 in
// AVX2 and 0.045 in AVX-512 (BenchmarkDotsI8, docs/benchmarks.md).
func dotsI8(codes []int8, q []int16, out []int32) {
	if len(q)%16 != 0 || len(codes) != len(out)*len(q) {
		panic("index: dotsI8 of mismatched lengths")
	}
	if len(q) == 0 { // the kernels take at least one step a copy
		clear(out)
		return
	}
	if hasAVX512 {
		dotsI8AVX512(codes, q, out)
		return
	}
	if hasAVX2 {
		dotsI8AVX2(codes, q, out)
		return
	}
	dotsI8SSE(codes, q, out)
}

// hasAVX2 is whether the processor and the operating system run AVX2.
var hasAVX2 = cpu.X86.HasAVX2

// hasAVX512 is whether the processor and the operating system run the
// AVX-512 instructions dotsI8AVX512 takes (byte and word operations and
// VNNI's VPDPWSSD), and the AVX2 ones its tail and sums take.
var hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VNNI

//go:noescape
func dotsI8SSE(codes []int8, q []int16, out []int32)

//go:noescape
func dotsI8AVX2(codes []int8, q []int16, out []int32)

//go:noescape
func dotsI8AVX512(codes []int8, q []int16, out []int32)
