package sessionstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/statedb"
)

// crash stops s as kill -9 would: no merge, the journal left as it is.
func crash(t *testing.T, s *Store) {
	t.Helper()
	stopMerging(t, s)
	if err := s.lock(ctx); err != nil {
		t.Fatal(err)
	}
	s.journal.close()
	s.unlock()
}

// rows answers how many sessions of realm the table holds, without a merge.
func rows(t *testing.T, db *statedb.DB, realm string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(ctx, []any{&n}, `SELECT count(*) FROM sessions WHERE realm = ?`, realm); err != nil {
		t.Fatal(err)
	}
	return n
}

// update runs one visit that must succeed.
func update(t *testing.T, s *Store, k coordinator.SessionKey, fn func(*coordinator.SessionState) bool) {
	t.Helper()
	if err := s.Update(ctx, k, fn); err != nil {
		t.Fatal(err)
	}
}

// reopen opens a second store over db, as the next start would.
func reopen(t *testing.T, db *statedb.DB, opts Options) *Store {
	t.Helper()
	s, err := Open(ctx, db, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(ctx) })
	return s
}

func journalPath(dir string) string { return filepath.Join(dir, JournalName) }

// TestJournalCarriesVisitsAcrossACrash: visits acknowledged but not yet
// merged into the table survive a crash; the next start replays them,
// the last state of each session winning, and counts them in the bound.
func TestJournalCarriesVisitsAcrossACrash(t *testing.T) {
	dir := t.TempDir()
	s, db := openStore(t, dir, Options{PerRealm: 3})
	for i := range 3 {
		for turn := range 2 {
			update(t, s, key("r", fmt.Sprint("s", i)), inject(10, fmt.Sprintf("id-%d-%d", i, turn)))
		}
	}
	crash(t, s)
	// The realm's first new session counts the realm in the table and is
	// written there; the others only reach the journal.
	if n := rows(t, db, "r"); n != 1 {
		t.Fatalf("the table holds %d sessions before the replay, want 1: the test does not reach the journal", n)
	}
	s = reopen(t, db, Options{PerRealm: 3, CacheSize: 1}) // reads past the cache: the table and the known keys
	if n := count(t, s, "r"); n != 3 {
		t.Fatalf("after the replay the table holds %d sessions, want 3", n)
	}
	for i := range 3 {
		st := get(t, s, key("r", fmt.Sprint("s", i)))
		if want := []string{fmt.Sprintf("id-%d-0", i), fmt.Sprintf("id-%d-1", i)}; st.InjectedBytes != 20 || !slices.Equal(st.InjectedIDs, want) {
			t.Fatalf("session s%d after the crash: %d bytes, ids %v; want 20 and %v", i, st.InjectedBytes, st.InjectedIDs, want)
		}
	}
	// The replayed sessions count: a fourth evicts one of them.
	update(t, s, key("r", "s3"), inject(1, "x"))
	if n := count(t, s, "r"); n > 3 {
		t.Fatalf("the realm holds %d sessions, over its bound of 3", n)
	}
}

// TestJournalTornTailIsDropped: a record cut short (a write a full disk
// stopped, or a crash inside it) ends the replay; what precedes it is
// kept and the journal is usable again.
func TestJournalTornTailIsDropped(t *testing.T) {
	dir := t.TempDir()
	s, db := openStore(t, dir, Options{})
	update(t, s, key("r", "kept"), inject(10, "a"))
	crash(t, s)
	f, err := os.OpenFile(journalPath(dir), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := binary.LittleEndian.AppendUint32(nil, 500) // a length promising more than follows
	torn = append(torn, 0, 0, 0, 0, '{', '"')
	if _, err := f.Write(torn); err != nil {
		t.Fatal(err)
	}
	f.Close()
	s = reopen(t, db, Options{})
	if st := get(t, s, key("r", "kept")); st.InjectedBytes != 10 {
		t.Fatalf("the record before the torn one was lost: %+v", st)
	}
	update(t, s, key("r", "after"), inject(5, "b"))
	crash(t, s)
	s = reopen(t, db, Options{})
	if st := get(t, s, key("r", "after")); st.InjectedBytes != 5 {
		t.Fatalf("a visit after the torn record was lost: %+v", st)
	}
}

// TestMergedJournalIsNotReplayed: a journal whose merge committed but
// which could not be started over holds only states the table has, some
// older than what was written since. Its epoch marks it merged; replaying
// it would put an old state back.
func TestMergedJournalIsNotReplayed(t *testing.T) {
	dir := t.TempDir()
	s, db := openStore(t, dir, Options{})
	// The realm's first new session is written to the table (it counts
	// the realm); k's visits then reach the journal.
	update(t, s, key("r", "first"), inject(1, "x"))
	k := key("r", "s")
	update(t, s, k, inject(10, "old"))
	stale, err := os.ReadFile(journalPath(dir)) // the journal holding the old state
	if err != nil {
		t.Fatal(err)
	}
	if len(stale) <= journalHeaderSize {
		t.Fatal("the journal holds no record: the test does not reach it")
	}
	count(t, s, "r") // merges
	update(t, s, k, inject(10, "new"))
	count(t, s, "r")
	crash(t, s)
	if err := os.WriteFile(journalPath(dir), stale, 0o600); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, db, Options{})
	if st := get(t, s, k); !slices.Equal(st.InjectedIDs, []string{"old", "new"}) {
		t.Fatalf("after a restart over a merged journal the session holds %v, want [old new]", st.InjectedIDs)
	}
}

// TestCloseMergesTheJournal: a store closed cleanly leaves every state in
// the table and an empty journal.
func TestCloseMergesTheJournal(t *testing.T) {
	dir := t.TempDir()
	s, db := openStore(t, dir, Options{})
	update(t, s, key("r", "s"), inject(10, "a"))
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
	if n := rows(t, db, "r"); n != 1 {
		t.Fatalf("after Close the table holds %d sessions, want 1", n)
	}
	fi, err := os.Stat(journalPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != int64(journalHeaderSize) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("after Close the journal is %d bytes, mode %v; want only its header, 0600", fi.Size(), fi.Mode().Perm())
	}
}

// TestJournalDeletedWhileRunningIsMadeAgain: appends to a journal
// unlinked under the host would be lost at the next start. The next visit
// is written to the table instead and the journal made again at its path,
// so later visits are replayed from it.
func TestJournalDeletedWhileRunningIsMadeAgain(t *testing.T) {
	dir := t.TempDir()
	s, db := openStore(t, dir, Options{})
	update(t, s, key("r", "first"), inject(1, "x"))
	if err := os.Remove(journalPath(dir)); err != nil {
		t.Fatal(err)
	}
	update(t, s, key("r", "s"), inject(10, "a"))
	if _, err := os.Stat(journalPath(dir)); err != nil {
		t.Fatalf("the journal was not made again: %v", err)
	}
	update(t, s, key("r", "s"), inject(10, "b"))
	crash(t, s)
	s = reopen(t, db, Options{})
	if st := get(t, s, key("r", "s")); !slices.Equal(st.InjectedIDs, []string{"a", "b"}) {
		t.Fatalf("after a crash the session holds %v, want [a b]", st.InjectedIDs)
	}
}

// TestVisitsFailOnceTheDatabaseIsGone: with the state database deleted
// under the host, the first merge finds it and later visits fail as a
// write to the table would, rather than gathering in the journal.
func TestVisitsFailOnceTheDatabaseIsGone(t *testing.T) {
	dir := t.TempDir()
	s, _ := openStore(t, dir, Options{})
	update(t, s, key("r", "first"), inject(1, "x"))
	update(t, s, key("r", "s"), inject(10, "a"))
	if err := os.Remove(filepath.Join(dir, statedb.FileName)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Len(ctx, "r"); !errors.Is(err, statedb.ErrReadOnly) {
		t.Fatalf("a merge into a deleted database answered %v, want ErrReadOnly", err)
	}
	if err := s.Update(ctx, key("r", "s"), inject(10, "b")); !errors.Is(err, statedb.ErrReadOnly) {
		t.Fatalf("a visit after the database went answered %v, want ErrReadOnly", err)
	}
}

// TestRefreshOfADirtySessionIsKept: a read refreshing a session's idle
// clock while the session waits to be merged; after the merge the
// session must still count from the refresh, not from its last write,
// whether the journal or, when it refuses, the table took the refresh.
func TestRefreshOfADirtySessionIsKept(t *testing.T) {
	for _, refuses := range []bool{false, true} {
		t.Run(fmt.Sprintf("journal refuses %v", refuses), func(t *testing.T) {
			clk := newClock()
			s, _ := openStore(t, t.TempDir(), Options{TTL: 16 * time.Minute, Now: clk.now})
			stopMerging(t, s)
			update(t, s, key("r", "first"), inject(1, "x"))
			k := key("r", "s")
			update(t, s, k, inject(10, "a"))
			if refuses {
				refuseJournal(t, s)
			}
			clk.advance(2 * time.Minute) // past the refresh interval, TTL/16
			get(t, s, k)                 // refreshes while dirty
			count(t, s, "r")             // merges
			clk.advance(15 * time.Minute)
			if st := get(t, s, k); st.InjectedBytes != 10 {
				t.Fatalf("a session read 15 minutes ago (TTL 16) was taken as idle: %+v", st)
			}
		})
	}
}

// TestStartAfterACrashOnAFullDisk: a journal left by a crash is taken
// back at the start without writing, so a host restarted on a full disk
// serves (its sessions as they were) and writes them once there is room.
func TestStartAfterACrashOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	s, db := openStore(t, dir, Options{})
	update(t, s, key("r", "first"), inject(1, "x"))
	for i := range 50 {
		update(t, s, key("r", fmt.Sprint("s", i)), inject(1, strings.Repeat("y", 4000)))
	}
	crash(t, s)
	var pages, got int
	if err := db.QueryRow(ctx, []any{&pages}, "PRAGMA page_count"); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, []any{&got}, fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, db, Options{})
	if err != nil {
		t.Fatalf("a start on a full disk: %v", err)
	}
	defer s.Close(ctx)
	if st := get(t, s, key("r", "s7")); st.InjectedBytes != 1 {
		t.Fatalf("a session from the journal reads %+v after a start on a full disk", st)
	}
	if _, err := s.Len(ctx, "r"); !errors.Is(err, statedb.ErrStorageFull) {
		t.Fatalf("a merge on the full disk answered %v, want ErrStorageFull: the test does not fill it", err)
	}
	if err := db.QueryRow(ctx, []any{&got}, "PRAGMA max_page_count = 1000000"); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "r"); n != 51 {
		t.Fatalf("once there is room the table holds %d sessions, want 51", n)
	}
}

// TestDamagedJournalIsRefused: a whole record that fails its checksum is
// damage, not a write cut short: the start says so, and leaves the file
// for the operator rather than drop every session after it.
func TestDamagedJournalIsRefused(t *testing.T) {
	dir := t.TempDir()
	s, db := openStore(t, dir, Options{})
	update(t, s, key("r", "first"), inject(1, "x"))
	for _, id := range []string{"a", "b", "c"} {
		update(t, s, key("r", id), inject(1, id))
	}
	crash(t, s)
	data, err := os.ReadFile(journalPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	data[journalHeaderSize+recordHeaderSize+3] ^= 0x20 // inside the first record
	if err := os.WriteFile(journalPath(dir), data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, db, Options{})
	if err == nil || !strings.Contains(err.Error(), "damaged at byte") {
		t.Fatalf("a start over a damaged journal answered %v, want it refused as damaged", err)
	}
	if after, _ := os.ReadFile(journalPath(dir)); !bytes.Equal(after, data) {
		t.Fatal("the damaged journal was changed")
	}
}

// TestCloseKeepsItsDeadline: Close waits for a merge in progress, which
// waits for the store's turn, only until its own deadline; a later Close
// still merges.
func TestCloseKeepsItsDeadline(t *testing.T) {
	s, db := openStore(t, t.TempDir(), Options{})
	update(t, s, key("r", "first"), inject(1, "x"))
	update(t, s, key("r", "s"), inject(1, "a"))
	if err := s.lock(ctx); err != nil { // a visit holding the turn
		t.Fatal(err)
	}
	time.Sleep(2 * mergeEvery) // the merge loop now waits for the turn
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Close(short) }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Close answered %v, want its deadline", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited past its deadline")
	}
	s.unlock()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rows(t, db, "r"); n != 2 {
		t.Fatalf("after the second Close the table holds %d sessions, want 2", n)
	}
}

// stopMerging stops the timed merges, so a test decides when one runs.
func stopMerging(t *testing.T, s *Store) {
	t.Helper()
	s.closeOnce.Do(func() { close(s.stop) })
	<-s.done
}

// TestForeignJournalIsRefused: a file of the journal's name that is not
// one stops the start rather than being emptied.
func TestForeignJournalIsRefused(t *testing.T) {
	dir := t.TempDir()
	db, err := statedb.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := os.WriteFile(journalPath(dir), []byte("someone else's notes, not a journal"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, db, Options{}); err == nil {
		t.Fatal("a store opened over a file that is not a journal")
	}
	if data, _ := os.ReadFile(journalPath(dir)); string(data) != "someone else's notes, not a journal" {
		t.Fatalf("the foreign file was changed to %q", data)
	}
}

// TestHeaderCutShortIsEmpty: from an outside review. A journal whose
// header was cut off while being written reads as empty, wherever the
// cut fell; a cut inside the epoch stopped the host from starting ("is
// not a session journal").
func TestHeaderCutShortIsEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j, _, err := openJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.restart(7); err != nil {
		t.Fatal(err)
	}
	j.close()
	full, err := os.ReadFile(path)
	if err != nil || len(full) != journalHeaderSize {
		t.Fatalf("header of %d bytes (%v), want %d", len(full), err, journalHeaderSize)
	}
	for n := 1; n < journalHeaderSize; n++ {
		if err := os.WriteFile(path, full[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		j, entries, err := openJournal(path)
		if err != nil || j.epoch != 0 || len(entries) != 0 {
			t.Fatalf("a header cut to %d bytes: epoch %v, %d entries, %v; want an empty journal", n, j, len(entries), err)
		}
		j.close()
	}
}

// FuzzJournalRecords: replay reads any bytes without failing, and what it
// reads back is a run of whole records at the head.
func FuzzJournalRecords(f *testing.F) {
	var j journal
	var seed []byte
	for _, e := range []journalEntry{
		{Realm: "r", Identity: "alice", Session: "s", Touched: 1, State: []byte(`{"bytes":1,"sweep":null}`)},
		{Realm: "r", Identity: "bob", Session: "t", Touched: 2, State: []byte(`{"bytes":2,"ids":["a"],"sweep":[]}`)},
	} {
		rec, err := j.encode(e)
		if err != nil {
			f.Fatal(err)
		}
		seed = append(seed, rec...)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, n := decodeRecords(data)
		_ = torn(data[n:])
		if n < 0 || n > len(data) {
			t.Fatalf("decoded %d bytes of %d", n, len(data))
		}
		again, m := decodeRecords(data[:n])
		if m != n || len(again) != len(entries) {
			t.Fatalf("the head decoded as %d entries in %d bytes, alone as %d in %d", len(entries), n, len(again), m)
		}
		for _, e := range entries {
			if !json.Valid(e.State) {
				t.Fatalf("a replayed state is not JSON: %q", e.State)
			}
		}
	})
}

var _ coordinator.SessionStore = (*Store)(nil)
