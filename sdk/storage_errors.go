package sdk

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// Storage sentinels: a write the store could not make because the disk (or
// quota) is full, or because the data directory is read-only. Both are the
// operator's to fix, not the caller's, and reads keep working, so they get
// their own codes rather than "internal".
var (
	ErrNoSpace  = errors.New("storage full")
	ErrReadOnly = errors.New("storage is read-only")
)

const (
	CodeStorageFull Code = "storage_full"
	CodeReadOnly    Code = "read_only"
)

// StorageError wraps err with ErrNoSpace or ErrReadOnly when the system
// error under it says so (ENOSPC, EDQUOT, EFBIG, EROFS), and returns err unchanged
// otherwise. Providers call it on write paths so a full disk reaches the
// caller as a stable code.
func StorageError(err error) error {
	switch {
	case err == nil, errors.Is(err, ErrNoSpace), errors.Is(err, ErrReadOnly):
		return err
	case noSpace(err):
		return fmt.Errorf("%w: %w", err, ErrNoSpace)
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w: %w", err, ErrReadOnly)
	}
	return err
}

// FileStorageError is StorageError for a provider writing files of its
// own data directory: a file or directory its user may not write (EACCES,
// EPERM: a mode, owner or immutable flag to fix) is, like a read-only
// mount, the operator's to fix while reads keep working, so it is
// ErrReadOnly too. The provider's own refusal (ErrPermission) is left as
// it is. StorageError leaves EACCES alone: a store whose permission
// errors mean something else classifies them itself.
func FileStorageError(err error) error {
	err = StorageError(err)
	if err == nil || errors.Is(err, ErrNoSpace) || errors.Is(err, ErrReadOnly) || errors.Is(err, ErrPermission) {
		return err
	}
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w: %w", err, ErrReadOnly)
	}
	return err
}

// noSpace reports a write refused for want of room: a full disk, a
// quota, or a file-size limit (RLIMIT_FSIZE, the file system's largest
// file), each the operator's to raise.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EFBIG)
}

// FileProblem is what a file system error says beyond its operation and
// path ("no space left on device"): a failed write is reported once, under
// the file it was for, not again under the temporary file it went through
// ("write …/r1.md: write …/.tmp-r1.md.123: no space left on device").
// errors.Is still reads it.
func FileProblem(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}
