package sdk

import (
	"context"
	"errors"
	"syscall"
)

// Sentinel errors callers branch on. They cross the plugin boundary intact:
// the gRPC glue maps each to a status code and back, so errors.Is works on
// the host side exactly as it does inside the plugin.
var (
	ErrInvalid     = errors.New("invalid argument")
	ErrNotFound    = errors.New("not found")
	ErrConflict    = errors.New("conflict")
	ErrTooLarge    = errors.New("too large")
	ErrUnsupported = errors.New("not supported by this plugin")
	ErrUnavailable = errors.New("plugin unavailable")
	ErrDeadline    = errors.New("deadline exceeded")
	ErrPermission  = errors.New("permission denied")
)

// Code is a stable, machine-readable error code, used at the API edge.
type Code string

const (
	CodeOK               Code = "ok"
	CodeInvalidArgument  Code = "invalid_argument"
	CodeNotFound         Code = "not_found"
	CodeConflict         Code = "conflict"
	CodeTooLarge         Code = "too_large"
	CodeUnsupported      Code = "unsupported"
	CodeUnavailable      Code = "unavailable"
	CodeDeadlineExceeded Code = "deadline_exceeded"
	CodePermissionDenied Code = "permission_denied"
	CodeInternal         Code = "internal"
)

// CodeOf classifies err by the sentinel it wraps.
func CodeOf(err error) Code {
	switch {
	case err == nil:
		return CodeOK
	case errors.Is(err, ErrTooLarge):
		return CodeTooLarge
	case errors.Is(err, ErrInvalid):
		return CodeInvalidArgument
	case errors.Is(err, ErrNotFound):
		return CodeNotFound
	case errors.Is(err, ErrConflict):
		return CodeConflict
	case errors.Is(err, ErrUnsupported):
		return CodeUnsupported
	case errors.Is(err, ErrDeadline), errors.Is(err, context.DeadlineExceeded):
		return CodeDeadlineExceeded
	case errors.Is(err, ErrUnavailable), errors.Is(err, context.Canceled):
		return CodeUnavailable
	case errors.Is(err, ErrPermission):
		return CodePermissionDenied
	case errors.Is(err, ErrNoSpace):
		return CodeStorageFull
	case errors.Is(err, ErrReadOnly):
		return CodeReadOnly
	// A system error no write path classified (StorageError) is still
	// the operator's full or read-only disk, not an internal error.
	case noSpace(err):
		return CodeStorageFull
	case errors.Is(err, syscall.EROFS):
		return CodeReadOnly
	default:
		return CodeInternal
	}
}

// FieldError reports a bad record or request field. It wraps ErrInvalid or
// ErrTooLarge so callers can branch on the class of problem.
type FieldError struct {
	Field   string
	Problem string
	Err     error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }
func (e *FieldError) Unwrap() error { return e.Err }

func invalid(field, problem string) error {
	return &FieldError{Field: field, Problem: problem, Err: ErrInvalid}
}

func tooLarge(field, problem string) error {
	return &FieldError{Field: field, Problem: problem, Err: ErrTooLarge}
}
