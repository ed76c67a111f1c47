package host

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/memhost/memhost/sdk"
	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"google.golang.org/grpc"
)

// scriptedStream answers the messages it holds, then io.EOF.
type scriptedStream struct {
	grpc.ClientStream
	msgs []*pb.ReindexResponse
}

func (s *scriptedStream) Recv() (*pb.ReindexResponse, error) {
	if len(s.msgs) == 0 {
		return nil, io.EOF
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

type scriptedProvider struct {
	pb.ProviderClient
	msgs []*pb.ReindexResponse
}

func (p *scriptedProvider) Reindex(context.Context, *pb.ReindexRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[pb.ReindexResponse], error) {
	return &scriptedStream{msgs: p.msgs}, nil
}

// TestReindexStreamEnds: the client takes the result however the stream
// gets there, skipping events it does not know, and calls a stream that
// ends without a result unavailable (the plugin died or broke off).
func TestReindexStreamEnds(t *testing.T) {
	progress := func(d, t int) *pb.ReindexResponse {
		return &pb.ReindexResponse{Event: &pb.ReindexResponse_Progress{Progress: &pb.ReindexProgress{Done: int64(d), Total: int64(t)}}}
	}
	done := &pb.ReindexResponse{Event: &pb.ReindexResponse_Done{Done: &pb.ReindexDone{Reindexed: 2}}}
	for _, tc := range []struct {
		name    string
		msgs    []*pb.ReindexResponse
		n       int
		err     error
		reports int
	}{
		{name: "result only", msgs: []*pb.ReindexResponse{done}, n: 2},
		{name: "an unknown event is skipped", msgs: []*pb.ReindexResponse{progress(1, 2), {}, progress(2, 2), done}, n: 2, reports: 2},
		{name: "no result", msgs: []*pb.ReindexResponse{progress(1, 2)}, err: sdk.ErrUnavailable, reports: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &providerClient{rpc: &scriptedProvider{msgs: tc.msgs}, caps: sdk.Capabilities{sdk.CapReindex}}
			reports := 0
			n, err := c.Reindex(t.Context(), "acme", func(int, int) { reports++ })
			if n != tc.n || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) || reports != tc.reports {
				t.Fatalf("Reindex = %d, %v with %d reports; want %d, %v with %d", n, err, reports, tc.n, tc.err, tc.reports)
			}
		})
	}
}
