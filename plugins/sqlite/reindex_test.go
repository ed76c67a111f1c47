package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestReindexKeepsWritesDuringRebuild: records written and forgotten while
// the rebuild reads the table (here, from its first progress report, which
// comes after the read began) are in the swapped-in index as they are in
// the table, in the reindexed realm and in another.
func TestReindexKeepsWritesDuringRebuild(t *testing.T) {
	for _, target := range []string{realm, ""} {
		t.Run("realm "+target, func(t *testing.T) {
			s, _ := open(t, nil)
			ctx := context.Background()
			kept := mustRemember(t, s, realm, rec(alice, "Walrus", "tusks"), rec(bob, "Otter", "river"))
			other := mustRemember(t, s, "other", rec(alice, "Walrus elsewhere", "tusks"))
			var during []string
			calls := 0
			n, err := s.Reindex(ctx, target, func(done, total int) {
				if calls++; calls > 1 {
					return
				}
				during = mustRemember(t, s, realm, rec(alice, "Walrus late", "tusks"))
				if _, err := s.Forget(ctx, realm, kept[1:]); err != nil {
					t.Error(err)
				}
				mustRemember(t, s, "other", rec(bob, "Heron", "wader"))
			})
			if err != nil {
				t.Fatal(err)
			}
			if want := map[string]int{realm: 2, "": 3}[target]; n != want {
				t.Errorf("Reindex(%q) = %d, want the %d records its read saw", target, n, want)
			}
			if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "walrus"}); !sameIDs(got, append([]string{kept[0]}, during...)) {
				t.Errorf("recall walrus = %v, want %v and the one written during the rebuild %v", got, kept[:1], during)
			}
			if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "otter"}); len(got) != 0 {
				t.Errorf("recall otter = %v: a record forgotten during the rebuild is back", got)
			}
			if got := recallIDs(t, s, sdk.RecallQuery{Realm: "other", Query: "walrus"}); !slices.Equal(got, other) {
				t.Errorf("other realm: recall walrus = %v, want %v", got, other)
			}
			if got := recallIDs(t, s, sdk.RecallQuery{Realm: "other", Query: "heron"}); len(got) != 1 {
				t.Errorf("other realm: recall heron = %v, want the record written during the rebuild", got)
			}
			checkIndex(t, s)
		})
	}
}

// TestReindexRewritesSnapshot: a reindex replaces the snapshot file with
// its own index, which the next open reads instead of rebuilding; a
// garbled snapshot is healed without a restart.
func TestReindexRewritesSnapshot(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.db")
	s := openAt(t, path)
	ids := mustRemember(t, s, realm, rec(alice, "Walrus", "tusks"), rec(bob, "Otter", "river"))
	if err := os.WriteFile(path+".index", []byte("not a snapshot"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Reindex(context.Background(), "", nil); err != nil || n != 2 {
		t.Fatalf("Reindex = %d, %v; want 2", n, err)
	}
	// Kill-like: the store is dropped without Close writing a snapshot.
	s.db.maint.stop()
	s.db.maint = nil
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	if !s.db.fromSnapshot {
		t.Fatal("the open after a reindex rebuilt the index instead of reading the reindex's snapshot")
	}
	if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "walrus otter"}); !sameIDs(got, ids) {
		t.Errorf("recall after reopen = %v, want %v", got, ids)
	}
	checkIndex(t, s)
}

// TestReindexCanceledKeepsIndex: a reindex canceled part-way answers the
// cancellation and leaves the index it would have replaced.
func TestReindexCanceledKeepsIndex(t *testing.T) {
	s, _ := open(t, nil)
	ids := mustRemember(t, s, realm, rec(alice, "Walrus", "tusks"))
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := s.Reindex(ctx, realm, func(int, int) { cancel() }); err == nil {
		t.Fatal("a reindex canceled at its first report succeeded")
	}
	if got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "walrus"}); !slices.Equal(got, ids) {
		t.Errorf("recall after a canceled reindex = %v, want %v", got, ids)
	}
	if s.db.tap != nil {
		t.Error("a canceled reindex left its tap collecting writes")
	}
}

func sameIDs(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
