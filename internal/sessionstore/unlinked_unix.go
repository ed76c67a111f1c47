//go:build unix

package sessionstore

import (
	"os"
	"syscall"
)

// unlinked reports whether an open file has no name left (deleted, or
// another file renamed over it).
func unlinked(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
