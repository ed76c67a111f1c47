package host

import (
	"context"
	"fmt"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// utf8Interceptor turns a request that protobuf refuses to marshal because
// a string field is not valid UTF-8 into the bad input it is: without it,
// gRPC reports an internal error and the caller cannot tell its own
// mistake from a broken plugin. It costs nothing on calls that succeed.
func utf8Interceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	if status.Code(err) != codes.Internal {
		return err
	}
	if m, ok := req.(proto.Message); ok {
		if field := invalidUTF8Field(m.ProtoReflect(), ""); field != "" {
			return status.Errorf(codes.InvalidArgument, "%s: is not valid UTF-8", field)
		}
	}
	if unencodable(err) {
		// The request was valid: the plugin could not encode its answer
		// (a record it holds is not valid UTF-8). The plugin's fault, so
		// it is named and logged as any answer out of the protocol is.
		return badAnswer(path.Base(method), "a string of the answer is not valid UTF-8")
	}
	return err
}

// unencodable reports whether err is gRPC's refusal to encode a message
// with a string that is not valid UTF-8.
func unencodable(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Internal && strings.Contains(st.Message(), "invalid UTF-8")
}

// invalidUTF8Field names the first string field of m, at any depth, that
// is not valid UTF-8 (like "records[2].title"), or answers "".
func invalidUTF8Field(m protoreflect.Message, prefix string) string {
	var bad string
	check := func(fd protoreflect.FieldDescriptor, v protoreflect.Value, name string) string {
		switch fd.Kind() {
		case protoreflect.StringKind:
			if !utf8.ValidString(v.String()) {
				return name
			}
		case protoreflect.MessageKind, protoreflect.GroupKind:
			return invalidUTF8Field(v.Message(), name+".")
		}
		return ""
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		name := prefix + string(fd.Name())
		switch {
		case fd.IsList():
			for i, l := 0, v.List(); i < l.Len() && bad == ""; i++ {
				bad = check(fd, l.Get(i), fmt.Sprintf("%s[%d]", name, i))
			}
		case fd.IsMap():
			v.Map().Range(func(k protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapKey().Kind() == protoreflect.StringKind && !utf8.ValidString(k.String()) {
					bad = name + " key"
				} else {
					bad = check(fd.MapValue(), mv, fmt.Sprintf("%s[%q]", name, k.String()))
				}
				return bad == ""
			})
		default:
			bad = check(fd, v, name)
		}
		return bad == ""
	})
	return bad
}

// grpcDialOptions are the host side's: wire's (message limit, windows),
// an oversized answer reported as the plugin's, bad UTF-8 reported as bad
// input, and the request id sent along.
func grpcDialOptions() []grpc.DialOption {
	return append(wire.DialOptions(),
		grpc.WithChainUnaryInterceptor(oversizeUnary, utf8Interceptor, requestIDUnary),
		grpc.WithChainStreamInterceptor(answerStream, requestIDStream),
	)
}
