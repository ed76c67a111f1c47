package bleve

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestAnIndexItMayNotWriteIsReadOnly: from an outside review. An index
// directory the plugin's user may not write (EACCES, as "chmod 555" on
// the realm's store gives the plugin run as its own user) answered 500
// internal with scorch's text naming the segment file twice; it is
// read_only now, as a read-only mount is and as the markdown provider
// answers, naming the index's directory once. Tests run as root, which no
// mode bit refuses, so the error is given as scorch formats it (%v).
func TestAnIndexItMayNotWriteIsReadOnly(t *testing.T) {
	dir := "/data/bleve/b.bleve"
	zap := dir + "/store/00000000000f.zap"
	scorchErr := func(errno syscall.Errno) error {
		return fmt.Errorf("segment: %s persist err: %v", zap, &fs.PathError{Op: "open", Path: zap, Err: errno})
	}
	for _, c := range []struct {
		name string
		err  error
		want sdk.Code
	}{
		{"a store directory it may not write", scorchErr(syscall.EACCES), sdk.CodeReadOnly},
		{"an immutable store directory", scorchErr(syscall.EPERM), sdk.CodeReadOnly},
		{"a read-only mount", scorchErr(syscall.EROFS), sdk.CodeReadOnly},
		{"a full disk", scorchErr(syscall.ENOSPC), sdk.CodeStorageFull},
		{"a directory it may not create, wrapped", fmt.Errorf("bleve: create index %s: %w", dir, syscall.EACCES), sdk.CodeReadOnly},
		{"another failure", scorchErr(syscall.EIO), sdk.CodeInternal},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := storageError(dir, c.err)
			if code := sdk.CodeOf(got); code != c.want {
				t.Fatalf("%v answers %s, want %s", got, code, c.want)
			}
			if c.want == sdk.CodeInternal {
				return
			}
			if msg := got.Error(); strings.Count(msg, "/data/bleve") != 1 || (strings.Contains(c.err.Error(), "persist err") && strings.Contains(msg, zap)) {
				t.Errorf("%q should name the index's directory once, and no segment file", msg)
			}
		})
	}
	if err := fmt.Errorf("bleve: %w", sdk.ErrNoSpace); storageError(dir, err) != err {
		t.Error("an error classified already was classified again")
	}
}

// TestAnIndexItCannotCreateIsNamedOnce: a realm's index the plugin could
// not create named it and then its partial directory ("create index
// …/c.bleve: mkdir …/c.bleve.partial: permission denied"); the reason
// follows the index's path once, and keeps its class.
func TestAnIndexItCannotCreateIsNamedOnce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := createRealm(file, "c", slog.New(slog.DiscardHandler))
	if err == nil {
		t.Fatal("an index under a file was created")
	}
	if msg := err.Error(); strings.Count(msg, file) != 1 || strings.Contains(msg, partialSuffix) {
		t.Errorf("%q should name %s once", msg, filepath.Join(file, "c"+indexSuffix))
	}
	if !errors.Is(err, syscall.ENOTDIR) {
		t.Errorf("%v lost its reason", err)
	}
}
