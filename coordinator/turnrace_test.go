package coordinator

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// TestOverlappingTurnsOfOneSessionInjectEachRecordOnce holds two turns of
// one session inside Recall until both are there, so both read the
// session before either renders and the provider answers both the same
// records. Only the render, run inside the store visit against the state
// as it is then, can keep the second turn from repeating the first's
// records or overspending the session budget.
func TestOverlappingTurnsOfOneSessionInjectEachRecordOnce(t *testing.T) {
	const turnBytes, sessionBytes = 10 << 10, 15 << 10
	f := newFixture(t, func(c *Config, _ *Options) {
		c.Budgets.TurnBytes, c.Budgets.SessionBytes = turnBytes, sessionBytes
		// Generous: the barrier below must not race the recall deadline,
		// and a failure must surface rather than pass as a skip.
		c.RecallTimeout = time.Minute
		c.RecallFailurePolicy = FailureFail
	})
	body := strings.Repeat("latte art ", 200) // about 2 KiB rendered: four fit one turn
	var recs []sdk.Record
	for i := range 12 {
		recs = append(recs, rec(fmt.Sprintf("Coffee %d", i), body))
	}
	f.add(recs...)

	var arrived atomic.Int32
	both := make(chan struct{})
	f.p.SetHook(coordinatortest.MethodRecall, func(ctx context.Context, req any) error {
		if q := req.(sdk.RecallQuery); len(q.ExcludeIDs) != 0 {
			return fmt.Errorf("turn %d read a session that already had injections %v: the turns did not overlap", arrived.Load(), q.ExcludeIDs)
		}
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})

	var wg sync.WaitGroup
	res := make([]TurnInjection, 2)
	errs := make([]error, 2)
	for i := range res {
		wg.Go(func() {
			res[i], errs[i] = f.c.InjectForTurn(context.Background(), alice, "s", TextContent("coffee latte"))
		})
	}
	wg.Wait()
	if got := f.p.Calls(coordinatortest.MethodRecall); got != 2 {
		t.Fatalf("Recall called %d times, want 2", got)
	}
	seen := map[string]int{}
	spent := 0
	for i := range res {
		if errs[i] != nil {
			t.Fatalf("turn %d: %v", i, errs[i])
		}
		checkTurnShape(t, res[i])
		if res[i].SkipReason != SkipNone {
			t.Fatalf("turn %d injected nothing (%s); both had budget for some records", i, res[i].SkipReason)
		}
		spent += res[i].Bytes
		for _, id := range res[i].RecordIDs {
			seen[id]++
			if seen[id] > 1 {
				t.Errorf("record %s injected twice in one session: turns %v and %v", id, res[0].RecordIDs, res[1].RecordIDs)
			}
		}
	}
	if spent > sessionBytes {
		t.Errorf("the two turns injected %d bytes, over the session budget of %d", spent, sessionBytes)
	}
	// The store's account must match what was delivered.
	var state SessionState
	if err := f.c.store.Update(context.Background(), SessionKey{Realm: alice.Realm, Identity: alice.ID, Session: "s"}, func(s *SessionState) bool {
		state = s.Clone()
		return false
	}); err != nil {
		t.Fatal(err)
	}
	if state.InjectedBytes != spent || len(state.InjectedIDs) != len(seen) {
		t.Errorf("the session accounts %d bytes and %d ids; the turns delivered %d bytes and %d ids", state.InjectedBytes, len(state.InjectedIDs), spent, len(seen))
	}
}
