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
	if _, err := s.db.w.Exec("INSERT INTO records_fts (records_fts, rank) VALUES ('integrity-check', 0)"); err != nil {
		t.Errorf("FTS integrity check: %v", err)
	}
	var res string
	if err := s.db.r.QueryRow("PRAGMA quick_check").Scan(&res); err != nil || res != "ok" {
		t.Errorf("quick_check = %q, %v", res, err)
	}
}

// TestBackgroundMergeKeepsResults lets the maintainer merge an index built
// from many small commits, and checks it merged to one segment, in the
// background, without changing any answer.
func TestBackgroundMergeKeepsResults(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path)
	ctx := context.Background()
	c := newCorpus()
	for i := 0; i < 1500; i += 50 {
		mustRemember(t, s, realm, benchRecords(i, 50)...)
	}
	ids := mustRemember(t, s, realm, benchRecords(2000, 10)...)
	if _, err := s.Forget(ctx, realm, ids); err != nil {
		t.Fatal(err)
	}
	before := make([][]sdk.Hit, 20)
	for i := range before {
		before[i] = mustRecall(t, s, sdk.RecallQuery{Realm: realm, Query: c.query(i, 1500)})
	}
	if worked, err := s.db.maint.step(ctx); err != nil || !worked {
		t.Fatalf("a fragmented index had no merge work: %v, %v", worked, err)
	}
	// A restart with a short quiet period lets the maintainer run: it
	// looks once after start, finds the index fragmented, and merges it.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, func(o *options) { o.maintainIdle = 10 * time.Millisecond })
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.db.maint.mu.Lock()
		pending := s.db.maint.pending
		s.db.maint.mu.Unlock()
		if pending == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("background merge did not finish: %d rows pending", pending)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if worked, err := s.db.maint.step(ctx); err != nil || worked {
		t.Errorf("merge work left after the background merge: %v, %v", worked, err)
	}
	for i, want := range before {
		got := mustRecall(t, s, sdk.RecallQuery{Realm: realm, Query: c.query(i, 1500)})
		if !slices.EqualFunc(got, want, func(a, b sdk.Hit) bool { return a.Record.ID == b.Record.ID && closeTo(a.Score, b.Score) }) {
			t.Errorf("query %d answers changed after the merge", i)
		}
	}
	integrityCheck(t, s)
}

// TestMergeAndWritesInterleave merges while writes arrive: both succeed,
// and the index stays whole.
func TestMergeAndWritesInterleave(t *testing.T) {
	s, _ := open(t, nil)
	ctx := context.Background()
	for i := 0; i < 400; i += 20 {
		mustRemember(t, s, realm, benchRecords(i, 20)...)
	}
	written := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 20 && err == nil; i++ {
			_, err = s.Remember(ctx, realm, []sdk.Record{rec(alice, fmt.Sprintf("interleaved%d", i), "during the merge")})
		}
		written <- err
	}()
	for range 3 {
		if _, err := s.db.maint.optimize(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if _, err := s.db.maint.optimize(ctx, false); err != nil {
		t.Fatal(err)
	}
	if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "merge", Limit: 50}); len(got) != 20 {
		t.Errorf("%d of 20 records written during the merge recalled", len(got))
	}
	integrityCheck(t, s)
}
