//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package markdown

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/memhost/memhost/sdk"
)

// lockRoot takes an exclusive, non-blocking flock on path and writes this
// process's id into it. flock locks belong to the open file, so a second
// opener fails even inside the same process, and the kernel drops the lock
// when its holder dies (kill -9 included): a crash never leaves it stale.
func lockRoot(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, filePerm)
	if err != nil {
		return nil, fmt.Errorf("markdown: open lock file %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := ""
			if b, err := os.ReadFile(path); err == nil {
				if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
					holder = fmt.Sprintf(" (pid %d)", pid)
				}
			}
			return nil, fmt.Errorf("markdown: %s is locked by another instance of the provider%s: is a second provider block or memhost host using this root? %w", path, holder, sdk.ErrConflict)
		}
		return nil, fmt.Errorf("markdown: lock %s: %w", path, err)
	}
	// The pid only helps the refusal message; the lock is what matters.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

func unlockRoot(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	_ = f.Close()
}
