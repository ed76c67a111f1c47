//go:build !amd64

package index

func dot(a, b []float32) float64 { return dotGo(a, b) }
