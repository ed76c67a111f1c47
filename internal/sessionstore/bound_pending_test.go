package sessionstore

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestBoundHoldsForPendingSessionsDroppedFromTheFile: a session held in
// memory while the disk is full may lose its row in the file meanwhile
// (idle there past the TTL: its newer visits never reached the file).
// Written back once there is room, it is a new row of its realm again; the
// realm's count must say so, or the realm keeps more sessions than its
// bound from then on.
func TestBoundHoldsForPendingSessionsDroppedFromTheFile(t *testing.T) {
	clk := newClock()
	const bound = 3
	s, db := openStore(t, t.TempDir(), Options{PerRealm: bound, TTL: time.Hour, Now: clk.now})
	held := key("r", "held")
	if err := s.Update(ctx, held, inject(10, "a")); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := db.QueryRow(ctx, []any{&pages}, "PRAGMA page_count"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "limit", fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	room := refuseJournal(t, s)
	clk.advance(40 * time.Minute)
	if err := s.Update(ctx, held, inject(10, strings.Repeat("x", 8000))); err != nil {
		t.Fatal(err)
	}
	if s.Pending() != 1 {
		t.Fatalf("%d sessions pending, want the one the full disk refused", s.Pending())
	}
	clk.advance(40 * time.Minute) // the row in the file is idle past the TTL; the session is not
	if n, err := s.Expire(ctx); err != nil || n != 1 {
		t.Fatalf("Expire = %d %v, want the held session's stale row", n, err)
	}
	if _, err := db.Exec(ctx, "room", "PRAGMA max_page_count = 1000000"); err != nil {
		t.Fatal(err)
	}
	room()
	for i := range 2 * bound {
		clk.advance(time.Second)
		if err := s.Update(ctx, key("r", fmt.Sprint("new-", i)), inject(1, "y")); err != nil {
			t.Fatal(err)
		}
		if s.Pending() != 0 {
			t.Fatalf("the held session was not written back once there was room")
		}
		if n := count(t, s, "r"); n > bound {
			t.Fatalf("after %d new sessions the realm holds %d, over its bound of %d", i+1, n, bound)
		}
	}
}
