//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filelock

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
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

// TestSymlinkIsNotFollowed: from an outside review. A lock file replaced
// by a symbolic link was opened through it, and the pid written over the
// file it led to, wherever that was (a file outside the store, say).
func TestSymlinkIsNotFollowed(t *testing.T) {
	for _, c := range []struct {
		name   string
		target string // "" for a link to nothing
	}{
		{"a link to a file", "precious\n"},
		{"a dangling link", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(t.TempDir(), "victim")
			if c.target != "" {
				if err := os.WriteFile(victim, []byte(c.target), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			path := filepath.Join(dir, "store.lock")
			if err := os.Symlink(victim, path); err != nil {
				t.Fatal(err)
			}
			l, err := Acquire(path, 0o600)
			if err == nil {
				l.Release()
				t.Fatal("Acquire took a lock through a symbolic link")
			}
			if !strings.Contains(err.Error(), "symbolic link") {
				t.Fatalf("Acquire = %v, want it to say the lock file is a symbolic link", err)
			}
			got, rerr := os.ReadFile(victim)
			switch {
			case c.target == "" && !errors.Is(rerr, os.ErrNotExist):
				t.Fatalf("the link's target was created: %q, %v", got, rerr)
			case c.target != "" && string(got) != c.target:
				t.Fatalf("the link's target now holds %q, want %q", got, c.target)
			}
		})
	}
}
