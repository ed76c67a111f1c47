//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package markdown

import (
	"fmt"
	"os"
)

// lockRoot only opens the lock file here: this platform has no flock, so
// a second instance on the root is not refused.
func lockRoot(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, fmt.Errorf("markdown: open lock file %s: %w", path, err)
	}
	return f, nil
}

func unlockRoot(f *os.File) { _ = f.Close() }
