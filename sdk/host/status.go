package host

import (
	"context"
	"errors"
	"strings"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// remoteError is an error that crossed the plugin boundary: it keeps the
// plugin's message and unwraps to the sentinel its status code stands for
// (through a *sdk.FieldError when the plugin named the refused field).
type remoteError struct {
	msg      string
	sentinel error
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }

// sentinels maps each stable code name to the sdk sentinel it stands for.
var sentinels = map[string]error{
	string(sdk.CodeTooLarge):         sdk.ErrTooLarge,
	string(sdk.CodeInvalidArgument):  sdk.ErrInvalid,
	string(sdk.CodeNotFound):         sdk.ErrNotFound,
	string(sdk.CodeConflict):         sdk.ErrConflict,
	string(sdk.CodeUnsupported):      sdk.ErrUnsupported,
	string(sdk.CodeUnavailable):      sdk.ErrUnavailable,
	string(sdk.CodeDeadlineExceeded): sdk.ErrDeadline,
	string(sdk.CodePermissionDenied): sdk.ErrPermission,
	string(sdk.CodeReadOnly):         sdk.ErrReadOnly,
}

// fromStatus turns a gRPC error answered by a plugin into an sdk error.
// The plugin's text (its message, a refused field's path and problem) is
// escaped and bounded as its log lines are (clean): it reaches the host's
// log and its callers.
// A google.rpc.BadRequest detail becomes a *sdk.FieldError naming the
// field. Transport failures (the plugin died or is unreachable) become
// ErrUnavailable so callers can retry after a restart. ctx is the call's
// own: gRPC answers Canceled both when the caller gave up and when the
// connection closed under the call (the plugin was killed), and only the
// first is the caller's cancellation.
func fromStatus(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	var sentinel error
	for _, c := range wire.Codes {
		if st.Code() == c.GRPC {
			sentinel = sentinels[c.Name]
			break
		}
	}
	if st.Code() == codes.Canceled {
		sentinel = context.Canceled
		if ctx.Err() == nil {
			sentinel = sdk.ErrUnavailable
		}
	}
	if st.Code() == codes.Unavailable || st.Code() == codes.Canceled {
		if words, ok := transportWords(st.Message()); ok {
			return &remoteError{msg: words, sentinel: sentinel}
		}
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && st.Code() == codes.ResourceExhausted && info.Domain == wire.ErrorDomain && info.Reason == wire.ReasonStorageFull {
			return &remoteError{msg: clean(st.Message()), sentinel: sdk.ErrNoSpace}
		}
	}
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && len(br.FieldViolations) > 0 && sentinel != nil {
			v := br.FieldViolations[0]
			// The plugin's whole message stays the message (it may add
			// context around the field); errors.As finds the field.
			return &remoteError{msg: clean(st.Message()), sentinel: &sdk.FieldError{Field: clean(v.Field), Problem: clean(v.Description), Err: sentinel}}
		}
	}
	return &remoteError{msg: clean(st.Message()), sentinel: sentinel}
}

// transportWords says in plain words a connection failure gRPC reported
// itself (not the plugin): its text names gRPC's transport ("connection
// error: desc = \"transport: Error while dialing: dial unix /tmp/…\"",
// "error reading from server: EOF") and may hold a host path. ok is false
// for any other text, which is the plugin's own.
func transportWords(msg string) (string, bool) {
	switch {
	case strings.HasPrefix(msg, "connection error: desc = "):
		inner := strings.Trim(strings.TrimPrefix(msg, "connection error: desc = "), `"`)
		inner = strings.TrimPrefix(inner, "transport: ")
		if dialing, ok := strings.CutPrefix(inner, "Error while dialing: "); ok {
			// "dial tcp ADDR: connect: connection refused": the cause is
			// the last clause; the address is the operator's, in the log.
			if i := strings.LastIndex(dialing, ": "); i >= 0 {
				dialing = dialing[i+2:]
			}
			return "cannot connect to the plugin: " + clean(dialing), true
		}
		return "the connection to the plugin failed: " + clean(inner), true
	case strings.HasPrefix(msg, "error reading from server: "), msg == "transport is closing", msg == "grpc: the client connection is closing":
		return "the connection to the plugin closed", true
	}
	return "", false
}

// withFieldPrefix puts a FieldError under a parent path ("config.path").
func withFieldPrefix(prefix string, err error) error {
	var fe *sdk.FieldError
	if errors.As(err, &fe) {
		field := prefix + "." + fe.Field
		// The field named once: the plugin's message names it already.
		msg := fe.Problem
		if msg == "" {
			msg = strings.TrimPrefix(err.Error(), fe.Field+": ")
		}
		return &remoteError{msg: field + ": " + msg, sentinel: &sdk.FieldError{Field: field, Problem: fe.Problem, Err: fe.Err}}
	}
	return err
}
