//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sqlite

import (
	"fmt"
	"os"
)

// lockFile only opens the lock file here: this platform has no flock. A
// second opener is then not refused, but SQLite's own file locking still
// keeps the database consistent (WAL with a shared-memory index).
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open lock file %s: %w", path, err)
	}
	return f, nil
}

func unlockFile(f *os.File) { _ = f.Close() }
