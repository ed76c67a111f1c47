package markdown

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestAFileItMayNotWriteIsReadOnly: from an outside review. A record's
// directory or file the plugin's user may not write (EACCES, as a
// "chmod 555" directory gives the plugin run as its own user) answered
// 500 internal; it is read_only now, as a read-only mount is. Tests run
// as root, which no mode bit refuses, so the file system's error is
// given as the write paths wrap it.
func TestAFileItMayNotWriteIsReadOnly(t *testing.T) {
	path := "/data/md/default/realm/r1.md"
	for _, c := range []struct {
		name string
		err  error
		want sdk.Code
	}{
		{"a file it may not write", fmt.Errorf("markdown: write %s: %w", path, sdk.FileProblem(&fs.PathError{Op: "open", Path: path, Err: syscall.EACCES})), sdk.CodeReadOnly},
		{"a directory it may not create", fmt.Errorf("markdown: create %s: %w", filepath.Dir(path), sdk.FileProblem(&fs.PathError{Op: "mkdir", Path: filepath.Dir(path), Err: syscall.EACCES})), sdk.CodeReadOnly},
		{"an immutable file", &fs.PathError{Op: "rename", Path: path, Err: syscall.EPERM}, sdk.CodeReadOnly},
		{"a read-only mount", &fs.PathError{Op: "open", Path: path, Err: syscall.EROFS}, sdk.CodeReadOnly},
		{"a full disk", &fs.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}, sdk.CodeStorageFull},
		{"a refusal to write through a link", fmt.Errorf("markdown: %s is not a plain directory; refusing to write through it: %w", path, sdk.ErrPermission), sdk.CodePermissionDenied},
		{"a changed file", errFileChanged, sdk.CodeConflict},
		{"another failure", errors.New("markdown: disk on fire"), sdk.CodeInternal},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := storageError(c.err)
			if code := sdk.CodeOf(got); code != c.want {
				t.Fatalf("%v answers %s, want %s", got, code, c.want)
			}
			if !errors.Is(got, c.err) {
				t.Errorf("%v lost the error it classifies", got)
			}
		})
	}
	if storageError(nil) != nil {
		t.Error("no error became one")
	}
}

// TestADirectoryItCannotCreateIsNamedOnce: a scope directory the plugin
// could not create named its path twice ("create …/identity: mkdir
// …/identity: permission denied"); the reason follows the path once.
func TestADirectoryItCannotCreateIsNamedOnce(t *testing.T) {
	root := filepath.Join(t.TempDir(), "gone")
	err := ensureDir(root, "default/realm")
	if err == nil {
		t.Fatal("a directory under a missing root was created")
	}
	dir := filepath.Join(root, "default")
	if msg := err.Error(); strings.Count(msg, dir) != 1 || strings.Contains(msg, "mkdir") {
		t.Errorf("%q should name %s once", msg, dir)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%v lost its reason", err)
	}
}
