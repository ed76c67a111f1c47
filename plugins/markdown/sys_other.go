//go:build !unix

package markdown

import "io/fs"

const (
	openNoFollow = 0
	openNoWait   = 0
)

func inodeOf(fs.FileInfo) uint64 { return 0 }

// syncDir is a no-op where directories cannot be opened for syncing
// (Windows makes a rename durable on its own).
func syncDir(string) error { return nil }
