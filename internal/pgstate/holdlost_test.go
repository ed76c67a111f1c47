package pgstate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/sdk"
)

// stallingCompactor stands for a compaction that outlives its hold: its
// call waits until the test lets it go or its context ends, which it
// reports on ended.
type stallingCompactor struct {
	entered chan struct{}
	ended   chan struct{}
	gate    chan struct{}
}

func (s *stallingCompactor) Compact(ctx context.Context, req sdk.CompactRequest) (sdk.Message, error) {
	close(s.entered)
	select {
	case <-s.gate:
		return sdk.Message{Role: "system", Content: "summary of " + req.Evicted[0].Content}, nil
	case <-ctx.Done():
		close(s.ended)
		return sdk.Message{}, ctx.Err()
	}
}

// A compaction whose hold lapsed (its host stalled, or lost the database
// past the lease) while another host took the conversation: it used to
// carry on, archive its episodes (over another host's forget of the
// conversation) and, on a first compaction, save its state, as nothing
// told it the hold was gone (from an outside review). Now its renewal
// finds the hold taken, its context ends, and it writes nothing.
func TestACompactionThatLostItsHoldWritesNothing(t *testing.T) {
	holdLease = 400 * time.Millisecond
	t.Cleanup(func() { holdLease = 5 * time.Second })
	for _, tc := range []struct {
		name string
		// lose takes the hold from the compaction running on a, as
		// another host (b) would once it lapsed.
		lose func(ctx context.Context, a *DB, b *compaction.Service) error
	}{
		{"lapsed and the conversation forgotten on another host", func(ctx context.Context, a *DB, b *compaction.Service) error {
			if _, err := a.pool.Exec(ctx, a.q(`DELETE FROM compaction_holds`)); err != nil {
				return err
			}
			return b.Forget(ctx, "r", "c", compaction.Access{Identity: "carol"})
		}},
		{"taken by another host's compaction", func(ctx context.Context, a *DB, _ *compaction.Service) error {
			_, err := a.pool.Exec(ctx, a.q(`UPDATE compaction_holds SET holder = 'another host', until_ms = `+dbNowMillis+` + 60000`))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbs := open(t, 2)
			arch := &positionArchive{pos: map[int]string{}}
			comp := &stallingCompactor{entered: make(chan struct{}), ended: make(chan struct{}), gate: make(chan struct{})}
			a := compaction.New(compaction.Options{Compactor: comp, Store: NewCompaction(dbs[0]), Archive: arch})
			b := compaction.New(compaction.Options{Compactor: joinCompactor{}, Store: NewCompaction(dbs[1]), Archive: arch})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			compacted := make(chan error, 1)
			go func() {
				_, err := a.Compact(ctx, compaction.Request{Identity: sdk.Identity{Realm: "r", ID: "carol"}, Conversation: "c", Evicted: messages("one", "two")})
				compacted <- err
			}()
			<-comp.entered
			if err := tc.lose(ctx, dbs[0], b); err != nil {
				t.Fatal(err)
			}
			// The compactor's context ends at the next renewal; a
			// compaction that is not told goes on when the gate opens.
			select {
			case <-comp.ended:
			case <-time.After(10 * holdLease):
			}
			close(comp.gate)
			err := <-compacted
			if !errors.Is(err, sdk.ErrConflict) || !strings.Contains(err.Error(), "hold lapsed") || !strings.Contains(err.Error(), "nothing was absorbed") {
				t.Errorf("the compaction that lost its hold = %v, want a conflict saying its hold lapsed and nothing was absorbed", err)
			}
			arch.mu.Lock()
			defer arch.mu.Unlock()
			if len(arch.pos) != 0 {
				t.Errorf("the compaction that lost its hold archived %v", arch.pos)
			}
			if _, found, err := NewCompaction(dbs[1]).Load(ctx, compaction.Key{Realm: "r", Identity: "carol", Conversation: "c"}); err != nil || found {
				t.Errorf("the compaction that lost its hold saved a state: found %v, %v", found, err)
			}
		})
	}
}

// A hold whose row a renewal finds gone (it lapsed, and another host took
// and released it) or another holder's (another host holds it now) ends
// the context it answered, with a cause saying the hold was lost; a hold
// released keeps no such cause.
func TestALostHoldEndsItsContext(t *testing.T) {
	holdLease = 400 * time.Millisecond
	t.Cleanup(func() { holdLease = 5 * time.Second })
	db := open(t, 1)[0]
	for _, tc := range []struct {
		name string
		take string // what the other host does to the row, "" for nothing
		lost bool
	}{
		{"the row deleted", `DELETE FROM compaction_holds WHERE conversation = $1`, true},
		{"the row taken by another holder", `UPDATE compaction_holds SET holder = 'another host', until_ms = ` + dbNowMillis + ` + 60000 WHERE conversation = $1`, true},
		{"kept, then released", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			key := compaction.Key{Realm: "r", Identity: "carol", Conversation: tc.name}
			held, release, err := NewCompaction(db).Hold(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if tc.take == "" {
				release()
			} else {
				defer release()
				if _, err := db.pool.Exec(ctx, db.q(tc.take), key.Conversation); err != nil {
					t.Fatal(err)
				}
			}
			select {
			case <-held.Done():
			case <-ctx.Done():
				t.Fatal("the hold's context did not end")
			}
			if cause := context.Cause(held); errors.Is(cause, compaction.ErrHoldLost) != tc.lost {
				t.Errorf("the hold's context ended with %v, want lost %v", cause, tc.lost)
			}
		})
	}
}
