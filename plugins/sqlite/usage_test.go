package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// workingSetIDs answers the ids of a working set of k over scopes.
func workingSetIDs(t *testing.T, s *Store, k int, scopes ...sdk.Scope) []string {
	t.Helper()
	rows, err := s.Manifest(context.Background(), sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: k, Scopes: scopes})
	if err != nil {
		t.Fatal(err)
	}
	return manifestIDs(rows)
}

// rememberNotes writes n alice notes a minute apart and answers their ids.
func rememberNotes(t *testing.T, s *Store, c *clock, n int) []string {
	t.Helper()
	var ids []string
	for i := range n {
		ids = append(ids, mustRemember(t, s, realm, rec(alice, fmt.Sprintf("Note %d", i), fmt.Sprintf("body %d", i)))...)
		c.advance(time.Minute)
	}
	return ids
}

// useInOrder gives ids[i] len(ids)-i uses, so the first ranks highest.
func useInOrder(t *testing.T, s *Store, at time.Time, ids []string) {
	t.Helper()
	uses := make([]sdk.Use, len(ids))
	for i, id := range ids {
		uses[i] = sdk.Use{ID: id, Count: int64(len(ids) - i)}
	}
	if err := s.CountUses(context.Background(), realm, uses, at); err != nil {
		t.Fatal(err)
	}
}

// TestWorkingSetAcrossReopen: the used records' order is kept in memory
// beside the usage table; a reopen rebuilds it from the table, and the
// working set is the same before and after.
func TestWorkingSetAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	c := newClock()
	s := openAt(t, path, func(o *options) { o.now = c.now })
	ids := rememberNotes(t, s, c, 6)
	useInOrder(t, s, c.now(), []string{ids[4], ids[1], ids[2]})
	before := workingSetIDs(t, s, 2, alice)
	if want := []string{ids[4], ids[1], ids[5], ids[3]}; !slices.Equal(before, want) {
		t.Fatalf("working set = %v, want %v", before, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, func(o *options) { o.now = c.now })
	if got := workingSetIDs(t, s, 2, alice); !slices.Equal(got, before) {
		t.Errorf("working set after reopen = %v, want %v", got, before)
	}
	if got := mustGet(t, s, realm, ids[4])[0]; got.UseCount != 3 || !got.LastUsedAt.Equal(c.now()) {
		t.Errorf("record after reopen: %d uses, last %v; want 3 at %v", got.UseCount, got.LastUsedAt, c.now())
	}
}

// TestWorkingSetSkipsRowsThatLeftRecall: the best-ranked used records
// superseded, forgotten or expired give way to the next ones, however many
// there are ahead of them; a superseded record keeps its count, and an
// expired one revived by a write of its content ranks again with its uses.
func TestWorkingSetSkipsRowsThatLeftRecall(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
	var recs []sdk.Record
	for i := range 8 {
		r := rec(alice, fmt.Sprintf("Note %d", i), fmt.Sprintf("body %d", i))
		if i == 2 {
			r.ExpiresAt = c.now().Add(time.Hour)
		}
		recs = append(recs, r)
	}
	ids := mustRemember(t, s, realm, recs...)
	useInOrder(t, s, c.now(), ids[:6])
	newID, err := s.Supersede(ctx, realm, ids[0], rec(alice, "Note 0 again", "body 0 again"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Forget(ctx, realm, []string{ids[1]}); err != nil || n != 1 {
		t.Fatalf("Forget = %d, %v", n, err)
	}
	c.advance(2 * time.Hour) // ids[2] expires
	got := workingSetIDs(t, s, 2, alice)
	if want := []string{ids[3], ids[4]}; !slices.Equal(got[:2], want) {
		t.Errorf("working set = %v, want %v first", got, want)
	}
	if slices.Contains(got, ids[0]) || slices.Contains(got, ids[1]) || slices.Contains(got, ids[2]) {
		t.Errorf("working set %v lists a record that left recall", got)
	}
	if old := mustGet(t, s, realm, ids[0])[0]; old.UseCount != 6 || old.Status != sdk.StatusSuperseded {
		t.Errorf("superseded record: %d uses, %s; want 6, superseded", old.UseCount, old.Status)
	}
	if r := mustGet(t, s, realm, newID)[0]; r.UseCount != 0 {
		t.Errorf("replacement has %d uses, want none", r.UseCount)
	}
	// Writing the expired record's content again revives it.
	revive := recs[2]
	revive.ExpiresAt = time.Time{}
	if again := mustRemember(t, s, realm, revive); again[0] != ids[2] {
		t.Fatalf("rewrite of the expired content answered %s, want %s", again[0], ids[2])
	}
	if got := workingSetIDs(t, s, 2, alice); !slices.Equal(got[:2], []string{ids[2], ids[3]}) {
		t.Errorf("after the revival the working set = %v, want %v first", got, []string{ids[2], ids[3]})
	}
}

// TestForgottenRowKeepsNoUses: a forgotten record's uses go with it. SQLite
// gives the next record the highest row key again after the last one is
// deleted, so a new record may take the forgotten one's row key; it starts
// with no uses and does not rank.
func TestForgottenRowKeepsNoUses(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
	ids := rememberNotes(t, s, c, 2)
	useInOrder(t, s, c.now(), ids[1:])
	if _, err := s.Forget(ctx, realm, ids[1:]); err != nil {
		t.Fatal(err)
	}
	fresh := mustRemember(t, s, realm, rec(bob, "Fresh", "never used"))[0]
	if r := mustGet(t, s, realm, fresh)[0]; r.UseCount != 0 || !r.LastUsedAt.IsZero() {
		t.Errorf("a new record has %d uses, last %v; want none", r.UseCount, r.LastUsedAt)
	}
	rows, err := s.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: 5})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Rank != 0 {
			t.Errorf("row %s ranks %v; nothing in the realm is used", r.ID, r.Rank)
		}
	}
}

// TestMigrationMovesUses opens a database as schema 8 left it, its uses
// in the records' own columns ordered by four partial indexes, and checks
// that the upgrade keeps every count, time and rank, and that the working
// set and new uses work on the result.
func TestMigrationMovesUses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	c := newClock()
	s := openAt(t, path, func(o *options) { o.now = c.now })
	ids := rememberNotes(t, s, c, 5)
	useInOrder(t, s, c.now().Add(-time.Hour), []string{ids[3], ids[0]})
	want := mustGet(t, s, realm, ids...)
	wantSet := workingSetIDs(t, s, 2, alice)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	downgradeToSchema8(t, path)

	s = openAt(t, path, func(o *options) { o.now = c.now })
	var version int
	if err := s.db.r.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != schemaVersion {
		t.Fatalf("user_version = %d, %v; want %d", version, err, schemaVersion)
	}
	got := mustGet(t, s, realm, ids...)
	for i := range want {
		if got[i].UseCount != want[i].UseCount || !got[i].LastUsedAt.Equal(want[i].LastUsedAt) {
			t.Errorf("record %d after the upgrade: %d uses, last %v; want %d, %v", i, got[i].UseCount, got[i].LastUsedAt, want[i].UseCount, want[i].LastUsedAt)
		}
	}
	if got := workingSetIDs(t, s, 2, alice); !slices.Equal(got, wantSet) {
		t.Errorf("working set after the upgrade = %v, want %v", got, wantSet)
	}
	if err := s.CountUses(context.Background(), realm, []sdk.Use{{ID: ids[4], Count: 3}}, c.now()); err != nil {
		t.Fatal(err)
	}
	if got := workingSetIDs(t, s, 1, alice); got[0] != ids[4] {
		t.Errorf("working set after new uses = %v, want %s first", got, ids[4])
	}
	var cols int
	if err := s.db.r.QueryRow("SELECT count(*) FROM pragma_table_info('records') WHERE name IN ('use_count', 'last_used_ms', 'usage_key')").Scan(&cols); err != nil || cols != 0 {
		t.Errorf("records keeps %d usage columns (%v); want none", cols, err)
	}
}

// downgradeToSchema8 rewrites the database at path into schema 8's layout:
// the uses back in the records' columns, the partial indexes back, no
// usage table.
func downgradeToSchema8(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open(driverName, dsn(path))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec(`
ALTER TABLE records ADD COLUMN use_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN last_used_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE records ADD COLUMN usage_key REAL NOT NULL DEFAULT 0;
UPDATE records SET (use_count, last_used_ms, usage_key) =
	(SELECT u.use_count, u.last_used_ms, u.usage_key FROM usage AS u WHERE u.seq = records.seq)
	WHERE seq IN (SELECT seq FROM usage);
DROP TRIGGER usage_of_deleted;
DROP TABLE usage;
DROP INDEX records_by_scope_time;
DROP INDEX records_by_realm_time;
CREATE INDEX records_unused_by_scope ON records (realm, scope, updated_ms) WHERE use_count = 0;
CREATE INDEX records_unused_by_realm ON records (realm, updated_ms) WHERE use_count = 0;
CREATE INDEX records_used_by_scope ON records (realm, scope, usage_key) WHERE use_count > 0;
CREATE INDEX records_used_by_realm ON records (realm, usage_key) WHERE use_count > 0;
PRAGMA user_version = 8;
`)
	if err != nil {
		t.Fatalf("downgrade to schema 8: %v", err)
	}
}

// TestStaleOrderEntriesAreDropped: an entry of the order whose row left
// recall without the order hearing of it (here put there by hand: every
// write path tells it today) is read back, skipped and dropped, and the
// rows behind it are listed.
func TestStaleOrderEntriesAreDropped(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
	ids := rememberNotes(t, s, c, 4)
	useInOrder(t, s, c.now(), ids[2:])
	newID, err := s.Supersede(ctx, realm, ids[0], rec(alice, "Replaced", "replaced"))
	if err != nil {
		t.Fatal(err)
	}
	var oldSeq, newSeq int64
	if err := s.db.r.QueryRow("SELECT seq FROM records WHERE id = ?", ids[0]).Scan(&oldSeq); err != nil {
		t.Fatal(err)
	}
	if err := s.db.r.QueryRow("SELECT seq FROM records WHERE id = ?", newID).Scan(&newSeq); err != nil {
		t.Fatal(err)
	}
	stale := []usedRow{
		{seq: oldSeq, realm: realm, scope: alice, key: 1e9},      // superseded
		{seq: 1 << 40, realm: realm, scope: alice, key: 1e9 + 1}, // no such row
		{seq: newSeq, realm: realm, scope: alice, key: 1e9 + 2},  // active, but never used
	}
	s.db.used.set(stale)
	if got := workingSetIDs(t, s, 2, alice); !slices.Equal(got[:2], []string{ids[2], ids[3]}) {
		t.Errorf("working set = %v, want %v first", got, ids[2:])
	}
	if left := s.db.used.top(realm, []sdk.Scope{alice}, 0, 10); len(left) != 2 {
		t.Errorf("the order keeps %d rows, want the 2 used ones: %v", len(left), left)
	}
}

// TestUseDuringAWorkingSetIsKept: a record first used while
// a working set is being read (its usage row committed after the reader's
// snapshot, its key already in the order when a later round reads the
// order) must not be dropped from the order for good: it has a usage row,
// so the unused part skips it too, and it would vanish from every working
// set until a reopen.
func TestUseDuringAWorkingSetIsKept(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
	// Expired, heavily used rows rank first, so each working set reads the
	// order in several rounds before it reaches the live ones.
	var old []sdk.Record
	for i := range 400 {
		r := rec(alice, fmt.Sprintf("Old %d", i), fmt.Sprintf("old body %d", i))
		r.ExpiresAt = c.now().Add(time.Hour)
		old = append(old, r)
	}
	oldIDs := mustRemember(t, s, realm, old...)
	uses := make([]sdk.Use, len(oldIDs))
	for i, id := range oldIDs {
		uses[i] = sdk.Use{ID: id, Count: sdk.MaxUseCount}
	}
	if err := s.CountUses(ctx, realm, uses, c.now()); err != nil {
		t.Fatal(err)
	}
	c.advance(2 * time.Hour)

	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, err := s.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: 1, Scopes: []sdk.Scope{alice}}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	var fresh []string
	for i := range 150 {
		id := mustRemember(t, s, realm, rec(alice, fmt.Sprintf("New %d", i), fmt.Sprintf("new body %d", i)))[0]
		if err := s.CountUses(ctx, realm, []sdk.Use{{ID: id, Count: 1}}, c.now()); err != nil {
			t.Fatal(err)
		}
		fresh = append(fresh, id)
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()

	got := workingSetIDs(t, s, 1000, alice)
	var lost []string
	for _, id := range fresh {
		if !slices.Contains(got, id) {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d records used during working-set reads are missing from the working set, e.g. %v", len(lost), len(fresh), lost[:min(3, len(lost))])
	}
}

// TestUsesOfARecordForgottenWhileTheIndexLags: uses are placed from the
// index only when it has applied every committed change. A record forgotten
// while a snapshot holds the index is still in it; counting its uses then
// must not leave a usage row for a record that is gone, and a record
// remembered meanwhile (not in the index yet) is still counted.
func TestUsesOfARecordForgottenWhileTheIndexLags(t *testing.T) {
	ctx := context.Background()
	s, release, snapped := holdSnapshot(t, filepath.Join(t.TempDir(), "memory.db"), rec(alice, "Walrus", "tusks"), rec(alice, "Otter", "river"))
	ids := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "walrus tusks otter river", Limit: 5})
	if len(ids) != 2 {
		t.Fatalf("recall answered %v, want both records", ids)
	}
	if n, err := s.Forget(ctx, realm, ids[1:]); err != nil || n != 1 {
		t.Fatalf("Forget = %d, %v", n, err)
	}
	fresh := mustRemember(t, s, realm, rec(alice, "Crane", "at the quay"))[0]
	uses := []sdk.Use{{ID: ids[0], Count: 2}, {ID: ids[1], Count: 3}, {ID: fresh, Count: 1}}
	if err := s.CountUses(ctx, realm, uses, time.Now()); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-snapped; err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.r.Query(`SELECT r.id, u.use_count FROM usage u LEFT JOIN records r ON r.seq = u.seq ORDER BY u.use_count`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id sql.NullString
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s=%d", id.String, n))
	}
	if want := []string{fresh + "=1", ids[0] + "=2"}; !slices.Equal(got, want) {
		t.Errorf("usage rows %v, want %v", got, want)
	}
}

// TestFirstUseWhileTheOrderIsReadIsInTheWorkingSet: a record first used
// just after a working set read the order in memory (so not in it) must
// still be in that working set, as unused. The snapshot began with the
// first read after the order, so it saw the use: the record was in
// neither part. It now begins before the order is read.
func TestFirstUseWhileTheOrderIsReadIsInTheWorkingSet(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
	id := mustRemember(t, s, realm, rec(alice, "Espresso order", "without sugar"))[0]
	testHookOrderRead = func() {
		testHookOrderRead = nil // once
		if err := s.CountUses(ctx, realm, []sdk.Use{{ID: id, Count: 1}}, c.now()); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { testHookOrderRead = nil })
	if got := workingSetIDs(t, s, 10, alice); !slices.Contains(got, id) {
		t.Fatalf("working set %v lacks %s, first used while it was read", got, id)
	}
	if got := workingSetIDs(t, s, 10, alice); !slices.Contains(got, id) {
		t.Fatalf("the next working set %v lacks %s", got, id)
	}
}

// openLogged opens and closes the database at path, answering what it
// logged.
func openLogged(t *testing.T, path string) string {
	t.Helper()
	var logs strings.Builder
	s := newStore()
	s.log = slog.New(slog.NewTextHandler(&logs, nil))
	if err := s.Configure(context.Background(), configJSON(path)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return logs.String()
}

// TestMigrationSaysSo: an upgrade of a large store takes minutes in
// Configure, in which the plugin answers nothing; its log said nothing
// either, so the host's showed only that it waited. The log says the
// migration starts, between which versions, and when it is done.
func TestMigrationSaysSo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	downgradeToSchema8(t, path)
	logs := openLogged(t, path)
	for _, want := range []string{"migrating the database", "from_version=8", fmt.Sprintf("to_version=%d", schemaVersion), "migrated the database"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log does not say %q:\n%s", want, logs)
		}
	}
	// A fresh database is created, not migrated.
	logs = openLogged(t, filepath.Join(t.TempDir(), "new.db"))
	if strings.Contains(logs, "migrat") {
		t.Errorf("a new database logged a migration:\n%s", logs)
	}
}

// TestRebuildSaysWhenDone: an open that rebuilds the recall index from the
// records (its snapshot missing or stale) said it started, or nothing when
// the snapshot was missing, and never that it was done: at a million
// records the plugin answers nothing for a minute. A new database logs no
// rebuild.
func TestRebuildSaysWhenDone(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path)
	mustRemember(t, s, "default", sdk.Record{Scope: "realm", Kind: "fact", Title: "a", Body: "espresso"}, sdk.Record{Scope: "realm", Kind: "fact", Title: "b", Body: "flat white"})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + ".index"); err != nil {
		t.Fatal(err)
	}
	logs := openLogged(t, path)
	if want := `msg="rebuilt the recall index" records=2`; !strings.Contains(logs, want) {
		t.Errorf("the log does not say %q:\n%s", want, logs)
	}
	logs = openLogged(t, filepath.Join(t.TempDir(), "new.db"))
	if strings.Contains(logs, "rebuil") {
		t.Errorf("a new database logged a rebuild:\n%s", logs)
	}
}
