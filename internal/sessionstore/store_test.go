package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/statedb"
)

var ctx = context.Background()

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newClock() *clock { return &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)} }

func openStore(t *testing.T, dir string, opts Options) (*Store, *statedb.DB) {
	t.Helper()
	db, err := statedb.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := Open(ctx, db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(ctx) })
	return s, db
}

func key(realm, session string) coordinator.SessionKey {
	return coordinator.SessionKey{Realm: realm, Identity: "alice", Session: session}
}

// inject is a turn's accounting: bytes and an id.
func inject(n int, id string) func(*coordinator.SessionState) bool {
	return func(s *coordinator.SessionState) bool {
		s.InjectedBytes += n
		s.InjectedIDs = append(s.InjectedIDs, id)
		return true
	}
}

func get(t *testing.T, s *Store, k coordinator.SessionKey) coordinator.SessionState {
	t.Helper()
	var st coordinator.SessionState
	if err := s.Update(ctx, k, func(v *coordinator.SessionState) bool { st = v.Clone(); return false }); err != nil {
		t.Fatal(err)
	}
	return st
}

func count(t *testing.T, s *Store, realm string) int {
	t.Helper()
	n, err := s.Len(ctx, realm)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s, db := openStore(t, dir, Options{})
	k := key("default", "s1")
	for i := range 3 {
		if err := s.Update(ctx, k, inject(1000, fmt.Sprint("r", i))); err != nil {
			t.Fatal(err)
		}
	}
	// A finished sweep that found nothing is kept apart from no sweep.
	if err := s.Update(ctx, k, func(st *coordinator.SessionState) bool { st.SweepIDs = []string{}; st.Epoch = 2; return true }); err != nil {
		t.Fatal(err)
	}
	want := get(t, s, k)
	db.Close()

	s2, _ := openStore(t, dir, Options{})
	got := get(t, s2, k)
	if got.InjectedBytes != 3000 || !slices.Equal(got.InjectedIDs, want.InjectedIDs) || got.Epoch != 2 || got.SweepIDs == nil || len(got.SweepIDs) != 0 {
		t.Fatalf("after a restart: %+v, want %+v", got, want)
	}
}

func TestIdleSessionsExpire(t *testing.T) {
	clk := newClock()
	s, _ := openStore(t, t.TempDir(), Options{TTL: time.Hour, Now: clk.now})
	idle, busy, reader := key("default", "idle"), key("default", "busy"), key("default", "reader")
	for _, k := range []coordinator.SessionKey{idle, busy, reader} {
		if err := s.Update(ctx, k, inject(100, "r1")); err != nil {
			t.Fatal(err)
		}
	}
	for range 4 {
		clk.advance(20 * time.Minute)
		if err := s.Update(ctx, busy, inject(1, "r")); err != nil {
			t.Fatal(err)
		}
		get(t, s, reader) // a read keeps a session alive too
	}
	if got := get(t, s, idle); !got.IsZero() {
		t.Fatalf("a session idle for 80 minutes under a 1 h TTL still holds %+v", got)
	}
	if got := get(t, s, busy); got.InjectedBytes != 104 {
		t.Fatalf("a busy session lost its state: %+v", got)
	}
	if got := get(t, s, reader); got.InjectedBytes != 100 {
		t.Fatalf("a session only read lost its state: %+v", got)
	}
	n, err := s.Expire(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Expire dropped %d (%v), want the one idle session", n, err)
	}
	if c := count(t, s, "default"); c != 2 {
		t.Fatalf("%d sessions left, want 2", c)
	}
}

func TestBoundIsPerRealm(t *testing.T) {
	clk := newClock()
	// A cache smaller than the flood: the victim must come back from the file.
	s, _ := openStore(t, t.TempDir(), Options{PerRealm: 20, CacheSize: 8, Now: clk.now})
	victim := key("default", "victim")
	if err := s.Update(ctx, victim, inject(50000, "big")); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		clk.advance(time.Millisecond)
		if err := s.Update(ctx, key("tenantB", fmt.Sprint("flood-", i)), inject(10, "x")); err != nil {
			t.Fatal(err)
		}
	}
	if got := get(t, s, victim); got.InjectedBytes != 50000 || !slices.Equal(got.InjectedIDs, []string{"big"}) {
		t.Fatalf("a flood of another realm changed the victim: %+v", got)
	}
	if n := count(t, s, "tenantB"); n != 20 {
		t.Fatalf("realm tenantB holds %d sessions, bound 20", n)
	}
	// The flooding realm lost its oldest sessions, kept its newest.
	if got := get(t, s, key("tenantB", "flood-0")); !got.IsZero() {
		t.Fatalf("the oldest flood session survived: %+v", got)
	}
	if got := get(t, s, key("tenantB", "flood-99")); got.InjectedBytes != 10 {
		t.Fatalf("the newest flood session was dropped: %+v", got)
	}
}

func TestVisitsThatChangeNothingStoreNothing(t *testing.T) {
	s, _ := openStore(t, t.TempDir(), Options{})
	for i := range 50 {
		if err := s.Update(ctx, key("default", fmt.Sprint(i)), func(*coordinator.SessionState) bool { return false }); err != nil {
			t.Fatal(err)
		}
	}
	if n := count(t, s, "default"); n != 0 {
		t.Fatalf("%d sessions stored by visits that changed nothing", n)
	}
}

func TestConcurrentUpdatesAllLand(t *testing.T) {
	s, _ := openStore(t, t.TempDir(), Options{CacheSize: 4})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				if err := s.Update(ctx, key("default", fmt.Sprint(i%10)), inject(1, fmt.Sprint(w, "-", i))); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for i := range 10 {
		st := get(t, s, key("default", fmt.Sprint(i)))
		if st.InjectedBytes != len(st.InjectedIDs) {
			t.Fatalf("session %d: %d bytes for %d ids: an update was lost", i, st.InjectedBytes, len(st.InjectedIDs))
		}
		total += st.InjectedBytes
	}
	if total != 800 {
		t.Fatalf("%d updates landed, want 800", total)
	}
}

// huge adds 20,000 injected ids: a state no full disk has room for.
func huge(st *coordinator.SessionState) bool {
	for i := range 20000 {
		st.InjectedIDs = append(st.InjectedIDs, fmt.Sprintf("record-%d", i))
	}
	return true
}

// TestFullDiskKeepsState: once as many sessions as MaxPending wait in
// memory for room, a write the disk refuses fails with the sentinel and
// changes neither the file nor what later visits see.
func TestFullDiskKeepsState(t *testing.T) {
	s, db := openStore(t, t.TempDir(), Options{MaxPending: 1})
	k := key("default", "s")
	if err := s.Update(ctx, k, inject(10, "kept")); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, key("default", "other"), inject(10, "x")); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "limit", `PRAGMA max_page_count = 1`); err != nil {
		t.Fatal(err)
	}
	refuseJournal(t, s)
	if err := s.Update(ctx, key("default", "other"), huge); err != nil {
		t.Fatalf("the first write on a full disk is held in memory, got %v", err)
	}
	if err := s.Update(ctx, k, huge); !errors.Is(err, statedb.ErrStorageFull) {
		t.Fatalf("write to a full disk past MaxPending = %v, want ErrStorageFull", err)
	}
	if got := get(t, s, k); !slices.Equal(got.InjectedIDs, []string{"kept"}) {
		t.Fatalf("a failed write changed the state to %d ids", len(got.InjectedIDs))
	}
}

// TestCloseOnAFullDiskSaysWhatIsLost: a clean stop while sessions wait
// in memory for room on a full disk cannot keep them, and says how many
// (the log said only that the journal would be merged at the next start).
func TestCloseOnAFullDiskSaysWhatIsLost(t *testing.T) {
	s, db := openStore(t, t.TempDir(), Options{MaxPending: 8})
	if _, err := db.Exec(ctx, "limit", `PRAGMA max_page_count = 1`); err != nil {
		t.Fatal(err)
	}
	refuseJournal(t, s)
	for _, name := range []string{"a", "b"} {
		if err := s.Update(ctx, key("default", name), huge); err != nil {
			t.Fatalf("a write on a full disk is held in memory, got %v", err)
		}
	}
	err := s.Close(ctx)
	if err == nil || !strings.Contains(err.Error(), "the accounting of 2 sessions held in memory") {
		t.Fatalf("Close = %v, want it to say 2 sessions are lost", err)
	}
}

func BenchmarkUpdate(b *testing.B) {
	cases := []struct {
		name string
		key  func(i int) coordinator.SessionKey
	}{
		{"existing-session", func(int) coordinator.SessionKey { return key("default", "s") }},
		{"new-session", func(i int) coordinator.SessionKey { return key("default", fmt.Sprint(i)) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			db, err := statedb.Open(ctx, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			s, err := Open(ctx, db, Options{PerRealm: 1000})
			if err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				// A turn: one read visit, one accounting write.
				k := c.key(i)
				_ = s.Update(ctx, k, func(*coordinator.SessionState) bool { return false })
				if err := s.Update(ctx, k, func(st *coordinator.SessionState) bool { st.InjectedBytes++; return true }); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

// BenchmarkMemoryStore is the baseline: the same turn on the in-memory store.
func BenchmarkMemoryStore(b *testing.B) {
	m := coordinator.NewMemoryStore(1000)
	k := key("default", "s")
	for b.Loop() {
		_ = m.Update(ctx, k, func(*coordinator.SessionState) bool { return false })
		_ = m.Update(ctx, k, func(st *coordinator.SessionState) bool { st.InjectedBytes++; return true })
	}
}

// TestBoundCountsExpiredSessionsOut: sessions dropped as idle free their
// realm's slots, so the bound never evicts a live session early.
func TestBoundCountsExpiredSessionsOut(t *testing.T) {
	clk := newClock()
	s, _ := openStore(t, t.TempDir(), Options{PerRealm: 5, TTL: time.Hour, Now: clk.now})
	for i := range 3 {
		if err := s.Update(ctx, key("r", fmt.Sprint("old-", i)), inject(1, "x")); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(30 * time.Minute)
	for i := range 2 {
		if err := s.Update(ctx, key("r", fmt.Sprint("live-", i)), inject(1, "x")); err != nil {
			t.Fatal(err)
		}
	}
	clk.advance(45 * time.Minute) // the old ones are idle past the TTL now
	if n, err := s.Expire(ctx); err != nil || n != 3 {
		t.Fatalf("Expire = %d %v, want 3", n, err)
	}
	for i := range 3 {
		clk.advance(time.Millisecond)
		if err := s.Update(ctx, key("r", fmt.Sprint("new-", i)), inject(1, "x")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 {
		if got := get(t, s, key("r", fmt.Sprint("live-", i))); got.InjectedBytes != 1 {
			t.Fatalf("live session %d was evicted although the realm holds only 5", i)
		}
	}
	if n := count(t, s, "r"); n != 5 {
		t.Fatalf("realm holds %d sessions, want 5", n)
	}
}

// TestExpiredRealmsLeaveNoCount: a realm whose sessions have all expired
// or been evicted leaves nothing in memory, so a host serving ever new
// realms (any realm name is served) keeps a count only for realms that
// hold sessions.
func TestExpiredRealmsLeaveNoCount(t *testing.T) {
	for _, realms := range []int{1, 2, 50} {
		t.Run(fmt.Sprint(realms, " realms"), func(t *testing.T) {
			clk := newClock()
			s, _ := openStore(t, t.TempDir(), Options{PerRealm: 3, TTL: time.Hour, Now: clk.now})
			for r := range realms {
				// One past the bound: the count is made exact and
				// then stepped down by the eviction and the expiry.
				for i := range 4 {
					clk.advance(time.Millisecond)
					if err := s.Update(ctx, key(fmt.Sprint("realm-", r), fmt.Sprint("s", i)), inject(1, "x")); err != nil {
						t.Fatal(err)
					}
				}
			}
			clk.advance(2 * time.Hour)
			if _, err := s.Expire(ctx); err != nil {
				t.Fatal(err)
			}
			if err := s.lock(ctx); err != nil {
				t.Fatal(err)
			}
			n := len(s.counts)
			s.unlock()
			if n != 0 {
				t.Fatalf("after every session expired the store still counts %d realms", n)
			}
			// A realm's next session counts it afresh, and the bound holds.
			for i := range 5 {
				clk.advance(time.Millisecond)
				if err := s.Update(ctx, key("realm-0", fmt.Sprint("new-", i)), inject(1, "x")); err != nil {
					t.Fatal(err)
				}
			}
			if c := count(t, s, "realm-0"); c > 3 {
				t.Fatalf("realm holds %d sessions past its bound of 3", c)
			}
		})
	}
}
