//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package bleve

import (
	"errors"
	"fmt"
	"os"
	"syscall"

	"github.com/memhost/memhost/sdk"
)

// lockDir takes an exclusive, non-blocking flock on path. flock locks
// belong to the open file, so a second opener fails even inside the same
// process, and the kernel drops the lock when its holder dies (kill -9
// included), so a crash never leaves a stale lock behind.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("bleve: open lock file %s: %w", path, sdk.FileStorageError(sdk.FileProblem(err)))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("bleve: %s is locked by another process: is another memhost host, or another instance of this one, using this store, or is the plugin of a host just killed still closing it (it exits on its own, and a retry then succeeds)? %w", path, sdk.ErrConflict)
		}
		return nil, fmt.Errorf("bleve: lock %s: %w", path, err)
	}
	return f, nil
}

func unlockDir(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	_ = f.Close()
}
