package index

// dotsI8Kernels answers the int8 kernels this processor runs, by name.
func dotsI8Kernels() map[string]func([]int8, []int16, []int32) {
	k := map[string]func([]int8, []int16, []int32){"sse2": dotsI8SSE, "dispatch": dotsI8}
	if hasAVX2 {
		k["avx2"] = dotsI8AVX2
	}
	if hasAVX512 {
		k["avx512"] = dotsI8AVX512
	}
	return k
}
