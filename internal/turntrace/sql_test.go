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
	busy, _ := s.Session(ctx, "busy", nil, "s", 100)
	quiet, _ := s.Session(ctx, "quiet", []string{"alice"}, "s", 100)
	old, _ := s.Session(ctx, "old", nil, "s", 100)
	if len(busy) != 3 || busy[2].Included[0].ID != "r9" || len(quiet) != 1 || len(old) != 0 {
		t.Fatalf("kept busy %d (last %v), quiet %d, old %d", len(busy), busy, len(quiet), len(old))
	}
	// Where a record was injected.
	got, err := s.Record(ctx, "busy", nil, "r8", 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("record trace = %v, %v", got, err)
	}
	if got, _ := s.Record(ctx, "quiet", nil, "r8", 10); len(got) != 0 {
		t.Fatalf("another realm's record trace leaked: %v", got)
	}
}

// TestIdentityFilterBeforeTheLimit: a read for some identities (a token
// bound to them) leaves the others' turns out before its limit. They used
// to be dropped after it, so once a page's worth of newer turns of other
// identities existed, a bound token listed none of its own.
func TestIdentityFilterBeforeTheLimit(t *testing.T) {
	testIdentityFilter(t, openStore(t))
}

// testIdentityFilter checks Store's identity filter on s.
func testIdentityFilter(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	carol := tr("r", "mine", now, "shared")
	carol.Identity = "carol"
	batch := []coordinator.TurnTrace{carol}
	for i := range 5 {
		other := tr("r", fmt.Sprint("other", i), now, "shared")
		other.Identity = fmt.Sprint("user", i)
		batch = append(batch, other)
	}
	if err := s.Append(ctx, batch); err != nil {
		t.Fatal(err)
	}
	only := []string{"carol"}
	if got, err := s.Recent(ctx, "r", only, 1); err != nil || len(got) != 1 || got[0].Identity != "carol" {
		t.Errorf("recent sessions of carol = %+v, %v", got, err)
	}
	if got, err := s.Record(ctx, "r", only, "shared", 1); err != nil || len(got) != 1 || got[0].Identity != "carol" {
		t.Errorf("record trace of carol = %+v, %v", got, err)
	}
	if got, err := s.Session(ctx, "r", []string{"user0"}, "mine", 10); err != nil || len(got) != 0 {
		t.Errorf("carol's session read for user0 = %+v, %v", got, err)
	}
	if got, err := s.Recent(ctx, "r", nil, 10); err != nil || len(got) != 6 {
		t.Errorf("recent sessions of every identity = %d, %v; want 6", len(got), err)
	}
}

// TestOldTracesNameNoForeignRecord: a trace stored before out_of_scope may
// name records a scope-blind plugin answered (reason "scope", or a
// selector row of another identity's scope); a read counts them instead.
func TestOldTracesNameNoForeignRecord(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	old := tr("r", "s", time.Now().UTC(), "mine")
	old.Excluded = []coordinator.TraceRecord{
		{ID: "b1", Title: "bob's secret", Scope: "identity:bob", Reason: "scope"},
		{ID: "b2", Title: "bob's row", Scope: "identity:bob", Reason: coordinator.ExcludedSelector},
		{ID: "a1", Title: "alice's row", Scope: "identity:alice", Reason: coordinator.ExcludedSelector},
		{ID: "m1", Title: "shared", Scope: "mob:team", Reason: coordinator.ExcludedBudget},
	}
	if err := s.Append(ctx, []coordinator.TurnTrace{old}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Session(ctx, "r", nil, "s", 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("read %d traces, %v", len(got), err)
	}
	var kept []string
	for _, r := range got[0].Excluded {
		kept = append(kept, r.ID)
	}
	if fmt.Sprint(kept) != "[a1 m1]" || got[0].OutOfScope != 2 {
		t.Fatalf("excluded %v, out_of_scope %d; want [a1 m1] and 2", kept, got[0].OutOfScope)
	}
}

// checkForget is the Forget check both stores pass: the forgotten
// record's title is blanked wherever a trace of its realm names it, and
// nothing else changes.
func checkForget(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	named := tr("r", "s", now, "gone", "kept")
	for i := range named.Included {
		named.Included[i].Title = "title of " + named.Included[i].ID
	}
	named.Excluded = []coordinator.TraceRecord{{ID: "gone", Title: "title of gone", Reason: coordinator.ExcludedBudget}}
	other := named
	other.Realm = "elsewhere"
	if err := s.Append(ctx, []coordinator.TurnTrace{named, tr("r", "s", now, "unrelated"), other}); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, "r", []string{"gone"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Session(ctx, "r", nil, "s", 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("read %d traces, %v", len(got), err)
	}
	for _, r := range append(got[0].Included, got[0].Excluded...) {
		switch {
		case r.ID == "gone" && (r.Title != "" || !r.Forgotten):
			t.Errorf("the forgotten record's row is %+v, want no title and forgotten", r)
		case r.ID == "kept" && (r.Title != "title of kept" || r.Forgotten):
			t.Errorf("another record's row is %+v", r)
		}
	}
	if byRecord, err := s.Record(ctx, "r", nil, "gone", 10); err != nil || len(byRecord) != 1 || byRecord[0].Included[0].Title != "" {
		t.Errorf("the record's trace = %+v, %v", byRecord, err)
	}
	if theirs, err := s.Session(ctx, "elsewhere", nil, "s", 10); err != nil || len(theirs) != 1 || theirs[0].Included[0].Title != "title of gone" {
		t.Errorf("another realm's trace = %+v, %v; a forget is per realm", theirs, err)
	}
}

// TestForgetBlanksTitles: see checkForget.
func TestForgetBlanksTitles(t *testing.T) { checkForget(t, openStore(t)) }
