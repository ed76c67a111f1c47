package compaction

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// losingHolder is a shared store whose hold the test takes away: lose
// ends the context its Hold answered, as a renewal that finds the hold
// taken by another host does.
type losingHolder struct {
	*MemoryStore
	lose context.CancelCauseFunc
}

func (h *losingHolder) Hold(ctx context.Context, _ Key) (context.Context, func(), error) {
	held, lose := context.WithCancelCause(ctx)
	h.lose = lose
	return held, func() { lose(context.Canceled) }, nil
}

// losingCompactor answers a summary, ignoring its context, after its
// hold was lost during the call (a compactor need not notice).
type losingCompactor struct{ h *losingHolder }

func (c losingCompactor) Compact(_ context.Context, r sdk.CompactRequest) (sdk.Message, error) {
	c.h.lose(ErrHoldLost)
	return sdk.Message{Role: "user", Content: "summary of " + r.Evicted[0].Content}, nil
}

// A compaction whose hold is lost while its compactor runs archives and
// saves nothing, and says why, whether or not the compactor noticed.
func TestACompactionThatLostItsHoldStops(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		archive bool
	}{
		{"with an archive", true},
		{"without an archive", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &losingHolder{MemoryStore: NewMemoryStore()}
			p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
			opts := Options{Store: h, Compactor: losingCompactor{h}}
			var s *Service
			if tc.archive {
				s = archived(p, ArchivePolicy{Enabled: true}, opts)
			} else {
				s = New(opts)
			}
			_, err := s.Compact(ctx, Request{Identity: alice, Conversation: "c1", Evicted: msgs("one", "two")})
			if !errors.Is(err, sdk.ErrConflict) || !strings.Contains(err.Error(), "hold lapsed") || !strings.Contains(err.Error(), "nothing was absorbed") {
				t.Errorf("the compaction that lost its hold = %v, want a conflict saying so", err)
			}
			if got, _ := p.Get(ctx, "default", episodeIDs(alice, "c1", 0, 2)); len(got) != 0 {
				t.Errorf("the compaction that lost its hold archived %d episodes", len(got))
			}
			if _, found, _ := h.Load(ctx, Key{Realm: "default", Identity: "alice", Conversation: "c1"}); found {
				t.Error("the compaction that lost its hold saved its state")
			}
		})
	}
}
