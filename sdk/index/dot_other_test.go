//go:build !amd64

package index

// dotsI8Kernels answers the int8 kernels this processor runs, by name.
func dotsI8Kernels() map[string]func([]int8, []int16, []int32) {
	return map[string]func([]int8, []int16, []int32){"go": dotsI8}
}
