package host

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// gRPC answers Canceled both when the caller gave up and when the client
// connection closed under the call, which is what a killed plugin looks
// like to a call in flight. Only the first is the caller's cancellation;
// the second is ErrUnavailable, which the supervisor retries on the
// restarted process.
func TestCanceledIsTheCallersOnlyWhenItsContextEnded(t *testing.T) {
	closing := status.Error(codes.Canceled, "grpc: the client connection is closing")
	gaveUp, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"connection closed under a live call", context.Background(), sdk.ErrUnavailable},
		{"caller canceled", gaveUp, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := fromStatus(tc.ctx, closing)
			if !errors.Is(err, tc.want) {
				t.Fatalf("fromStatus = %v, want %v", err, tc.want)
			}
			if err.Error() != "the connection to the plugin closed" {
				t.Fatalf("message %q, want the closed connection in plain words", err)
			}
		})
	}
}

// A plugin's error text reaches the host's log and its callers: control
// characters in it (a line break that would forge a log line, a terminal
// escape sequence) arrive escaped, invalid UTF-8 too, and a huge message
// bounded, in the message and in a refused field's path and problem.
func TestPluginErrorTextIsEscaped(t *testing.T) {
	hostile := "bad\x1b]0;owned\x07\n[ERROR] forged \u2028" + strings.Repeat("x", 1<<20)
	// Details travel as protobuf, which holds valid UTF-8 only; the
	// message alone may carry any bytes.
	st, err := status.New(codes.InvalidArgument, hostile).WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "records[0]\n.title", Description: hostile}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		fromStatus(context.Background(), status.Error(codes.Unavailable, "\xff"+hostile)),
		fromStatus(context.Background(), st.Err()),
	} {
		var fe *sdk.FieldError
		texts := []string{err.Error()}
		if errors.As(err, &fe) {
			texts = append(texts, fe.Field, fe.Problem)
		}
		for _, s := range texts {
			if !utf8.ValidString(s) || strings.ContainsFunc(s, breaksLine) || len(s) > 2*maxValueBytes {
				t.Errorf("plugin text passed on unescaped or unbounded: %.100q (%d bytes)", s, len(s))
			}
		}
		if !strings.Contains(err.Error(), `bad\x1b]0;owned\a\n[ERROR] forged \u2028xxx`) {
			t.Errorf("message %.80q lost the plugin's words", err)
		}
	}
}

// gRPC's own words for a connection that failed or closed reach callers
// in plain words, without its transport's names or the socket's path; a
// plugin's own unavailable text is kept.
func TestTransportFailuresInPlainWords(t *testing.T) {
	for _, tc := range []struct {
		name string
		code codes.Code
		msg  string
		want string
	}{
		{"dial refused", codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial unix /tmp/plugin123: connect: connection refused"`, "cannot connect to the plugin: connection refused"},
		{"dial over tcp", codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 10.0.0.9:7000: i/o timeout"`, "cannot connect to the plugin: i/o timeout"},
		{"dial of one clause", codes.Unavailable, `connection error: desc = "transport: Error while dialing: refused"`, "cannot connect to the plugin: refused"},
		{"handshake", codes.Unavailable, `connection error: desc = "transport: authentication handshake failed: tls: bad certificate"`, "the connection to the plugin failed: authentication handshake failed: tls: bad certificate"},
		{"closed under a call", codes.Unavailable, "error reading from server: EOF", "the connection to the plugin closed"},
		{"transport closing", codes.Unavailable, "transport is closing", "the connection to the plugin closed"},
		{"client closing", codes.Canceled, "grpc: the client connection is closing", "the connection to the plugin closed"},
		{"the plugin's own words", codes.Unavailable, "database is down", "database is down"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := fromStatus(context.Background(), status.Error(tc.code, tc.msg))
			if !errors.Is(err, sdk.ErrUnavailable) || err.Error() != tc.want {
				t.Fatalf("fromStatus = %q (unavailable: %v), want %q", err, errors.Is(err, sdk.ErrUnavailable), tc.want)
			}
		})
	}
}
