package index

// dot is dotGo in SSE (every amd64 processor has it): the same products
// and sums in the same order, so the same bits, two to six times faster
// (docs/benchmarks.md). It panics as dotGo does when b is shorter.
func dot(a, b []float32) float64 { return dotSSE(a, b[:len(a)]) }

//go:noescape
func dotSSE(a, b []float32) float64

// dotsI8 is dotsI8Go in SSE2: sixteen components at a time, products
// summed in pairs (PMADDWD) into int32 lanes. Integer sums are exact, so
// the order does not matter.
func dotsI8(codes []int8, q []int16, out []int32) {
	if len(q)%16 != 0 || len(codes) != len(out)*len(q) {
		panic("index: dotsI8 of mismatched lengths")
	}
	dotsI8SSE(codes, q, out)
}

//go:noescape
func dotsI8SSE(codes []int8, q []int16, out []int32)
