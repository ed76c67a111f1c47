package pgstate

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator"
)

// idKey parses "identity/session" into a key of realm r.
func idKey(v string) coordinator.SessionKey {
	id, s, _ := strings.Cut(v, "/")
	return coordinator.SessionKey{Realm: "r", Identity: id, Session: s}
}

func visitInject(t *testing.T, s *Sessions, k coordinator.SessionKey, n int) {
	t.Helper()
	if err := s.Update(context.Background(), k, func(st *coordinator.SessionState) bool {
		st.InjectedBytes += n
		st.InjectedIDs = append(st.InjectedIDs, k.Session)
		return true
	}); err != nil {
		t.Fatal(err)
	}
}

func stateOf(t *testing.T, s *Sessions, k coordinator.SessionKey) coordinator.SessionState {
	t.Helper()
	var got coordinator.SessionState
	if err := s.Update(context.Background(), k, func(st *coordinator.SessionState) bool { got = st.Clone(); return false }); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestSessionFloodEvictsTheFloodersOwn: with max_per_realm = 60, mallory
// opening 60 new sessions in alice's realm must not evict alice's session
// (whose budget and dedup set would start over, so records it already
// showed would be injected again); mallory loses its own oldest instead.
func TestSessionFloodEvictsTheFloodersOwn(t *testing.T) {
	s := NewSessions(open(t, 1)[0], SessionOptions{PerRealm: 60})
	alice := idKey("alice/s")
	visitInject(t, s, alice, 5000)
	for i := range 60 {
		visitInject(t, s, idKey(fmt.Sprint("mallory/", i)), 10)
	}
	if got := stateOf(t, s, alice); got.InjectedBytes != 5000 || len(got.InjectedIDs) != 1 {
		t.Fatalf("mallory's flood reset alice's session: %+v", got)
	}
	if got := stateOf(t, s, idKey("mallory/0")); !got.IsZero() {
		t.Fatalf("mallory's oldest session survived its own flood: %+v", got)
	}
	if n, err := s.Len(context.Background(), "r"); err != nil || n != 60 {
		t.Fatalf("the realm holds %d sessions (%v), bound 60", n, err)
	}
}

// TestSessionBoundEvictsPerIdentity checks the eviction order one new
// session at a time, and many at once under a lower bound (a host
// restarted with a smaller max_per_realm).
func TestSessionBoundEvictsPerIdentity(t *testing.T) {
	tests := []struct {
		name   string
		bound  int
		visits []string // identity/session, in order
		// lowered, when set, is the bound of the last visit.
		lowered int
		gone    []string
		kept    []string
	}{
		{name: "a lone identity gets the whole bound", bound: 3,
			visits: []string{"a/1", "a/2", "a/3", "a/4"}, gone: []string{"a/1"}, kept: []string{"a/2", "a/3", "a/4"}},
		{name: "the identity with the most sessions loses its oldest", bound: 3,
			visits: []string{"a/1", "b/1", "b/2", "a/1", "c/1"}, gone: []string{"b/1"}, kept: []string{"a/1", "b/2", "c/1"}},
		{name: "a tie goes to the least recently used", bound: 4,
			visits: []string{"a/1", "a/2", "b/1", "b/2", "a/1", "c/1"}, gone: []string{"a/2"}, kept: []string{"a/1", "b/1", "b/2", "c/1"}},
		{name: "the newcomer may be the flooder", bound: 3,
			visits: []string{"a/1", "b/1", "b/2", "b/3"}, gone: []string{"b/1"}, kept: []string{"a/1", "b/2", "b/3"}},
		{name: "a lowered bound evicts the same way at once", bound: 100, lowered: 5,
			visits: []string{"a/1", "a/2", "b/1", "b/2", "m/1", "m/2", "m/3", "m/4", "m/5", "m/6", "m/7"},
			gone:   []string{"m/1", "m/2", "m/3", "m/4", "m/5", "a/1"},
			kept:   []string{"a/2", "b/1", "b/2", "m/6", "m/7"}},
	}
	db := open(t, 1)[0]
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Each case in a realm of its own, so they share one database.
			realm := fmt.Sprint("case-", i)
			key := func(v string) coordinator.SessionKey { k := idKey(v); k.Realm = realm; return k }
			s := NewSessions(db, SessionOptions{PerRealm: tc.bound})
			for j, v := range tc.visits {
				if tc.lowered > 0 && j == len(tc.visits)-1 {
					s = NewSessions(db, SessionOptions{PerRealm: tc.lowered})
				}
				visitInject(t, s, key(v), 1)
			}
			for _, v := range tc.gone {
				if got := stateOf(t, s, key(v)); !got.IsZero() {
					t.Errorf("%s was kept", v)
				}
			}
			for _, v := range tc.kept {
				if got := stateOf(t, s, key(v)); got.IsZero() {
					t.Errorf("%s was evicted", v)
				}
			}
			if n, err := s.Len(context.Background(), realm); err != nil || n != len(tc.kept) {
				t.Errorf("the realm holds %d sessions (%v), want %d", n, err, len(tc.kept))
			}
		})
	}
}

// TestSessionBoundEvictsInSteps: a realm past a bound of 300 drops a
// hundredth of the bound more than it must (the flooder's oldest), so the
// next new sessions need no eviction; each eviction reads the realm.
func TestSessionBoundEvictsInSteps(t *testing.T) {
	s := NewSessions(open(t, 1)[0], SessionOptions{PerRealm: 300})
	ctx := context.Background()
	alice := idKey("alice/s")
	visitInject(t, s, alice, 5000)
	for i := range 300 {
		visitInject(t, s, idKey(fmt.Sprint("mallory/", i)), 10)
	}
	if n, err := s.Len(ctx, "r"); err != nil || n != 297 {
		t.Fatalf("past the bound the realm holds %d sessions (%v), want 297", n, err)
	}
	for i := range 4 {
		if got := stateOf(t, s, idKey(fmt.Sprint("mallory/", i))); !got.IsZero() {
			t.Errorf("mallory/%d, among the four oldest, was kept", i)
		}
	}
	for i := 300; i < 303; i++ {
		visitInject(t, s, idKey(fmt.Sprint("mallory/", i)), 10)
	}
	if n, err := s.Len(ctx, "r"); err != nil || n != 300 {
		t.Fatalf("three new sessions later the realm holds %d (%v), want 300", n, err)
	}
	if got := stateOf(t, s, alice); got.InjectedBytes != 5000 {
		t.Fatalf("the steps evicted alice's session: %+v", got)
	}
}

// TestSessionBoundAcrossHosts: two hosts writing new sessions in turn into
// one realm, each counting the realm only when its own view reaches the
// bound or every recountEvery new sessions, keep it within the bound plus
// what the other host may add between two of its counts; the host that
// writes next counts within recountEvery sessions and brings the realm
// back under the bound.
func TestSessionBoundAcrossHosts(t *testing.T) {
	ctx := context.Background()
	dbs := open(t, 2)
	const bound = 1000
	hosts := []*Sessions{NewSessions(dbs[0], SessionOptions{PerRealm: bound}), NewSessions(dbs[1], SessionOptions{PerRealm: bound})}
	every := hosts[0].recountEvery()
	if every < 2 {
		t.Fatalf("recountEvery is %d at a bound of %d: the test needs views that skip counts", every, bound)
	}
	most := 0
	for i := range bound + 200 {
		visitInject(t, hosts[i%2], idKey(fmt.Sprint("h", i%2, "/", i)), 1)
		n, err := hosts[0].Len(ctx, "r")
		if err != nil {
			t.Fatal(err)
		}
		most = max(most, n)
		if n > bound+2*every {
			t.Fatalf("after %d new sessions the realm holds %d, bound %d, each host counting every %d", i+1, n, bound, every)
		}
	}
	for i := range every + 1 {
		visitInject(t, hosts[0], idKey(fmt.Sprint("h0/last-", i)), 1)
	}
	if n, err := hosts[0].Len(ctx, "r"); err != nil || n > bound {
		t.Fatalf("after %d more new sessions on one host the realm holds %d (%v), bound %d", every+1, n, err, bound)
	}
	t.Logf("at most %d sessions, bound %d, counting every %d", most, bound, every)
}

// TestExpiryForgetsRealmCounts: the host's view of each realm's count is
// dropped with an expiry pass, so a host serving ever new realms (any
// realm name is served) does not keep one for every realm it ever saw,
// and the bound still holds after.
func TestExpiryForgetsRealmCounts(t *testing.T) {
	ctx := context.Background()
	for _, realms := range []int{1, 3} {
		t.Run(fmt.Sprint(realms, " realms"), func(t *testing.T) {
			db := open(t, 1)[0]
			s := NewSessions(db, SessionOptions{PerRealm: 3})
			for r := range realms {
				for i := range 4 {
					visitInject(t, s, coordinator.SessionKey{Realm: fmt.Sprint("realm-", r), Identity: "a", Session: fmt.Sprint(i)}, 1)
				}
			}
			if _, err := db.pool.Exec(ctx, db.q(`UPDATE sessions SET touched_at = touched_at - interval '1 day'`)); err != nil {
				t.Fatal(err)
			}
			if n, err := s.Expire(ctx); err != nil || n != 3*realms {
				t.Fatalf("Expire = %d %v, want %d", n, err, 3*realms)
			}
			s.mu.Lock()
			n := len(s.counts)
			s.mu.Unlock()
			if n != 0 {
				t.Fatalf("after every session expired the host still holds the counts of %d realms", n)
			}
			for i := range 5 {
				visitInject(t, s, coordinator.SessionKey{Realm: "realm-0", Identity: "a", Session: fmt.Sprint("new-", i)}, 1)
			}
			if n, err := s.Len(ctx, "realm-0"); err != nil || n > 3 {
				t.Fatalf("the realm holds %d sessions (%v) past its bound of 3", n, err)
			}
		})
	}
}
