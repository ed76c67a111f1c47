//go:build !amd64

package index

func dot(a, b []float32) float64 { return dotGo(a, b) }

func dotsI8(codes []int8, q []int16, out []int32) { dotsI8Go(codes, q, out) }
