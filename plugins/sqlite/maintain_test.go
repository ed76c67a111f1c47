package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

func integrityCheck(t *testing.T, s *Store) {
	t.Helper()
	var res string
	if err := s.db.r.QueryRow("PRAGMA quick_check").Scan(&res); err != nil || res != "ok" {
		t.Errorf("quick_check = %q, %v", res, err)
	}
}

// waitSnapshot waits for the maintainer to snapshot the current index.
func waitSnapshot(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		gen, err := indexGen(context.Background(), s.db.r)
		if err != nil {
			t.Fatal(err)
		}
		s.db.wmu.Lock()
		done := s.db.snapGen == gen
		s.db.wmu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot of generation %d", gen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestQuietStoreSnapshotsIndex: once writes go quiet the maintainer
// snapshots the index, so a process killed afterwards (no Close) reopens
// from it with the same answers, writes arriving meanwhile included.
func TestQuietStoreSnapshotsIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path, func(o *options) { o.maintainIdle = 10 * time.Millisecond })
	ctx := context.Background()
	c := newCorpus()
	written := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 1500 && err == nil; i += 50 {
			_, err = s.Remember(ctx, realm, benchRecords(i, 50))
		}
		written <- err
	}()
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	waitSnapshot(t, s)
	before := make([][]sdk.Hit, 20)
	for i := range before {
		before[i] = mustRecall(t, s, sdk.RecallQuery{Realm: realm, Query: c.query(i, 1500)})
	}
	// Reopen from the snapshot without closing (as after kill -9).
	gen := s.db.snapGen
	s.db.maint.stop()
	s.db.maint = nil
	s.db.ix = nil // a Close would write another snapshot
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	if s.db.snapGen != gen {
		t.Fatalf("reopen read snapshot generation %d, want %d", s.db.snapGen, gen)
	}
	for i, want := range before {
		got := mustRecall(t, s, sdk.RecallQuery{Realm: realm, Query: c.query(i, 1500)})
		if !slices.EqualFunc(got, want, func(a, b sdk.Hit) bool { return a.Record.ID == b.Record.ID && a.Score == b.Score }) {
			t.Errorf("query %d answers changed across the snapshot", i)
		}
	}
	integrityCheck(t, s)
}

// TestSnapshotsAndWritesInterleave snapshots while writes arrive: both
// succeed and every write is recalled.
func TestSnapshotsAndWritesInterleave(t *testing.T) {
	s, _ := open(t, nil)
	ctx := context.Background()
	written := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 20 && err == nil; i++ {
			_, err = s.Remember(ctx, realm, []sdk.Record{rec(alice, fmt.Sprintf("interleaved%d", i), "during the snapshot")})
		}
		written <- err
	}()
	for range 5 {
		if err := s.db.snapshot(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "snapshot", Limit: 50}); len(got) != 20 {
		t.Errorf("%d of 20 records written during snapshots recalled", len(got))
	}
	checkIndex(t, s)
}
