package compaction

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/sdk"
)

// gatedResetter resets through the session gate, as the coordinator does
// through its store, and fails while down is set.
type gatedResetter struct {
	mu     sync.Mutex
	gate   *SessionGate
	down   bool
	resets []string
}

func (r *gatedResetter) OnSessionCompacted(ctx context.Context, id sdk.Identity, session string) error {
	r.mu.Lock()
	down := r.down
	r.mu.Unlock()
	if down {
		return fmt.Errorf("session store: row locked: %w", sdk.ErrDeadline)
	}
	key := coordinator.SessionKey{Realm: id.Realm, Identity: id.ID, Session: session}
	return r.gate.Update(ctx, key, func(st *coordinator.SessionState) bool {
		r.mu.Lock()
		r.resets = append(r.resets, id.ID+"/"+session)
		r.mu.Unlock()
		st.InjectedBytes, st.InjectedIDs = 0, nil
		return true
	})
}

func (r *gatedResetter) setDown(v bool) { r.mu.Lock(); r.down = v; r.mu.Unlock() }

func (r *gatedResetter) count() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.resets) }

// pendingHost is one host's compaction service in front of a session
// store, as serve wires them.
type pendingHost struct {
	svc   *Service
	r     *gatedResetter
	store Store
}

func newPendingHost(t *testing.T, store Store, down bool) *pendingHost {
	t.Helper()
	r := &gatedResetter{down: down}
	r.gate = NewSessionGate(coordinator.NewMemoryStore(100))
	svc := New(Options{Compactor: &fakeCompactor{}, Store: store, Resetter: r})
	if err := r.gate.Bind(context.Background(), svc); err != nil {
		t.Fatal(err)
	}
	return &pendingHost{svc: svc, r: r, store: store}
}

// turn visits alice's session s1 as a turn does.
func (h *pendingHost) turn() error {
	return h.r.gate.Update(context.Background(), coordinator.SessionKey{Realm: "default", Identity: "alice", Session: "s1"},
		func(*coordinator.SessionState) bool { return false })
}

func (h *pendingHost) pending(t *testing.T) PendingReset {
	t.Helper()
	st, _, err := h.store.Load(context.Background(), Key{"default", "alice", "c1"})
	if err != nil {
		t.Fatal(err)
	}
	return st.Pending
}

// TestFailedResetIsNeverASuccess: a compaction whose session reset fails
// answers an error, and the reset it owes is recorded with the summary
// and completed by whichever comes first: a retry of the compaction, the
// session's next turn, or either of them on a restarted host.
func TestFailedResetIsNeverASuccess(t *testing.T) {
	ctx := context.Background()
	stores := map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemoryStore() },
		"sqlite": func(t *testing.T) Store {
			s, err := NewSQLStore(ctx, openDB(t, filepath.Join(t.TempDir(), "state.db")))
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			want := PendingReset{Identity: "alice", Session: "s1"}
			failed := func(t *testing.T) *pendingHost {
				h := newPendingHost(t, open(t), true)
				_, err := h.svc.Compact(ctx, req("a", "b"))
				if !errors.Is(err, sdk.ErrDeadline) {
					t.Fatalf("compaction with a failing reset answered %v, want the reset's error", err)
				}
				if got := h.pending(t); got != want {
					t.Fatalf("pending reset %+v, want %+v", got, want)
				}
				if err := h.turn(); !errors.Is(err, sdk.ErrDeadline) {
					t.Fatalf("a turn while the reset still fails answered %v, want its error", err)
				}
				h.r.setDown(false)
				return h
			}
			t.Run("the retry completes it", func(t *testing.T) {
				h := failed(t)
				res, err := h.svc.Compact(ctx, req("a", "b"))
				if err != nil || res.Absorbed != 2 || h.r.count() != 1 {
					t.Fatalf("retry: %+v %v with %d resets, want the summary and one reset", res, err, h.r.count())
				}
				if got := h.pending(t); !got.IsZero() {
					t.Errorf("still pending after the retry: %+v", got)
				}
				if err := h.turn(); err != nil || h.r.count() != 1 {
					t.Errorf("the next turn: %v with %d resets, want no second reset", err, h.r.count())
				}
			})
			t.Run("the next turn completes it", func(t *testing.T) {
				h := failed(t)
				if err := h.turn(); err != nil || h.r.count() != 1 {
					t.Fatalf("turn: %v with %d resets, want one", err, h.r.count())
				}
				if got := h.pending(t); !got.IsZero() {
					t.Errorf("still pending after the turn: %+v", got)
				}
				if _, err := h.svc.Compact(ctx, req("a", "b")); err != nil || h.r.count() != 1 {
					t.Errorf("retry after the turn: %v with %d resets, want no second reset", err, h.r.count())
				}
			})
			t.Run("after a restart", func(t *testing.T) {
				h := failed(t)
				restarted := newPendingHost(t, h.store, false)
				if err := restarted.turn(); err != nil || restarted.r.count() != 1 {
					t.Fatalf("turn on the restarted host: %v with %d resets, want one", err, restarted.r.count())
				}
				if got := restarted.pending(t); !got.IsZero() {
					t.Errorf("still pending: %+v", got)
				}
			})
		})
	}
}

// TestSQLStoreAddsPendingColumns: a state database made before pending
// resets gains their columns, and its summaries load as they were.
func TestSQLStoreAddsPendingColumns(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "state.db"))
	for _, stmt := range []string{
		`CREATE TABLE compaction_state (realm TEXT NOT NULL, conversation TEXT NOT NULL, watermark INTEGER NOT NULL,
			prefix_hash TEXT NOT NULL, artifact_role TEXT NOT NULL, artifact_content TEXT NOT NULL, updated_at_ms INTEGER NOT NULL,
			PRIMARY KEY (realm, conversation))`,
		`INSERT INTO compaction_state VALUES ('default', 'c1', 2, 'h', 'user', 'old summary', 1)`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // and a second start finds the columns there
		store, err := NewSQLStore(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		st, found, err := store.Load(ctx, Key{"default", "", "c1"})
		if err != nil || !found || st.Artifact.Content != "old summary" || !st.Pending.IsZero() {
			t.Fatalf("old summary after the upgrade: %+v %v %v", st, found, err)
		}
	}
}

// TestSessionOwedResetsByTwoConversations: two conversations compacted in
// one session while its resets fail each owe it one; the session's next
// turn completes both, on this host and on a restarted one, so neither is
// left for a compaction of its conversation that may never come.
func TestSessionOwedResetsByTwoConversations(t *testing.T) {
	ctx := context.Background()
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			store, err := NewSQLStore(ctx, openDB(t, filepath.Join(t.TempDir(), "state.db")))
			if err != nil {
				t.Fatal(err)
			}
			h := newPendingHost(t, store, true)
			for _, conv := range []string{"c1", "c2"} {
				r := req("a", "b")
				r.Conversation = conv
				if _, err := h.svc.Compact(ctx, r); !errors.Is(err, sdk.ErrDeadline) {
					t.Fatalf("compaction of %s with a failing reset answered %v, want the reset's error", conv, err)
				}
			}
			if restart {
				h = newPendingHost(t, store, false)
			} else {
				h.r.setDown(false)
			}
			if err := h.turn(); err != nil || h.r.count() != 2 {
				t.Fatalf("turn: %v with %d resets, want both owed resets made", err, h.r.count())
			}
			for _, conv := range []string{"c1", "c2"} {
				st, _, err := store.Load(ctx, Key{"default", "alice", conv})
				if err != nil || !st.Pending.IsZero() {
					t.Errorf("%s after the turn: pending %+v (%v), want none", conv, st.Pending, err)
				}
			}
			if err := h.turn(); err != nil || h.r.count() != 2 {
				t.Errorf("a second turn: %v with %d resets, want no more", err, h.r.count())
			}
		})
	}
}
