// Package filelock keeps a plugin's store to one process at a time: an
// exclusive lock on a file beside the store, which the kernel drops when
// its holder dies (kill -9 included), so a crash never leaves it stale.
// The sqlite and markdown providers take one; a third-party provider
// whose store must not be opened twice may too.
package filelock

import (
	"errors"
	"os"
	"strconv"
	"strings"
)

// ErrHeld is the refusal of Acquire for a lock another open of the file
// holds: another process, or this one (the lock belongs to the open file).
var ErrHeld = errors.New("the lock is held by another process")

// Lock is a held lock; Release lets it go.
type Lock struct{ f *os.File }

// Holder answers the process id the lock file at path names (its holder
// writes it), 0 when it names none: for a refusal's message only.
func Holder(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// Release lets the lock go and closes its file.
func (l *Lock) Release() {
	if l == nil || l.f == nil {
		return
	}
	unlock(l.f)
	_ = l.f.Close()
	l.f = nil
}
