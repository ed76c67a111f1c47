//go:build !(linux || darwin || freebsd)

package bleve

// freeBytes cannot tell here; writes rely on scorch's own error.
func freeBytes(string) (uint64, bool) { return 0, false }
