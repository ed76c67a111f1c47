package sdk

import (
	"context"
	"errors"

	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// toStatus turns a plugin-side error into the gRPC status the host maps
// back: the code stands for the sentinel, and a FieldError travels as a
// google.rpc.BadRequest detail, so the host can name the refused field.
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
		name := string(CodeOf(err))
		for _, c := range wire.Codes {
			if c.Name == name {
				code = c.GRPC
				break
			}
		}
	}
	st := status.New(code, err.Error())
	if CodeOf(err) == CodeStorageFull {
		st = status.New(codes.ResourceExhausted, err.Error())
		if withInfo, derr := st.WithDetails(&errdetails.ErrorInfo{Reason: wire.ReasonStorageFull, Domain: wire.ErrorDomain}); derr == nil {
			st = withInfo
		}
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		detail := &errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: fe.Field, Description: fe.Problem}}}
		if withDetail, derr := st.WithDetails(detail); derr == nil {
			st = withDetail
		}
	}
	return st.Err()
}
