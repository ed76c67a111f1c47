package markdown

import (
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteErrorsSayTheProblemOnce: a record or snapshot write that fails
// (a full disk, a directory gone) names the file it was for and the
// reason once, not again under the temp file it went through.
func TestWriteErrorsSayTheProblemOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	record := filepath.Join(dir, "r1.md")
	_, err := writeAtomic(record, []byte("x"))
	check := func(what, path, temp string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: no error", what)
		}
		msg := err.Error()
		if strings.Count(msg, dir) != 1 || !strings.Contains(msg, path) || strings.Contains(msg, temp) {
			t.Errorf("%s: %q should name %s once and not its temp file", what, msg, path)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: %v lost its reason", what, err)
		}
	}
	check("record", record, tempPrefix, err)
	snap := filepath.Join(dir, DefaultSnapshot)
	err = writeSnapshotFile(snap, func(io.Writer) error { return nil })
	check("snapshot", snap, ".tmp-", err)
}
