package sessionstore

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/statedb"
)

// TestFullDiskKeepsAccounting: with the file refusing every new page
// (SQLITE_FULL, as on a full disk), visits still succeed: each session's
// bytes and ids are kept in memory, read back by the next visit (so the
// budget and dedup hold), and written once there is room again.
func TestFullDiskKeepsAccounting(t *testing.T) {
	s, db := openStore(t, t.TempDir(), Options{CacheSize: 2, MaxPending: 100}) // pending entries must survive cache eviction
	room := fillDisk(t, s, db)
	big := strings.Repeat("x", 8000) // an id list that needs new pages
	for i := range 5 {
		k := key("r", fmt.Sprintf("s%d", i))
		for turn := range 3 {
			if err := s.Update(ctx, k, inject(100, fmt.Sprintf("%s-%d-%d", big, i, turn))); err != nil {
				t.Fatalf("visit on a full disk: %v", err)
			}
		}
	}
	if s.Pending() == 0 {
		t.Fatal("nothing pending: the file never refused (the test does not fill it)")
	}
	for i := range 5 {
		st := get(t, s, key("r", fmt.Sprintf("s%d", i)))
		if st.InjectedBytes != 300 || len(st.InjectedIDs) != 3 {
			t.Fatalf("session s%d on a full disk: %d bytes, %d ids; want 300 and 3", i, st.InjectedBytes, len(st.InjectedIDs))
		}
	}
	// Room again: the next visits write what was held.
	room()
	for range 2 {
		if err := s.Update(ctx, key("r", "warm"), inject(1, "w2")); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.Pending(); n != 0 {
		t.Fatalf("%d sessions still pending after space returned", n)
	}
	// A second store over the same file (a restart) sees every session.
	again, err := Open(ctx, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		st := get(t, again, key("r", fmt.Sprintf("s%d", i)))
		if st.InjectedBytes != 300 || !slices.ContainsFunc(st.InjectedIDs, func(id string) bool { return strings.HasSuffix(id, fmt.Sprintf("-%d-2", i)) }) {
			t.Fatalf("session s%d after the flush: %d bytes, ids %d", i, st.InjectedBytes, len(st.InjectedIDs))
		}
	}
}

// refuseJournal makes the session journal refuse every write, as a full
// disk does (the tests fill the table through SQLite's page limit, which
// the journal, a plain file, does not see); restore gives it back.
func refuseJournal(t *testing.T, s *Store) (restore func()) {
	t.Helper()
	if err := s.lock(ctx); err != nil {
		t.Fatal(err)
	}
	defer s.unlock()
	readOnly, err := os.Open(s.journal.f.Name())
	if err != nil {
		t.Fatal(err)
	}
	writable := s.journal.f
	s.journal.f = readOnly
	restored := false
	restore = func() {
		if restored {
			return
		}
		restored = true
		if err := s.lock(ctx); err != nil {
			t.Fatal(err)
		}
		defer s.unlock()
		s.journal.f = writable
		readOnly.Close()
	}
	t.Cleanup(restore)
	return restore
}

// TestPendingIsWrittenWithoutAVisit: sessions held in memory on a full
// disk are written once there is room by the merge loop, or at Close,
// with no visit to notice the room: an idle host, or one stopped, lost
// them, and the next turn of each session injected its records again
// (from an outside review).
func TestPendingIsWrittenWithoutAVisit(t *testing.T) {
	for _, how := range []string{"merge loop", "close"} {
		t.Run(how, func(t *testing.T) {
			s, db := openStore(t, t.TempDir(), Options{MaxPending: 100})
			room := fillDisk(t, s, db)
			big := strings.Repeat("x", 8000)
			for i := range 3 {
				if err := s.Update(ctx, key("r", fmt.Sprintf("s%d", i)), inject(100, fmt.Sprintf("%s-%d", big, i))); err != nil {
					t.Fatalf("visit on a full disk: %v", err)
				}
			}
			if s.Pending() == 0 {
				t.Fatal("nothing pending: the file never refused")
			}
			room()
			switch how {
			case "merge loop":
				deadline := time.Now().Add(30 * time.Second)
				for s.Pending() > 0 && time.Now().Before(deadline) {
					time.Sleep(20 * time.Millisecond)
				}
				if n := s.Pending(); n != 0 {
					t.Fatalf("%d sessions still pending 30 s after space returned", n)
				}
			case "close":
				if err := s.Close(ctx); err != nil {
					t.Fatal(err)
				}
			}
			again, err := Open(ctx, db, Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if st := get(t, again, key("r", fmt.Sprintf("s%d", i))); st.InjectedBytes != 100 {
					t.Fatalf("session s%d after a restart: %d bytes, want 100", i, st.InjectedBytes)
				}
			}
		})
	}
}

// fillDisk has the store's file refuse every new page (SQLITE_FULL, as
// on a full disk) and its journal every write, after one visit that
// warms the file; room gives both back.
func fillDisk(t *testing.T, s *Store, db *statedb.DB) (room func()) {
	t.Helper()
	if err := s.Update(ctx, key("r", "warm"), inject(10, "w")); err != nil {
		t.Fatal(err)
	}
	limit := func(n int) {
		t.Helper()
		var got int
		if err := db.QueryRow(ctx, []any{&got}, fmt.Sprintf("PRAGMA max_page_count = %d", n)); err != nil {
			t.Fatal(err)
		}
	}
	var pages int
	if err := db.QueryRow(ctx, []any{&pages}, "PRAGMA page_count"); err != nil {
		t.Fatal(err)
	}
	limit(pages)
	journal := refuseJournal(t, s)
	return func() {
		limit(1 << 30)
		journal()
	}
}
