package sessionstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
)

// idKey parses "identity/session" into a key of realm r.
func idKey(v string) coordinator.SessionKey {
	id, s, _ := strings.Cut(v, "/")
	return coordinator.SessionKey{Realm: "r", Identity: id, Session: s}
}

// TestFloodEvictsTheFloodersOwn: with max_per_realm = 60, mallory opening
// 60 new sessions in alice's realm must not evict alice's session (whose
// budget and dedup set would start over, so records it already showed
// would be injected again); mallory loses its own oldest instead.
func TestFloodEvictsTheFloodersOwn(t *testing.T) {
	clk := newClock()
	// A cache smaller than the flood: alice must come back from the file.
	s, _ := openStore(t, t.TempDir(), Options{PerRealm: 60, CacheSize: 8, Now: clk.now})
	alice := idKey("alice/s")
	if err := s.Update(ctx, alice, inject(5000, "rec-1")); err != nil {
		t.Fatal(err)
	}
	for i := range 60 {
		clk.advance(time.Millisecond)
		if err := s.Update(ctx, idKey(fmt.Sprint("mallory/", i)), inject(10, "x")); err != nil {
			t.Fatal(err)
		}
	}
	if got := get(t, s, alice); got.InjectedBytes != 5000 || len(got.InjectedIDs) != 1 {
		t.Fatalf("mallory's flood reset alice's session: %+v", got)
	}
	if got := get(t, s, idKey("mallory/0")); !got.IsZero() {
		t.Fatalf("mallory's oldest session survived its own flood: %+v", got)
	}
	if n := count(t, s, "r"); n != 60 {
		t.Fatalf("the realm holds %d sessions, bound 60", n)
	}
}

// TestBoundEvictsPerIdentity checks the eviction order one new session at
// a time, and many at once after a restart with a lower bound.
func TestBoundEvictsPerIdentity(t *testing.T) {
	tests := []struct {
		name   string
		bound  int
		visits []string // identity/session, in order
		// lowered, when set, reopens the file with this bound before the
		// last visit.
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
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			dir := t.TempDir()
			s, db := openStore(t, dir, Options{PerRealm: tc.bound, Now: clk.now})
			for i, v := range tc.visits {
				if tc.lowered > 0 && i == len(tc.visits)-1 {
					db.Close()
					s, _ = openStore(t, dir, Options{PerRealm: tc.lowered, Now: clk.now})
				}
				clk.advance(time.Millisecond)
				if err := s.Update(ctx, idKey(v), inject(1, v)); err != nil {
					t.Fatal(err)
				}
			}
			for _, v := range tc.gone {
				if got := get(t, s, idKey(v)); !got.IsZero() {
					t.Errorf("%s was kept", v)
				}
			}
			for _, v := range tc.kept {
				if got := get(t, s, idKey(v)); got.IsZero() {
					t.Errorf("%s was evicted", v)
				}
			}
			if n := count(t, s, "r"); n != len(tc.kept) {
				t.Errorf("the realm holds %d sessions, want %d", n, len(tc.kept))
			}
		})
	}
}

// TestBoundEvictsInSteps: a realm past a bound of 300 drops a hundredth of
// the bound more than it must (the flooder's oldest, in order), so the
// next three new sessions need no eviction, and the fourth takes the next
// step. Choosing victims reads the whole realm; one step per new session
// cost a realm at the default bound about 2 ms on each new session.
func TestBoundEvictsInSteps(t *testing.T) {
	clk := newClock()
	s, _ := openStore(t, t.TempDir(), Options{PerRealm: 300, Now: clk.now})
	alice := idKey("alice/s")
	if err := s.Update(ctx, alice, inject(5000, "rec-1")); err != nil {
		t.Fatal(err)
	}
	visit := func(i int) {
		t.Helper()
		clk.advance(time.Millisecond)
		if err := s.Update(ctx, idKey(fmt.Sprint("mallory/", i)), inject(10, "x")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 300 {
		visit(i) // the last passes the bound
	}
	if n := count(t, s, "r"); n != 297 {
		t.Fatalf("past the bound the realm holds %d sessions, want 297 (300 less a step of 3)", n)
	}
	for i := range 4 {
		if got := get(t, s, idKey(fmt.Sprint("mallory/", i))); i < 4 && !got.IsZero() {
			t.Errorf("mallory/%d, among the four oldest, was kept", i)
		}
	}
	if got := get(t, s, idKey("mallory/4")); got.IsZero() {
		t.Error("mallory/4 was evicted with the step")
	}
	for i := 300; i < 303; i++ {
		visit(i)
	}
	if n := count(t, s, "r"); n != 300 {
		t.Fatalf("three new sessions later the realm holds %d, want 300", n)
	}
	visit(303)
	if n := count(t, s, "r"); n != 297 {
		t.Fatalf("the next step leaves %d sessions, want 297", n)
	}
	if got := get(t, s, alice); got.InjectedBytes != 5000 {
		t.Fatalf("the steps evicted alice's session: %+v", got)
	}
}
