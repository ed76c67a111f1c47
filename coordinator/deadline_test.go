package coordinator

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

var errNoDeadline = errors.New("a store call without a deadline")

// hangingStore is a memory store that refuses a spent context, and any
// visit without a deadline at once (so a missing one fails the test rather than hanging
// it) and, while hang is set, holds each visit until its context ends, as
// a PostgreSQL store behind a dead connection does.
type hangingStore struct {
	inner *MemoryStore
	hang  atomic.Bool

	mu      sync.Mutex
	undated int     // visits that came without a deadline
	hung    []error // what each held visit answered
}

func newHangingStore() *hangingStore { return &hangingStore{inner: NewMemoryStore(100)} }

func (s *hangingStore) Update(ctx context.Context, key SessionKey, fn func(*SessionState) bool) error {
	if _, ok := ctx.Deadline(); !ok {
		s.mu.Lock()
		s.undated++
		s.mu.Unlock()
		return errNoDeadline
	}
	if s.hang.Load() {
		<-ctx.Done()
		s.mu.Lock()
		s.hung = append(s.hung, ctx.Err())
		s.mu.Unlock()
		return ctx.Err()
	}
	if err := ctx.Err(); err != nil {
		return err // as a database refuses a spent context
	}
	return s.inner.Update(ctx, key, fn)
}

func (s *hangingStore) report() (undated int, hung []error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.undated, slices.Clone(s.hung)
}

// A hung session store fails each call that visits it with a deadline
// error once the store timeout passes, though the caller's context has no
// deadline at all.
func TestHungSessionStoreFailsCallsWithADeadlineError(t *testing.T) {
	cases := []struct {
		name string
		call func(c *Coordinator) error
	}{
		{"turn", func(c *Coordinator) error {
			_, err := c.InjectForTurn(context.Background(), alice, "s", TextContent("coffee"))
			return err
		}},
		{"compaction", func(c *Coordinator) error {
			return c.OnSessionCompacted(context.Background(), alice, "s")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := newHangingStore()
			f := newFixture(t, func(_ *Config, o *Options) { o.Sessions, o.StoreTimeout = store, 20*time.Millisecond })
			f.add(rec("Coffee", "flat white"))
			store.hang.Store(true)
			err := tc.call(f.c)
			if !errors.Is(err, context.DeadlineExceeded) || sdk.CodeOf(err) != sdk.CodeDeadlineExceeded {
				t.Fatalf("%s over a hung store: %v, want a deadline error", tc.name, err)
			}
			if !strings.Contains(err.Error(), "session store") {
				t.Errorf("the error %q does not say the session store failed", err)
			}
			undated, hung := store.report()
			if undated != 0 || len(hung) != 1 || !errors.Is(hung[0], context.DeadlineExceeded) {
				t.Fatalf("store saw %d visits without a deadline and held %v; want one visit ended by its deadline", undated, hung)
			}
		})
	}
}

// A background sweep whose store write hangs gives up at the store
// timeout, even after the sweep's own time ran out, so Close is not held
// by a dead store. In a bubble (testing/synctest), where time passes only
// while every goroutine waits: the store timeout (20 ms) ends the hung
// write, never a visit of the turn before it that a loaded machine was
// slow to make.
func TestSweepWriteToAHungStoreEndsAtItsDeadline(t *testing.T) {
	synctest.Test(t, testSweepWriteToAHungStoreEndsAtItsDeadline)
}

func testSweepWriteToAHungStoreEndsAtItsDeadline(t *testing.T) {
	store := newHangingStore()
	turned := make(chan struct{})
	turnDone := sync.OnceFunc(func() { close(turned) })
	t.Cleanup(turnDone) // a failed turn must not leave the sweep waiting
	sel := &recordingSelector{pick: func(req sdk.SelectRequest) (sdk.Selection, error) {
		if len(req.Rows) > 2 { // the sweep's full manifest: the store dies once the turn is done
			<-turned
			store.hang.Store(true)
			return sdk.Selection{IDs: []string{req.Rows[len(req.Rows)-1].ID}}, nil
		}
		return sdk.Selection{IDs: []string{req.Rows[0].ID}, Coverage: sdk.CoverageNeedDeeperSweep}, nil
	}}
	f := newFixture(t, func(c *Config, o *Options) {
		o.Selector, o.Sessions, o.StoreTimeout = sel, store, 20*time.Millisecond
		c.Budgets.SelectorRows = 2
	})
	for i := range 4 {
		f.add(rec(fmt.Sprintf("Item %d", i), "body")) // titles the query does not match: recall adds no rows
	}
	if res := f.turn(alice, "s", "notes"); res.SkipReason != SkipNone {
		t.Fatalf("the turn before the store hung injected nothing: %s", res.SkipReason)
	}
	turnDone()
	f.c.sweeps.Wait()
	if len(sel.requests()) != 2 {
		t.Fatalf("%d selector calls, want the turn's and the sweep's", len(sel.requests()))
	}
	undated, hung := store.report()
	if undated != 0 || len(hung) != 1 || !errors.Is(hung[0], context.DeadlineExceeded) {
		t.Fatalf("store saw %d visits without a deadline and held %v; want the sweep's write ended by its deadline", undated, hung)
	}
	if !strings.Contains(f.logs.String(), "background sweep: session store") {
		t.Fatalf("the failed write was not logged:\n%s", f.logs.String())
	}
}

// A sweep that runs out of its own time after a page keeps that page's
// picks, and its write of them is not refused for the sweep's spent
// deadline: the next turn of the session injects them. In a bubble
// (testing/synctest): the sweep's time runs out while the second page
// waits, never before a loaded machine has answered the first.
func TestSweepOutOfTimeStillStoresItsPicks(t *testing.T) {
	synctest.Test(t, testSweepOutOfTimeStillStoresItsPicks)
}

func testSweepOutOfTimeStillStoresItsPicks(t *testing.T) {
	var calls atomic.Int32
	var picked atomic.Value
	sel := coordinatortest.SelectorFunc(func(ctx context.Context, req sdk.SelectRequest) (sdk.Selection, error) {
		switch calls.Add(1) {
		case 1: // the turn: the newest row, and a sweep
			return sdk.Selection{IDs: []string{req.Rows[0].ID}, Coverage: sdk.CoverageNeedDeeperSweep}, nil
		case 2: // the sweep's first page
			id := req.Rows[len(req.Rows)-1].ID
			picked.Store(id)
			return sdk.Selection{IDs: []string{id}}, nil
		case 3: // the second page waits out the sweep's deadline
			<-ctx.Done()
			return sdk.Selection{}, ctx.Err()
		}
		return sdk.Selection{}, nil
	})
	f := newFixture(t, func(c *Config, o *Options) {
		o.Selector, o.Sessions = sel, newHangingStore()
		c.Budgets.SelectorRows = 2
		c.Sweep.PageRows = 2
		// The second page waits all of it out.
		c.SweepTimeout = time.Second
	})
	for i := range 4 {
		r := rec(fmt.Sprintf("Note %d", i), "body")
		r.UpdatedAt = testNow.Add(-time.Duration(i) * time.Hour)
		f.add(r)
	}
	first := f.turn(alice, "s", "notes")
	f.c.sweeps.Wait()
	id, _ := picked.Load().(string)
	if id == "" || slices.Contains(first.RecordIDs, id) {
		t.Fatalf("the sweep's first page picked %q; the turn injected %v", id, first.RecordIDs)
	}
	if !strings.Contains(f.logs.String(), "ran out of time") {
		t.Fatalf("the sweep did not run out of time:\n%s", f.logs.String())
	}
	// Stored for the next turn, read from the store itself: the next turn's
	// lexical fallback alone could inject the pick too.
	var stored []string
	readCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.c.store.Update(readCtx, SessionKey{Realm: alice.Realm, Identity: alice.ID, Session: "s"}, func(s *SessionState) bool {
		stored = slices.Clone(s.SweepIDs)
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(stored, id) {
		t.Fatalf("the session holds sweep picks %v, not the sweep's pick %s:\n%s", stored, id, f.logs.String())
	}
	if next := f.turn(alice, "s", "notes"); !slices.Contains(next.RecordIDs, id) {
		t.Fatalf("the next turn injected %v, not the sweep's pick %s:\n%s", next.RecordIDs, id, f.logs.String())
	}
}
