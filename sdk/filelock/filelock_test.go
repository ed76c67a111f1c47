//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filelock

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestOneHolderAtATime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "store.lock")
	first, err := Acquire(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if pid := Holder(path); pid != os.Getpid() {
		t.Fatalf("the lock file names pid %d, want %d", pid, os.Getpid())
	}
	// A second open, even in this process, is refused.
	if _, err := Acquire(path, 0o600); !errors.Is(err, ErrHeld) {
		t.Fatalf("a second Acquire = %v, want ErrHeld", err)
	}
	first.Release()
	first.Release() // twice is harmless
	again, err := Acquire(path, 0o600)
	if err != nil {
		t.Fatalf("after Release, Acquire = %v", err)
	}
	again.Release()
	if _, err := Acquire(filepath.Join(t.TempDir(), "missing", "x.lock"), 0o600); err == nil || errors.Is(err, ErrHeld) {
		t.Fatalf("a lock in a missing directory = %v, want the open's error", err)
	}
}
