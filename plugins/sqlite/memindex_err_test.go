package sqlite

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"
)

// TestSnapshotErrorSaysItOnce: from an outside review. On a full disk the
// plugin logged "write index snapshot X.tmp: index: encode: write X.tmp:
// no space left on device", the file and the write twice.
func TestSnapshotErrorSaysItOnce(t *testing.T) {
	full := &fs.PathError{Op: "write", Path: "/data/index.snapshot.tmp", Err: syscall.ENOSPC}
	err := snapshotErr("/data/index.snapshot.tmp", fmt.Errorf("index: encode: %w", full))
	if got := err.Error(); strings.Count(got, "index.snapshot.tmp") != 1 || strings.Count(got, "write") != 1 || !strings.Contains(got, "no space left on device") {
		t.Errorf("error %q, want the file and the reason once each", got)
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Error("the error no longer reads as a full disk")
	}
}
