package host

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	pb "github.com/memhost/memhost/sdk/internal/pluginpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// rawStore is a provider answering raw gRPC as a plugin of either
// generation would. Built before occurred_at and since/until (old), it
// never reads them: a record's occurred_at is dropped and every recall
// answers what it holds, whatever the window. A current one refuses a
// window that holds no instant, as every SDK does.
type rawStore struct {
	pb.UnimplementedProviderServer
	old     bool
	mu      sync.Mutex
	records []*pb.Record
	recalls int
}

func (s *rawStore) keep(in *pb.RecordInput) string {
	now := time.Now().UnixMilli()
	r := &pb.Record{Id: "r" + strings.Repeat("0", len(s.records)+1), Realm: "a", Scope: in.Scope, Kind: in.Kind,
		Title: in.Title, Body: in.Body, Trust: "agent_observed", Status: "active", CreatedUnixMs: now, UpdatedUnixMs: now}
	if !s.old {
		r.OccurredUnixMs = in.OccurredUnixMs
	}
	s.records = append(s.records, r)
	return r.Id
}

func (s *rawStore) Recall(_ context.Context, req *pb.RecallRequest) (*pb.RecallResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recalls++
	if !s.old && req.SinceUnixMs != 0 && req.UntilUnixMs != 0 && req.SinceUnixMs >= req.UntilUnixMs {
		return nil, status.Error(codes.InvalidArgument, "until is not after since")
	}
	var hits []*pb.Hit
	for _, r := range s.records {
		t := r.OccurredUnixMs
		if t == 0 {
			t = r.CreatedUnixMs
		}
		if !s.old && (req.SinceUnixMs != 0 && t < req.SinceUnixMs || req.UntilUnixMs != 0 && t >= req.UntilUnixMs) {
			continue
		}
		hits = append(hits, &pb.Hit{Record: r, Score: 1})
	}
	return &pb.RecallResponse{Hits: hits}, nil
}

func (s *rawStore) Remember(_ context.Context, req *pb.RememberRequest) (*pb.RememberResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, in := range req.Records {
		ids = append(ids, s.keep(in))
	}
	return &pb.RememberResponse{Ids: ids}, nil
}

func (s *rawStore) Supersede(_ context.Context, req *pb.SupersedeRequest) (*pb.SupersedeResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &pb.SupersedeResponse{NewId: s.keep(req.Replacement)}, nil
}

func (s *rawStore) Import(_ context.Context, req *pb.ImportRequest) (*pb.ImportResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range req.Records {
		s.keep(&pb.RecordInput{Scope: r.Scope, Kind: r.Kind, Title: r.Title, Body: r.Body, OccurredUnixMs: r.OccurredUnixMs})
	}
	return &pb.ImportResponse{Imported: int32(len(req.Records))}, nil
}

// serveRaw serves s over gRPC on loopback and answers the host's client
// of it, declaring write, supersede and archive.
func serveRaw(t *testing.T, s *rawStore) *providerClient {
	t.Helper()
	srv := grpc.NewServer()
	pb.RegisterProviderServer(srv, s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &providerClient{rpc: pb.NewProviderClient(cc), caps: sdk.Capabilities{sdk.CapWrite, sdk.CapSupersede, sdk.CapArchive}}
}

// TestPluginBuiltBeforeTimeFields: a plugin built before occurred_at and
// since/until would drop them in silence (a record's occurred_at lost, a
// window applied to the wrong time or not at all). Every call carrying
// one fails on it as unsupported, naming the mismatch, before the plugin
// sees it; calls without them still work; a current plugin takes them
// all; and the plugin is asked once per process.
func TestPluginBuiltBeforeTimeFields(t *testing.T) {
	ctx := t.Context()
	long := time.Date(2020, 5, 2, 9, 0, 0, 0, time.UTC)
	dec := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	scope := sdk.IdentityScope("alice")
	record := func(occurred time.Time) sdk.Record {
		return sdk.Record{Scope: scope, Kind: sdk.KindFact, Title: "Hike", Body: "Alice hiked Mount Tam.", OccurredAt: occurred}
	}
	calls := []struct {
		name string
		time bool // carries a time field
		call func(p *providerClient) error
	}{
		{"remember without occurred_at", false, func(p *providerClient) error {
			_, err := p.Remember(ctx, "a", []sdk.Record{record(time.Time{})})
			return err
		}},
		{"recall without a window", false, func(p *providerClient) error {
			_, err := p.Recall(ctx, sdk.RecallQuery{Realm: "a", Query: "hike"})
			return err
		}},
		{"remember with occurred_at", true, func(p *providerClient) error {
			_, err := p.Remember(ctx, "a", []sdk.Record{record(time.Time{}), record(long)})
			return err
		}},
		{"supersede with occurred_at", true, func(p *providerClient) error {
			_, err := p.Supersede(ctx, "a", "r1", record(long))
			return err
		}},
		{"import with occurred_at", true, func(p *providerClient) error {
			r := record(long)
			r.ID, r.Realm, r.Status, r.Trust, r.CreatedAt, r.UpdatedAt = "r9", "a", sdk.StatusActive, sdk.TrustAgentObserved, dec, dec
			_, err := p.Import(ctx, "a", []sdk.Record{r})
			return err
		}},
		{"import of a threaded record", true, func(p *providerClient) error {
			r := record(time.Time{})
			r.ID, r.Realm, r.Status, r.Trust, r.CreatedAt, r.UpdatedAt = "r8", "a", sdk.StatusActive, sdk.TrustAgentObserved, dec, dec
			r.Thread = &sdk.Thread{ID: "chat", Seq: 3}
			_, err := p.Import(ctx, "a", []sdk.Record{r})
			return err
		}},
		{"recall since", true, func(p *providerClient) error {
			_, err := p.Recall(ctx, sdk.RecallQuery{Realm: "a", Query: "hike", Since: dec})
			return err
		}},
		{"recall until", true, func(p *providerClient) error {
			_, err := p.Recall(ctx, sdk.RecallQuery{Realm: "a", Query: "hike", Until: dec})
			return err
		}},
	}
	for _, old := range []bool{true, false} {
		s := &rawStore{old: old}
		p := serveRaw(t, s)
		for _, tc := range calls {
			err := tc.call(p)
			switch {
			case old && tc.time:
				if !errors.Is(err, sdk.ErrUnsupported) || !errors.Is(err, ErrOutdatedPlugin) {
					t.Errorf("old plugin, %s: err = %v, want unsupported naming the mismatch", tc.name, err)
				}
			case err != nil:
				t.Errorf("old %v, %s: %v", old, tc.name, err)
			}
		}
		s.mu.Lock()
		// Nothing carrying a time reached an old plugin's store.
		stored := 6
		if old {
			stored = 1
		}
		if len(s.records) != stored {
			t.Errorf("old %v: %d records stored, want %d", old, len(s.records), stored)
		}
		// One recall without a window, one probe, and for a current
		// plugin the two windowed recalls.
		recalls := 4
		if old {
			recalls = 2
		}
		if s.recalls != recalls {
			t.Errorf("old %v: %d recalls reached the plugin, want %d (one probe per process)", old, s.recalls, recalls)
		}
		s.mu.Unlock()
	}
}

// TestOutdatedPluginAskedAgain: a remote plugin upgraded in place answers
// on the connection the host already holds; once the verdict is older
// than reaskOutdated the host asks again and takes the time fields, where
// it refused them for good before.
func TestOutdatedPluginAskedAgain(t *testing.T) {
	ctx := t.Context()
	s := &rawStore{old: true}
	p := serveRaw(t, s)
	windowed := sdk.RecallQuery{Realm: "a", Query: "hike", Since: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	if _, err := p.Recall(ctx, windowed); !errors.Is(err, ErrOutdatedPlugin) {
		t.Fatalf("old plugin: %v, want it refused as outdated", err)
	}
	s.mu.Lock()
	s.old = false // upgraded in place
	s.mu.Unlock()
	if _, err := p.Recall(ctx, windowed); !errors.Is(err, ErrOutdatedPlugin) {
		t.Fatalf("within reaskOutdated of the verdict: %v, want it still refused without asking", err)
	}
	p.timeFieldsAt.Store(time.Now().Add(-reaskOutdated).UnixNano())
	if _, err := p.Recall(ctx, windowed); err != nil {
		t.Fatalf("upgraded plugin past reaskOutdated: %v, want the recall answered", err)
	}
}
