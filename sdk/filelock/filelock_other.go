//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package filelock

import "os"

// Acquire only opens the lock file here: this platform has no flock, so a
// second opener is not refused.
func Acquire(path string, perm os.FileMode) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	return &Lock{f: f}, nil
}

func unlock(*os.File) {}
