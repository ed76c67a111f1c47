package host

import (
	"context"
	"io"
	"slices"
	"testing"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk/internal/wire"
	"google.golang.org/grpc/metadata"
)

// A call made under a request's logger sends the request's id to the
// plugin; one made without sends none.
func TestCallsSendTheRequestID(t *testing.T) {
	base := hclog.New(&hclog.LoggerOptions{Output: io.Discard})
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want []string
	}{
		{"request logger", hclog.WithContext(context.Background(), base.With("realm", "r", "request_id", "req-9")), []string{"req-9"}},
		{"logger without an id", hclog.WithContext(context.Background(), base.With("realm", "r")), nil},
		{"no logger", context.Background(), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md, _ := metadata.FromOutgoingContext(withRequestID(tc.ctx))
			if got := md.Get(wire.MetadataRequestID); !slices.Equal(got, tc.want) {
				t.Fatalf("metadata %s = %q, want %q", wire.MetadataRequestID, got, tc.want)
			}
		})
	}
}
