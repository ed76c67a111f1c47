package turntrace

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/statedb"
)

func openStore(t *testing.T) *SQLStore {
	t.Helper()
	db, err := statedb.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s, err := NewSQLStore(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tr(realm, session string, at time.Time, ids ...string) coordinator.TurnTrace {
	t := coordinator.TurnTrace{Realm: realm, Identity: "alice", Session: session, Surface: coordinator.SurfaceTurn, Kind: coordinator.TraceInject, At: at, Included: []coordinator.TraceRecord{}, Excluded: []coordinator.TraceRecord{}}
	for _, id := range ids {
		t.Included = append(t.Included, coordinator.TraceRecord{ID: id, Bytes: 10})
	}
	return t
}

// TestPruneIsPerRealm: the per-realm cap drops a realm's own oldest turns,
// never another realm's; retention drops old turns everywhere.
func TestPruneIsPerRealm(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	now := time.Now().UTC()
	var batch []coordinator.TurnTrace
	for i := range 10 {
		batch = append(batch, tr("busy", "s", now, fmt.Sprint("r", i)))
	}
	batch = append(batch, tr("quiet", "s", now, "q1"), tr("old", "s", now.Add(-48*time.Hour), "o1"))
	if err := s.Append(ctx, batch); err != nil {
		t.Fatal(err)
	}
	n, err := s.Prune(ctx, now.Add(-24*time.Hour), 3)
	if err != nil || n != 8 {
		t.Fatalf("pruned %d, %v; want 8 (7 of busy, 1 too old)", n, err)
	}
	busy, _ := s.Session(ctx, "busy", "", "s", 100)
	quiet, _ := s.Session(ctx, "quiet", "alice", "s", 100)
	old, _ := s.Session(ctx, "old", "", "s", 100)
	if len(busy) != 3 || busy[2].Included[0].ID != "r9" || len(quiet) != 1 || len(old) != 0 {
		t.Fatalf("kept busy %d (last %v), quiet %d, old %d", len(busy), busy, len(quiet), len(old))
	}
	// Where a record was injected.
	got, err := s.Record(ctx, "busy", "r8", 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("record trace = %v, %v", got, err)
	}
	if got, _ := s.Record(ctx, "quiet", "r8", 10); len(got) != 0 {
		t.Fatalf("another realm's record trace leaked: %v", got)
	}
}
