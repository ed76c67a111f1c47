package sdk

import (
	"context"
	"log/slog"

	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// The host sends the id of the request a call serves in the call's
// metadata. The server keeps it in the call's context, and Logger's
// handler adds it to every line logged with that context (InfoContext and
// the like), so the host's log shows a request's lines from both sides.

type requestIDKey struct{}

// maxRequestIDBytes bounds what a line repeats from the metadata.
const maxRequestIDBytes = 128

func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

func withIncomingRequestID(ctx context.Context) context.Context {
	ids := metadata.ValueFromIncomingContext(ctx, wire.MetadataRequestID)
	if len(ids) == 0 || ids[0] == "" || len(ids[0]) > maxRequestIDBytes {
		return ctx
	}
	return context.WithValue(ctx, requestIDKey{}, ids[0])
}

func requestIDUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	return handler(withIncomingRequestID(ctx), req)
}

func requestIDStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &requestIDServerStream{ServerStream: ss, ctx: withIncomingRequestID(ss.Context())})
}

type requestIDServerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *requestIDServerStream) Context() context.Context { return s.ctx }

// requestIDHandler adds the call's request id to each record logged with
// the call's context.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := requestIDFrom(ctx); id != "" {
		r = r.Clone()
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(attrs)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
