package turntrace

import (
	"context"
	"encoding/json"
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

// TestPruneSparesQuietIdentities: a realm over its bound loses the oldest
// traces of the identity holding the most. Before, its newest traces were
// kept whoever made them, so one identity's flood of turns pushed out a
// quieter identity's whole history, which that identity's token reads.
func TestPruneSparesQuietIdentities(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	now := time.Now().UTC()
	of := func(identity, session, id string) coordinator.TurnTrace {
		t := tr("r", session, now, id)
		t.Identity = identity
		return t
	}
	// bob's two turns come first; then alice's flood and carol's one.
	batch := []coordinator.TurnTrace{of("bob", "b", "b0"), of("bob", "b", "b1")}
	for i := range 10 {
		batch = append(batch, of("alice", "a", fmt.Sprint("a", i)))
	}
	batch = append(batch, of("carol", "c", "c0"))
	if err := s.Append(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Prune(ctx, now.Add(-time.Hour), 6); err != nil || n != 7 {
		t.Fatalf("pruned %d, %v; want 7 of alice's", n, err)
	}
	kept := func(identity, session string) []string {
		got, err := s.Session(ctx, "r", []string{identity}, session, 100)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, g := range got {
			ids = append(ids, g.Included[0].ID)
		}
		return ids
	}
	if a, b, c := kept("alice", "a"), kept("bob", "b"), kept("carol", "c"); fmt.Sprint(a, b, c) != "[a7 a8 a9] [b0 b1] [c0]" {
		t.Fatalf("kept alice %v, bob %v, carol %v; want alice's newest three, bob's and carol's all", a, b, c)
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
	if got, _, err := s.RecentPage(ctx, "r", only, Page{Limit: 1}); err != nil || len(got) != 1 || got[0].Identity != "carol" {
		t.Errorf("recent sessions of carol = %+v, %v", got, err)
	}
	if got, _, err := s.RecordPage(ctx, "r", only, "shared", Page{Limit: 1}); err != nil || len(got) != 1 || got[0].Identity != "carol" {
		t.Errorf("record trace of carol = %+v, %v", got, err)
	}
	if got, _, err := s.SessionPage(ctx, "r", []string{"user0"}, "mine", Page{Limit: 10}); err != nil || len(got) != 0 {
		t.Errorf("carol's session read for user0 = %+v, %v", got, err)
	}
	if got, _, err := s.RecentPage(ctx, "r", nil, Page{Limit: 10}); err != nil || len(got) != 6 {
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
	got, _, err := s.SessionPage(ctx, "r", nil, "s", Page{Limit: 10})
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
	if byRecord, _, err := s.RecordPage(ctx, "r", nil, "gone", Page{Limit: 10}); err != nil || len(byRecord) != 1 || byRecord[0].Included[0].Title != "" {
		t.Errorf("the record's trace = %+v, %v", byRecord, err)
	}
	if theirs, _, err := s.SessionPage(ctx, "elsewhere", nil, "s", Page{Limit: 10}); err != nil || len(theirs) != 1 || theirs[0].Included[0].Title != "title of gone" {
		t.Errorf("another realm's trace = %+v, %v; a forget is per realm", theirs, err)
	}
}

// TestForgetBlanksTitles: see checkForget.
func TestForgetBlanksTitles(t *testing.T) { checkForget(t, openStore(t)) }

// TestForgetReadsOnlyTheTracesNamingIt: a forget, and a record's history,
// read the traces that name the record and no other. They decoded every
// trace of the realm, on the state database's one connection: at the
// default 10,000 traces a forget took 138 ms, and turns in every realm
// waited for it. A trace that does not decode shows which were read.
func TestForgetReadsOnlyTheTracesNamingIt(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	if err := s.Append(ctx, []coordinator.TurnTrace{tr("r", "s", time.Now().UTC(), "gone")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.Exec(ctx, "test", `INSERT INTO turn_trace (realm, identity, session, at_ms, bytes, trace) VALUES ('r', 'alice', 's', 0, 0, 'not a trace')`); err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, "r", []string{"gone"}); err != nil {
		t.Fatalf("forget: %v", err)
	}
	if got, err := s.Record(ctx, "r", nil, "gone", 10); err != nil || len(got) != 1 || !got[0].Included[0].Forgotten {
		t.Fatalf("the record's history = %+v, %v", got, err)
	}
}

// TestTraceIndexKeptInStep: the index of the records traces name follows
// every write, forget and prune (FTS5's integrity check compares it with
// the traces), and finds a record by its exact id only.
func TestTraceIndexKeptInStep(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	check := func(when string) {
		t.Helper()
		if _, err := s.db.Exec(ctx, "test", `INSERT INTO turn_trace_records (turn_trace_records) VALUES ('integrity-check')`); err != nil {
			t.Fatalf("after %s: %v", when, err)
		}
	}
	now := time.Now().UTC()
	left := tr("r", "s", now, "a.b")
	left.Excluded = []coordinator.TraceRecord{{ID: "Left-Out_1", Title: "left out", Reason: coordinator.ExcludedBudget}}
	if err := s.Append(ctx, []coordinator.TurnTrace{tr("r", "s", now.Add(-48*time.Hour), "old"), left, tr("r", "s", now, "AND", "left-out_1")}); err != nil {
		t.Fatal(err)
	}
	check("a write")
	if err := s.Forget(ctx, "r", []string{"Left-Out_1", "AND"}); err != nil {
		t.Fatal(err)
	}
	check("a forget")
	got, err := s.Session(ctx, "r", nil, "s", 10)
	if err != nil || len(got) != 3 {
		t.Fatalf("read %d traces, %v", len(got), err)
	}
	if !got[1].Excluded[0].Forgotten || !got[2].Included[0].Forgotten || got[2].Included[1].Forgotten {
		t.Errorf("after forgetting Left-Out_1 and AND: %+v", got[1:])
	}
	for id, want := range map[string]int{"a.b": 1, "a": 0, "left-out_1": 1, "Left-Out_1": 0, "old": 1} {
		if got, err := s.Record(ctx, "r", nil, id, 10); err != nil || len(got) != want {
			t.Errorf("traces that injected %q = %d, %v; want %d", id, len(got), err, want)
		}
	}
	if n, err := s.Prune(ctx, now.Add(-time.Hour), 10); err != nil || n != 1 {
		t.Fatalf("pruned %d, %v", n, err)
	}
	check("a prune")
	if got, err := s.Record(ctx, "r", nil, "old", 10); err != nil || len(got) != 0 {
		t.Errorf("a pruned trace's record = %d traces, %v", len(got), err)
	}
	var indexed int
	if err := s.db.QueryRow(ctx, []any{&indexed}, `SELECT count(*) FROM turn_trace_records WHERE turn_trace_records MATCH '"old"'`); err != nil || indexed != 0 {
		t.Errorf("the pruned trace is still indexed (%d, %v)", indexed, err)
	}
}

// TestTraceIndexMigration: traces written before the index are indexed
// when the store migrates, so a forget still finds them.
func TestTraceIndexMigration(t *testing.T) {
	ctx := context.Background()
	db, err := statedb.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := db.Migrate(ctx, component, migrations[:1]); err != nil {
		t.Fatal(err)
	}
	old := tr("r", "s", time.Now().UTC(), "gone", "kept")
	old.Included[0].Title = "the secret"
	old.Excluded = []coordinator.TraceRecord{{ID: "left", Title: "left out", Reason: coordinator.ExcludedBudget}}
	body, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, "test", `INSERT INTO turn_trace (realm, identity, session, at_ms, bytes, trace) VALUES ('r', 'alice', 's', 0, 0, ?)`, string(body)); err != nil {
		t.Fatal(err)
	}
	s, err := NewSQLStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Forget(ctx, "r", []string{"gone", "left"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Record(ctx, "r", nil, "kept", 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("the old trace by a record it injected: %d traces, %v", len(got), err)
	}
	if r := got[0].Included[0]; r.Title != "" || !r.Forgotten {
		t.Errorf("the old trace's forgotten row is %+v", r)
	}
	if r := got[0].Excluded[0]; r.Title != "" || !r.Forgotten {
		t.Errorf("the old trace's forgotten left-out row is %+v", r)
	}
	if _, err := db.Exec(ctx, "test", `INSERT INTO turn_trace_records (turn_trace_records) VALUES ('integrity-check')`); err != nil {
		t.Fatal(err)
	}
}

// TestIDsNoTraceCanNameAreLeftOut: an id that is no sdk token would be a
// phrase to the trace index, which answers phrases with an error; no
// trace can hold one, so it is left out of the search and the rest of
// the batch is still forgotten.
func TestIDsNoTraceCanNameAreLeftOut(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	if err := s.Append(ctx, []coordinator.TurnTrace{tr("r", "s", time.Now().UTC(), "kept-id")}); err != nil {
		t.Fatal(err)
	}
	for _, odd := range []string{"x:y", "a b", "q/r/s", "::", `"q"`} {
		if got, err := s.Record(ctx, "r", nil, odd, 10); err != nil || len(got) != 0 {
			t.Errorf("Record(%q) = %d traces, %v; want none and no error", odd, len(got), err)
		}
	}
	if err := s.Forget(ctx, "r", []string{"x:y", "kept-id", "a b"}); err != nil {
		t.Fatalf("a forget naming ids no trace can hold: %v", err)
	}
	got, err := s.Record(ctx, "r", nil, "kept-id", 10)
	if err != nil || len(got) != 1 || !got[0].Included[0].Forgotten {
		t.Fatalf("after the forget, the record's trace is %+v (%v), want it forgotten", got, err)
	}
}

// TestAppendKeepsOrderAcrossStatements: a batch is written in its order
// and indexed whole, whether it fits one INSERT or spans several.
func TestAppendKeepsOrderAcrossStatements(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int{1, 2, appendRows, appendRows + 1, 2*appendRows + 3} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			s := openStore(t)
			now := time.Now().UTC()
			batch := make([]coordinator.TurnTrace, n)
			for i := range batch {
				batch[i] = tr("r", "s", now, fmt.Sprintf("rec-%d", i))
				batch[i].Bytes = i
			}
			if err := s.Append(ctx, batch); err != nil {
				t.Fatal(err)
			}
			if _, err := s.db.Exec(ctx, "test", `INSERT INTO turn_trace_records (turn_trace_records) VALUES ('integrity-check')`); err != nil {
				t.Fatal(err)
			}
			got, err := s.Session(ctx, "r", nil, "s", n+1)
			if err != nil || len(got) != n {
				t.Fatalf("read %d traces of %d, %v", len(got), n, err)
			}
			for i, g := range got {
				if g.Bytes != i || g.Included[0].ID != fmt.Sprintf("rec-%d", i) {
					t.Fatalf("trace %d read back as %+v", i, g)
				}
			}
			for _, i := range []int{0, n - 1} {
				if got, err := s.Record(ctx, "r", nil, fmt.Sprintf("rec-%d", i), 10); err != nil || len(got) != 1 {
					t.Errorf("traces naming rec-%d = %d, %v", i, len(got), err)
				}
			}
		})
	}
}
