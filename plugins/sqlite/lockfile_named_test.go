package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestALockFileItCannotOpenIsNamedOnce: from an outside review. A lock
// file the plugin could not open (a "chmod 444" memory.db.lock, for the
// plugin run as its own user) named it twice ("lock …/memory.db.lock:
// open …/memory.db.lock: permission denied"); the reason follows the path
// once and keeps its class. Tests run as root, which no mode bit refuses:
// a lock file under a regular file fails the same way (ENOTDIR).
func TestALockFileItCannotOpenIsNamedOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(file, "memory.db.lock")
	l, err := lockFile(path)
	if err == nil {
		l.Release()
		t.Fatal("a lock file under a file was opened")
	}
	if msg := err.Error(); strings.Count(msg, path) != 1 {
		t.Errorf("%q should name %s once", msg, path)
	}
	if !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("%v lost its reason", err)
	}
}
