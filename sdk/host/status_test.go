package host

import (
	"context"
	"errors"
	"testing"

	"github.com/memhost/memhost/sdk"
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
			if err.Error() != "grpc: the client connection is closing" {
				t.Fatalf("message %q lost the plugin's text", err)
			}
		})
	}
}
