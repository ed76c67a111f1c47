package sessionstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator"
)

// TestPendingSurvivesAFailedVisit: a session held in memory only (the disk
// was full) keeps its accounting when a later visit's write fails for
// another reason (here the turn's context ends, as when a client hangs
// up). Losing it would forget what the session already injected: the next
// turn would inject the same records again on a fresh budget.
func TestPendingSurvivesAFailedVisit(t *testing.T) {
	s, db := openStore(t, t.TempDir(), Options{CacheSize: 2, MaxPending: 100})
	fillDisk(t, s, db)
	big := strings.Repeat("x", 8000) // needs new pages: the file refuses it
	victim := key("r", "victim")
	if err := s.Update(ctx, victim, inject(100, big+"-a")); err != nil {
		t.Fatal(err)
	}
	if s.Pending() != 1 {
		t.Fatalf("%d pending, want the victim held in memory", s.Pending())
	}
	// Push the victim out of the cache: only the pending set holds it now.
	for i := range 3 {
		if err := s.Update(ctx, key("r", fmt.Sprint("o", i)), func(*coordinator.SessionState) bool { return false }); err != nil {
			t.Fatal(err)
		}
	}
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Update(gone, victim, inject(100, big+"-b")); err == nil {
		t.Fatal("a visit with an ended context succeeded")
	}
	st := get(t, s, victim)
	if st.InjectedBytes != 100 || !slices.Equal(st.InjectedIDs, []string{big + "-a"}) {
		t.Fatalf("after a failed visit the pending session holds %d bytes, %d ids; want 100 and its first id", st.InjectedBytes, len(st.InjectedIDs))
	}
}
