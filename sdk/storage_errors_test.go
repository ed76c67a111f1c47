package sdk

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

func TestStorageErrorClassifiesSystemErrors(t *testing.T) {
	pathErr := func(errno syscall.Errno) error {
		return fmt.Errorf("write note: %w", &fs.PathError{Op: "write", Path: "/data/x", Err: errno})
	}
	for _, tc := range []struct {
		name string
		err  error
		want Code
	}{
		{"enospc", pathErr(syscall.ENOSPC), CodeStorageFull},
		{"edquot", pathErr(syscall.EDQUOT), CodeStorageFull},
		{"efbig", pathErr(syscall.EFBIG), CodeStorageFull},
		{"erofs", pathErr(syscall.EROFS), CodeReadOnly},
		{"eacces stays internal", pathErr(syscall.EACCES), CodeInternal},
		{"already classified", fmt.Errorf("x: %w", ErrNoSpace), CodeStorageFull},
		{"nil", nil, CodeOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := StorageError(tc.err)
			if c := CodeOf(got); c != tc.want {
				t.Fatalf("CodeOf(StorageError(%v)) = %s, want %s", tc.err, c, tc.want)
			}
			if tc.err != nil && !errors.Is(got, tc.err) {
				t.Fatalf("%v no longer wraps %v", got, tc.err)
			}
		})
	}
}

// TestCodeOfUnclassifiedSystemErrors: a full or read-only disk a write
// path did not pass through StorageError (the markdown provider's vector
// writes, from an outside review) still answers its own code, not
// internal.
func TestCodeOfUnclassifiedSystemErrors(t *testing.T) {
	for errno, want := range map[syscall.Errno]Code{syscall.ENOSPC: CodeStorageFull, syscall.EDQUOT: CodeStorageFull, syscall.EROFS: CodeReadOnly, syscall.EACCES: CodeInternal} {
		err := fmt.Errorf("markdown: put vectors: %w", &fs.PathError{Op: "write", Path: "/data/x", Err: errno})
		if got := CodeOf(err); got != want {
			t.Errorf("CodeOf(%v) = %s, want %s", err, got, want)
		}
	}
}

// TestFileStorageErrorClassifiesPermissions: a provider's own file or
// directory its user may not write is read_only, as the markdown, sqlite
// and bleve providers answer it; the rest is StorageError's.
func TestFileStorageErrorClassifiesPermissions(t *testing.T) {
	pathErr := func(errno syscall.Errno) error {
		return fmt.Errorf("write note: %w", &fs.PathError{Op: "write", Path: "/data/x", Err: errno})
	}
	for _, tc := range []struct {
		name string
		err  error
		want Code
	}{
		{"eacces", pathErr(syscall.EACCES), CodeReadOnly},
		{"eperm", pathErr(syscall.EPERM), CodeReadOnly},
		{"erofs", pathErr(syscall.EROFS), CodeReadOnly},
		{"enospc", pathErr(syscall.ENOSPC), CodeStorageFull},
		{"the provider's own refusal", fmt.Errorf("not a plain directory: %w", ErrPermission), CodePermissionDenied},
		{"another failure", pathErr(syscall.EIO), CodeInternal},
		{"nil", nil, CodeOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := FileStorageError(tc.err)
			if c := CodeOf(got); c != tc.want {
				t.Fatalf("CodeOf(FileStorageError(%v)) = %s, want %s", tc.err, c, tc.want)
			}
			if tc.err != nil && !errors.Is(got, tc.err) {
				t.Fatalf("%v no longer wraps %v", got, tc.err)
			}
		})
	}
}
