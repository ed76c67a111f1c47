//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package bleve

import (
	"fmt"
	"os"

	"github.com/memhost/memhost/sdk"
)

// lockDir only opens the lock file here: this platform has no flock, and
// a second opener is refused by bolt's own lock on root.bolt instead
// (bounded by boltTimeout, so it fails rather than hangs).
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bleve: open lock file %s: %w", path, sdk.FileStorageError(sdk.FileProblem(err)))
	}
	return f, nil
}

func unlockDir(f *os.File) { _ = f.Close() }
