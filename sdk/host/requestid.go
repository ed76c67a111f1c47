package host

import (
	"context"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// The host's request logger travels in the call's context
// (hclog.WithContext) with the request's id among its implied arguments;
// these interceptors send that id along, so the plugin's lines for the
// call carry it too.

func requestIDUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(withRequestID(ctx), method, req, reply, cc, opts...)
}

func requestIDStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(withRequestID(ctx), desc, cc, method, opts...)
}

func withRequestID(ctx context.Context) context.Context {
	args := hclog.FromContext(ctx).ImpliedArgs()
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == "request_id" {
			if id, ok := args[i+1].(string); ok && id != "" {
				return metadata.AppendToOutgoingContext(ctx, wire.MetadataRequestID, id)
			}
		}
	}
	return ctx
}
