package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
	"github.com/memhost/memhost/sdk"
	memindex "github.com/memhost/memhost/sdk/index"
)

// rawDB opens path with the plain driver, outside any Store.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func configureErr(t *testing.T, path string, mods ...func(*options)) error {
	t.Helper()
	s := newStore(mods...)
	defer s.Close()
	return s.Configure(context.Background(), configJSON(path))
}

func TestMigrateFromEmpty(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "memory.db")
	s := openAt(t, path)
	var version int
	if err := s.db.r.QueryRow("PRAGMA user_version").Scan(&version); err != nil || version != schemaVersion {
		t.Fatalf("user_version = %d, %v; want %d", version, err, schemaVersion)
	}
	for _, table := range []string{"records", "index_gen", "ledger"} {
		var n int
		if err := s.db.r.QueryRow("SELECT count(*) FROM sqlite_schema WHERE name = ?", table).Scan(&n); err != nil || n != 1 {
			t.Errorf("table %s: %d, %v", table, n, err)
		}
	}
	var mode string
	if err := s.db.r.QueryRow("PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal mode %q, %v", mode, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("database file mode %v, %v; want 0600", fi.Mode(), err)
	}
	id := mustRemember(t, s, realm, rec(alice, "Persist", "across reopen"))[0]
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopening migrates nothing and keeps the data.
	s = openAt(t, path)
	if got := mustGet(t, s, realm, id); len(got) != 1 {
		t.Fatalf("record lost across reopen: %v", got)
	}
	if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "persist"}); len(got) != 1 {
		t.Errorf("recall after reopen = %v", got)
	}
	if !s.db.fromSnapshot {
		t.Error("reopen after a clean close rebuilt the index instead of reading its snapshot")
	}
}

// TestIndexSnapshot: a clean close leaves a snapshot the next open reads;
// a stale one (the process died after later writes), a torn one or none
// are ignored and the index is rebuilt from the records, which hold every
// acknowledged write.
func TestIndexSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path)
	first := mustRemember(t, s, realm, rec(alice, "Walrus", "tusks"), rec(bob, "Otter", "river"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(path + ".index")
	if err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	if !s.db.fromSnapshot || s.db.ix.Len() != 2 {
		t.Fatalf("reopen: snapshot generation %d, %d indexed; want the snapshot's 2", s.db.snapGen, s.db.ix.Len())
	}
	later := mustRemember(t, s, realm, rec(alice, "Walrus again", "more tusks"))
	if _, err := s.Forget(context.Background(), realm, first[:1]); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		snapshot []byte
	}{
		{"stale", old},
		{"torn", old[:len(old)/2]},
		{"garbage", []byte("not a snapshot")},
		{"none", nil},
	} {
		if tc.snapshot == nil {
			os.Remove(path + ".index")
		} else if err := os.WriteFile(path+".index", tc.snapshot, 0o600); err != nil {
			t.Fatal(err)
		}
		s = openAt(t, path)
		if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "walrus"}); len(got) != 1 || got[0] != later[0] {
			t.Errorf("%s snapshot: recall walrus = %v, want [%s]", tc.name, got, later[0])
		}
		checkIndex(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A database upgraded from schema 1 has records at generation 0: the
	// close after its rebuild still leaves a snapshot for the next open.
	db := rawDB(t, path)
	if _, err := db.Exec("UPDATE index_gen SET gen = 0"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	os.Remove(path + ".index")
	s = openAt(t, path)
	if s.db.fromSnapshot {
		t.Fatal("opened from a removed snapshot")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	if !s.db.fromSnapshot {
		t.Error("a rebuilt index at generation 0 left no snapshot at close")
	}
	checkIndex(t, s)
}

// A database restored from an older copy beside the newer snapshot must
// never take that snapshot for its own, even once its writes bring it back
// to the snapshot's generation and the process dies before the next one.
func TestRestoredDatabaseNeverTrustsNewerSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path)
	mustRemember(t, s, realm, rec(alice, "Walrus", "tusks"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	copyTo(t, path, backup)
	s = openAt(t, path)
	mustRemember(t, s, realm, rec(alice, "Walrus ivory", "lost history"))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	copyTo(t, backup, path) // the snapshot and log stay as they are
	os.Remove(path + "-wal")
	os.Remove(path + "-shm")
	s = openAt(t, path)
	if s.db.fromSnapshot {
		t.Fatal("the restored database was opened from the newer snapshot")
	}
	if _, err := os.Stat(path + ".index"); !os.IsNotExist(err) {
		t.Errorf("the snapshot that did not match is still there (%v)", err)
	}
	after := mustRemember(t, s, realm, rec(alice, "Walrus seal", "written after the restore"))
	image := crashImage(t, path) // killed before the next quiet period
	s.Close()
	s = openAt(t, image)
	got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "walrus", Limit: 10})
	if !slices.Contains(got, after[0]) {
		t.Errorf("recall walrus = %v (from a snapshot %v): the record written after the restore (%s) is missing",
			got, s.db.fromSnapshot, after[0])
	}
	if len(got) != 2 {
		t.Errorf("recall walrus = %v, want the restored record and the one written after", got)
	}
	checkIndex(t, s)
}

// restoreImage puts the database of backup (a crashImage) at path, as an
// operator restoring a backup does, and leaves the index files as they are.
func restoreImage(t *testing.T, backup, path string) {
	t.Helper()
	copyTo(t, backup, path)
	os.Remove(path + "-wal")
	os.Remove(path + "-shm")
	if _, err := os.Stat(backup + "-wal"); err == nil {
		copyTo(t, backup+"-wal", path+"-wal")
	}
}

// A restore that rebuilds starts a new history: the snapshot and log it
// writes from then on are never replayed onto a backup of the history it
// left, though the backup has the same generations and identity it had.
func TestRestoreNeverReplaysAnotherHistorysLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	dir := t.TempDir()
	b0, b1 := filepath.Join(dir, "b0.db"), filepath.Join(dir, "b1.db")
	s := openAt(t, path)
	mustRemember(t, s, realm, rec(alice, "Walrus", "tusks"))
	s.Close()
	copyTo(t, path, b0)
	s = openAt(t, path)
	left := mustRemember(t, s, realm, rec(alice, "Walrus narwhal", "only on the history left"))
	s.Close()
	copyTo(t, path, b1)

	restoreImage(t, b0, path) // beside a newer snapshot: rebuilt
	s = openAt(t, path)
	s.Close() // a snapshot at b0's generation
	s = openAt(t, path)
	taken := mustRemember(t, s, realm, rec(alice, "Walrus dugong", "only on the history taken"))
	image := crashImage(t, path) // the snapshot and a frame of the new history
	s.Close()

	restoreImage(t, b1, image)
	s = openAt(t, image)
	got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "walrus", Limit: 10})
	if !slices.Contains(got, left[0]) || slices.Contains(got, taken[0]) || len(got) != 2 {
		t.Errorf("recall walrus = %v (from a snapshot %v, %d frames replayed), want %s and the first record, not %s",
			got, s.db.fromSnapshot, s.db.replayed, left[0], taken[0])
	}
	checkIndex(t, s)
}

// A database restored to exactly its snapshot's generation, beside a log
// that goes on past it, leaves the history the log records: a backup
// taken later on that history must not be opened with the frames written
// after the restore.
func TestRestoreAtTheSnapshotStartsANewHistory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	b0 := filepath.Join(t.TempDir(), "b0.db")
	s := openAt(t, path)
	mustRemember(t, s, realm, rec(alice, "Walrus", "tusks"))
	s.Close() // a snapshot at generation 1
	copyTo(t, path, b0)
	s = openAt(t, path)
	left := mustRemember(t, s, realm, rec(alice, "Walrus narwhal", "only on the history left"))
	image := crashImage(t, path) // the snapshot and the narwhal's frame
	b1 := crashImage(t, path)    // a backup of the history left
	s.Close()

	restoreImage(t, b0, image) // at the snapshot's generation; the log goes on
	s = openAt(t, image)
	if s.db.snapGen != noSnapshot {
		t.Errorf("the restored database kept the snapshot of the history it left (generation %d)", s.db.snapGen)
	}
	taken := mustRemember(t, s, realm, rec(alice, "Walrus dugong", "only on the history taken"))
	image2 := crashImage(t, image)
	s.Close()

	restoreImage(t, b1, image2)
	s = openAt(t, image2)
	got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "walrus", Limit: 10})
	if !slices.Contains(got, left[0]) || slices.Contains(got, taken[0]) || len(got) != 2 {
		t.Errorf("recall walrus = %v (from a snapshot %v, %d frames replayed), want %s and the first record, not %s",
			got, s.db.fromSnapshot, s.db.replayed, left[0], taken[0])
	}
	checkIndex(t, s)
}

func TestOpenRefusesNewerOrForeignSchema(t *testing.T) {
	dir := t.TempDir()
	newer := filepath.Join(dir, "newer.db")
	db := rawDB(t, newer)
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	wantErr(t, "open a newer schema", configureErr(t, newer), nil, newer, "newer", "99")

	foreign := filepath.Join(dir, "foreign.db")
	db = rawDB(t, foreign)
	if _, err := db.Exec("CREATE TABLE records (x)"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	wantErr(t, "open a foreign database", configureErr(t, foreign), nil, foreign, "not a memhost database")
	// Refusals leave the file as it was.
	db = rawDB(t, foreign)
	var n int
	if err := db.QueryRow("SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil || n != 1 {
		t.Errorf("foreign database changed: %d objects, %v", n, err)
	}
}

func TestOpenCorruptFile(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte("this is not a database, just some text that is long enough to have a header"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "open a text file", configureErr(t, garbage), nil, garbage, "not an SQLite database")

	// A real database whose pages past the first are overwritten: the
	// schema still reads, the tables and the index do not.
	damaged := filepath.Join(dir, "damaged.db")
	s := openAt(t, damaged)
	var recs []sdk.Record
	for i := range 200 {
		recs = append(recs, rec(alice, "Record", string(rune('a'+i%26))+" body text for page filling "+time.Duration(i).String()))
	}
	mustRemember(t, s, realm, recs...)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(damaged)
	if err != nil {
		t.Fatal(err)
	}
	for i := 4096; i < len(data); i++ {
		data[i] = 0xA5
	}
	if err := os.WriteFile(damaged, data, 0o600); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "open a damaged database", configureErr(t, damaged), nil, damaged, "corrupt")
}

func TestOpenLockedDatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	release := holdWriteLock(t, path)
	err := configureErr(t, path, func(o *options) { o.busyTimeout = 100 * time.Millisecond })
	wantErr(t, "open a locked database", err, sdk.ErrConflict, path, "locked")
	release()
	if err := configureErr(t, path); err != nil {
		t.Errorf("open after the lock is released: %v", err)
	}
}

func TestSecondInstanceIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	first := openAt(t, path)
	id := mustRemember(t, first, realm, rec(alice, "Mine", "first instance"))[0]
	err := configureErr(t, path)
	wantErr(t, "second instance", err, sdk.ErrConflict, path+".lock", "another process")
	// The refused instance touched nothing: the first still works.
	if got := mustGet(t, first, realm, id); len(got) != 1 {
		t.Fatal("first instance lost its record")
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := openAt(t, path)
	if got := mustGet(t, second, realm, id); len(got) != 1 {
		t.Error("record missing after handover")
	}
}

func TestOpenUnwritablePath(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root can write anywhere")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	path := filepath.Join(dir, "memory.db")
	wantErr(t, "open in a read-only directory", configureErr(t, path), nil, path)
}

// TestConnectionMemory: the page caches and mmap window are the sizes
// chosen in open.go, which bound the plugin's resident memory.
func TestConnectionMemory(t *testing.T) {
	s, _ := open(t, nil)
	for _, tc := range []struct {
		name string
		db   *sql.DB
		want int
	}{{"writer", s.db.w, -writerCacheKiB}, {"reader", s.db.r, -readerCacheKiB}} {
		var cache, mmap int
		if err := tc.db.QueryRow("PRAGMA cache_size").Scan(&cache); err != nil {
			t.Fatal(err)
		}
		if err := tc.db.QueryRow("PRAGMA mmap_size").Scan(&mmap); err != nil {
			t.Fatal(err)
		}
		if cache != tc.want || mmap != 0 {
			t.Errorf("%s: cache_size %d, mmap_size %d; want %d and 0", tc.name, cache, mmap, tc.want)
		}
	}
}

// TestSnapshotOfStoreStatisticsIsRebuilt: a snapshot written by a build
// that took BM25's statistics over the whole store is not read; the index
// is rebuilt from the records, and a realm's scores are its own again:
// another realm's records, holding the query's words, move none of them.
func TestSnapshotOfStoreStatisticsIsRebuilt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	saved := indexOptions
	indexOptions.Stats = memindex.StatsIndex
	s := openAt(t, path)
	mustRemember(t, s, realm, rec(alice, "Walrus", "tusks on the ice"), rec(bob, "Otter", "a river otter eats on the ice"))
	var flood []sdk.Record
	for i := range 40 {
		flood = append(flood, rec(alice, fmt.Sprintf("Ice %d", i), "ice ice ice"))
	}
	mustRemember(t, s, "other", flood...)
	if err := s.Close(); err != nil {
		indexOptions = saved
		t.Fatal(err)
	}
	indexOptions = saved
	s = openAt(t, path)
	if s.db.fromSnapshot {
		t.Fatal("read a snapshot written with store-wide statistics")
	}
	q := sdk.RecallQuery{Realm: realm, Query: "ice otter", Limit: 10}
	if err := sameAsRef(mustRecall(t, s, q), refRecall(t, fts5Ref(t, s, realm), q, time.Now().UnixMilli())); err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotOfCrossScopeContextIsRebuilt: a snapshot of the index layout
// before thread context kept to a scope (sdk/index v5) holds context that
// joined another scope's records under the same thread id; it is not
// read, the index is rebuilt, and alice's record beside bob's in thread
// "conv-bob" is not found by his words.
func TestSnapshotOfCrossScopeContextIsRebuilt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path)
	b, a := rec(bob, "Trip", "we flew to zanzibar"), rec(alice, "Probe", "what else")
	b.Thread, a.Thread = &sdk.Thread{ID: "conv-bob", Seq: 0}, &sdk.Thread{ID: "conv-bob", Seq: 1}
	mustRemember(t, s, realm, b, a)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The index's own magic, after the sqlite header, names its layout.
	snap := path + ".index"
	data, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(data, []byte("memhost-index\x00v"))
	if at < 0 {
		t.Fatal("no index magic in the snapshot")
	}
	data[at+len("memhost-index\x00v")] = '5'
	if err := os.WriteFile(snap, data, 0o600); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	if s.db.fromSnapshot {
		t.Fatal("read a snapshot of the layout that joined thread context across scopes")
	}
	if hits := mustRecall(t, s, sdk.RecallQuery{Realm: realm, Query: "zanzibar", Scopes: []sdk.Scope{alice}}); len(hits) != 0 {
		t.Fatalf("alice's recall found %v through bob's words", hits)
	}
}

// TestWriteBehindAnotherWriterIsUnavailable: a write that waits past the
// busy timeout for another program holding the database's write lock (a
// backup, say) is unavailable, which the API answers 503 with a
// Retry-After, not an internal error; once the lock is gone, writes go on.
func TestWriteBehindAnotherWriterIsUnavailable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path, func(o *options) { o.busyTimeout = 100 * time.Millisecond })
	release := holdWriteLock(t, path)
	_, err := s.Remember(context.Background(), realm, []sdk.Record{rec(alice, "Held", "behind a lock")})
	if !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), "write lock") {
		t.Fatalf("a write behind another writer answered %v, want unavailable naming the lock", err)
	}
	release()
	mustRemember(t, s, realm, rec(alice, "Held", "behind a lock"))
}

// holdWriteLock has another program (not memhost: it does not take the
// lock file) hold the database's write lock until release.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db := rawDB(t, path)
	db.SetMaxOpenConns(1)
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	if _, err := tx.Exec("INSERT INTO ledger (realm, identity, session, record_id, surface, bytes, at_ms) VALUES ('a','b','','c','d',0,0)"); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenErrorSaysItOnce: a migration on a full disk logged "sqlite:
// open X: the disk is full: migrate to schema version 9: database or disk
// is full: storage full"; a read-only or locked store the same way. Each
// says its problem once, after what the open was doing, and still reads
// as its class.
func TestOpenErrorSaysItOnce(t *testing.T) {
	for _, c := range []struct {
		code    sqlite3.ErrNo
		class   error
		problem string
		words   []string // other words for it, which the line must not add
	}{
		{sqlite3.ErrFull, sdk.ErrNoSpace, "the disk is full", []string{"full"}},
		// Not "the data directory": a read-only -shm in a writable
		// directory reads the same (from an outside review).
		{sqlite3.ErrReadonly, sdk.ErrReadOnly, "the database or a file SQLite keeps beside it (-wal, -shm) is read-only, or their directory is", []string{"read-only", "readonly"}},
		{sqlite3.ErrBusy, sdk.ErrConflict, "the database is locked by another process", []string{"locked", "conflict"}},
		{sqlite3.ErrCorrupt, nil, "the database is corrupt", []string{"corrupt", "malformed"}},
		{sqlite3.ErrNotADB, nil, "not an SQLite database", []string{"not a database"}},
	} {
		err := describeOpenError("/data/memory.db", time.Second, fmt.Errorf("migrate to schema version 9: %w", sqlite3.Error{Code: c.code}))
		got := err.Error()
		if want := "sqlite: open /data/memory.db: migrate to schema version 9: " + c.problem; !strings.HasPrefix(got, want) {
			t.Errorf("%v: %q, want it to start %q", c.code, got, want)
		}
		for _, w := range c.words {
			if n := strings.Count(strings.ToLower(got), w); n > 1 || n == 1 && !strings.Contains(c.problem, w) {
				t.Errorf("%v: %q says %q %d times, want the problem once", c.code, got, w, n)
			}
		}
		if c.class != nil && !errors.Is(err, c.class) {
			t.Errorf("%v: %q no longer reads as %v", c.code, got, c.class)
		}
		var se sqlite3.Error
		if !errors.As(err, &se) || se.Code != c.code {
			t.Errorf("%v: %q no longer carries SQLite's error", c.code, got)
		}
	}
}
