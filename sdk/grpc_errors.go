package sdk

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// remoteError is an error that crossed the plugin boundary: it keeps the
// plugin's message and unwraps to the sentinel its status code stands for.
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

var codeSentinels = []struct {
	code     codes.Code
	sentinel error
}{
	{codes.InvalidArgument, ErrInvalid},
	{codes.NotFound, ErrNotFound},
	{codes.AlreadyExists, ErrConflict},
	{codes.OutOfRange, ErrTooLarge},
	{codes.Unimplemented, ErrUnsupported},
	{codes.Unavailable, ErrUnavailable},
	{codes.DeadlineExceeded, ErrDeadline},
	{codes.PermissionDenied, ErrPermission},
	// gRPC answers ResourceExhausted for a message over MaxMessageBytes.
	// Listed after OutOfRange, so ErrTooLarge still goes out as OutOfRange.
	{codes.ResourceExhausted, ErrTooLarge},
}

// toStatus turns a plugin-side error into a gRPC status the host maps back.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return err
	}
	code := codes.Unknown
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	default:
		for _, cs := range codeSentinels {
			if errors.Is(err, cs.sentinel) {
				code = cs.code
				break
			}
		}
	}
	return status.Error(code, err.Error())
}

// fromStatus turns a gRPC error answered by a plugin into an sdk error.
// Transport failures (the plugin died or is unreachable) become
// ErrUnavailable so callers can retry after a restart.
func fromStatus(err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	for _, cs := range codeSentinels {
		if st.Code() == cs.code {
			return &remoteError{msg: st.Message(), sentinel: cs.sentinel}
		}
	}
	if st.Code() == codes.Canceled {
		return &remoteError{msg: st.Message(), sentinel: context.Canceled}
	}
	return &remoteError{msg: st.Message(), sentinel: nil}
}
