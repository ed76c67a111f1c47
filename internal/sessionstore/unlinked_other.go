//go:build !unix

package sessionstore

import "os"

// unlinked cannot tell here; the merge's check of the path catches a
// moved journal instead.
func unlinked(os.FileInfo) bool { return false }
