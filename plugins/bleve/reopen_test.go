package bleve

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestFailedReopenAnswersErrors: a write whose batch cannot be persisted
// reopens the realm's index from disk; when that fails too (here its
// directory was moved away while the plugin ran), later reads and writes
// answer errors, the plugin closes cleanly, and once the directory is
// back a write opens the index again. A second close of the closed index
// panicked ("close of closed channel"): at the next write and at Close.
func TestFailedReopenAnswersErrors(t *testing.T) {
	dir := t.TempDir()
	p := NewWithLogger(nil)
	if err := p.Configure(ctx, configJSON(dir)); err != nil {
		t.Fatal(err)
	}
	kept := remember(t, p, realm, rec("realm", "kept", "harbour crane one"))
	path := filepath.Join(dir, realm+indexSuffix)
	moved := filepath.Join(dir, "moved")
	if err := os.Rename(path, moved); err != nil {
		t.Fatal(err)
	}
	for i, body := range []string{"harbour crane two", "harbour crane three"} {
		if _, err := p.Remember(ctx, realm, []sdk.Record{rec("realm", "lost", body)}); err == nil {
			t.Fatalf("write %d with the index moved away succeeded", i)
		}
	}
	if _, err := p.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "harbour"}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("recall of a realm whose index could not be reopened: %v, want unavailable", err)
	}
	if err := os.Rename(moved, path); err != nil {
		t.Fatal(err)
	}
	remember(t, p, realm, rec("realm", "back", "harbour crane four"))
	if got := recallIDs(t, p, sdk.RecallQuery{Query: "harbour"}); len(got) != 2 || !slices.Contains(got, kept[0]) {
		t.Fatalf("recall after the index came back = %v, want %s and the new record", got, kept[0])
	}
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}
