//go:build unix

package statedb

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// acquire takes an exclusive flock on path, refusing (ErrInUse) when
// another process holds it. The lock belongs to the open file, so it ends
// with the process however that ends.
func acquire(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state database lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state database lock %s: %w", path, ErrInUse)
		}
		return nil, fmt.Errorf("state database lock %s: %w", path, err)
	}
	return f, nil
}

func release(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}

// held reports whether another process holds the lock at path: a probe
// that takes and releases it, and creates nothing.
func held(path string) bool {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false
}
