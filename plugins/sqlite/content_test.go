package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestLiveContentsAcrossReopen: which content is live is kept in memory,
// so it must come back from the records at open, including from a
// database written before schema version 5, whose unique index the
// migration drops.
func TestLiveContentsAcrossReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path)
	active := rec(alice, "Coffee", "Alice drinks espresso.")
	replaced := rec(alice, "Desk", "Alice sits by the window.")
	forgotten := rec(alice, "Car", "Alice drives a red car.")
	ids := mustRemember(t, s, realm, active, replaced, forgotten)
	if _, err := s.Supersede(ctx, realm, ids[1], rec(alice, "Desk", "Alice sits by the door.")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Forget(ctx, realm, ids[2:]); err != nil {
		t.Fatal(err)
	}
	// A quarantined copy (only an import brings one) holds its content too.
	page, err := s.Export(ctx, realm, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	held := page.Records[0]
	held.ID, held.Realm, held.Status = "r-quarantined", "other", sdk.StatusQuarantined
	if _, err := s.Import(ctx, "other", []sdk.Record{held}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Put the file back to schema version 4, index and all.
	downgradeToSchema8(t, path)
	db, err := sql.Open(driverName, dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`CREATE UNIQUE INDEX records_by_content ON records (realm, scope, content_hash) WHERE status IN ('active', 'quarantined')`,
		`ALTER TABLE records DROP COLUMN occurred_ms`,
		`DROP TRIGGER vectors_of_deleted`,
		`DROP TRIGGER vectors_of_retired`,
		`DROP TABLE vectors`,
		`ALTER TABLE index_gen DROP COLUMN store`,
		`PRAGMA user_version = 4`,
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()

	s = openAt(t, path)
	var indexes int
	if err := s.db.r.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name = 'records_by_content'`).Scan(&indexes); err != nil || indexes != 0 {
		t.Fatalf("records_by_content after the migration: %d, %v; want it dropped", indexes, err)
	}
	quarantined := rec(held.Scope, held.Title, held.Body)
	for _, c := range []struct {
		what  string
		realm string
		r     sdk.Record
		want  string // "" for a new record
	}{
		{"the live content", realm, active, ids[0]},
		{"the live content in another scope", realm, rec(bob, active.Title, active.Body), ""},
		{"the content of a superseded record", realm, replaced, ""},
		{"the content of a forgotten record", realm, forgotten, ""},
		{"the content of a quarantined record", "other", quarantined, held.ID},
	} {
		got := mustRemember(t, s, c.realm, c.r)[0]
		switch {
		case c.want != "" && got != c.want:
			t.Errorf("%s after reopening answered %s, want %s", c.what, got, c.want)
		case c.want == "" && (got == ids[0] || got == ids[1] || got == ids[2]):
			t.Errorf("%s after reopening answered the old record %s, want a new one", c.what, got)
		}
	}
	if n := rowCount(t, s, "records"); n != 7 {
		t.Errorf("%d rows, want 7 (3 remembered, 1 replacement, 1 imported, 2 new; 1 forgotten)", n)
	}
}

// TestFailedWriteLeavesNoLiveContent: a batch that fails must not leave its
// contents live, or the next write of one would answer a row that was
// rolled back.
func TestFailedWriteLeavesNoLiveContent(t *testing.T) {
	s, _ := open(t, nil)
	ctx := context.Background()
	first := mustRemember(t, s, realm, rec(alice, "One", "first"))[0]
	fresh := rec(alice, "Fresh", "would be new")
	taken := rec(alice, "Two", "different content")
	taken.ID = first
	if _, err := s.Remember(ctx, realm, []sdk.Record{fresh, taken}); err == nil {
		t.Fatal("Remember with a taken id succeeded")
	}
	// A write would reload past a stale entry, so look at the map itself.
	s.db.wmu.Lock()
	seq, stale := s.db.live.seqs[keyOf(realm, alice, sdk.ContentHash(fresh.Title, fresh.Body))]
	s.db.wmu.Unlock()
	if stale {
		t.Fatalf("the content of a failed batch is live at row %d", seq)
	}
	id := mustRemember(t, s, realm, fresh)[0]
	if got, err := s.Get(ctx, realm, []string{id}); err != nil || len(got) != 1 || got[0].Title != "Fresh" {
		t.Fatalf("Get(%s) after the retried write = %v, %v; want the record", id, got, err)
	}
	// A failed supersede keeps the old content live.
	if _, err := s.Supersede(ctx, realm, first, sdk.Record{Title: "One", Body: "first", ID: id}); err == nil {
		t.Fatal("Supersede with a taken id succeeded")
	}
	if again := mustRemember(t, s, realm, rec(alice, "One", "first"))[0]; again != first {
		t.Errorf("the content of a record a failed supersede kept answered %s, want %s", again, first)
	}
}

// TestStaleLiveContentIsReloaded: a live-content entry the records
// contradict is never answered; the map is reloaded and the write runs
// again.
func TestStaleLiveContentIsReloaded(t *testing.T) {
	s, _ := open(t, nil)
	a, b := rec(alice, "Coffee", "Alice drinks espresso."), rec(alice, "Tea", "Bob drinks tea.")
	ids := mustRemember(t, s, realm, a, b)
	// Point a's content at b's row, as a bug would.
	s.db.wmu.Lock()
	ka := keyOf(realm, alice, sdk.ContentHash(a.Title, a.Body))
	s.db.live.seqs[ka] = s.db.live.seqs[keyOf(realm, alice, sdk.ContentHash(b.Title, b.Body))]
	s.db.wmu.Unlock()
	if got := mustRemember(t, s, realm, a)[0]; got != ids[0] {
		t.Errorf("remembering a again answered %s, want %s", got, ids[0])
	}
	if n := rowCount(t, s, "records"); n != 2 {
		t.Errorf("%d rows, want 2", n)
	}
}
