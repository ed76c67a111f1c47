package compaction

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestConversationsBelongToTheirOwner: an agent acting as another
// identity neither compacts nor forgets a conversation, and learns of it
// only what it would of an absent one (no count, no owner); an
// application touches it.
func TestConversationsBelongToTheirOwner(t *testing.T) {
	ctx := context.Background()
	sqlStore, err := NewSQLStore(ctx, openDB(t, filepath.Join(t.TempDir(), "state.db")))
	if err != nil {
		t.Fatal(err)
	}
	bob := sdk.Identity{Realm: "default", ID: "bob"}
	for name, store := range map[string]Store{"memory": NewMemoryStore(), "sqlite": sqlStore} {
		t.Run(name, func(t *testing.T) {
			s := New(Options{Compactor: &fakeCompactor{}, Store: store})
			if _, err := s.Compact(ctx, req("a", "b", "c")); err != nil {
				t.Fatal(err)
			}
			st, _, err := store.Load(ctx, Key{"default", "c1"})
			if err != nil || st.Owner != "alice" {
				t.Fatalf("owner = %q (%v), want the first compacting identity", st.Owner, err)
			}
			for _, evicted := range [][]string{{"a", "b", "c", "d"}, {"x"}, {}} {
				r := Request{Identity: bob, Conversation: "c1", Evicted: msgs(evicted...)}
				_, err := s.Compact(ctx, r)
				if !errors.Is(err, sdk.ErrNotFound) || strings.Contains(err.Error(), "3") || strings.Contains(err.Error(), "alice") {
					t.Errorf("bob compacts alice's conversation with %d messages: %v, want not found with no count or owner", len(evicted), err)
				}
			}
			if err := s.Forget(ctx, "default", "c1", Access{Identity: "bob"}); err != nil {
				t.Fatalf("bob's forget answers as for an absent conversation: %v", err)
			}
			if got, found, _ := store.Load(ctx, Key{"default", "c1"}); !found || got.Watermark != 3 {
				t.Fatalf("bob's forget touched alice's conversation: %+v %v", got, found)
			}
			// An application compacts and forgets it; the owner stays.
			app := req("a", "b", "c", "d")
			app.Identity, app.Application = bob, true
			if res, err := s.Compact(ctx, app); err != nil || res.Absorbed != 4 {
				t.Fatalf("application compaction: %+v %v", res, err)
			}
			if got, _, _ := store.Load(ctx, Key{"default", "c1"}); got.Owner != "alice" {
				t.Errorf("an application's compaction changed the owner to %q", got.Owner)
			}
			if res, err := s.Compact(ctx, req("a", "b", "c", "d", "e")); err != nil || res.Absorbed != 5 {
				t.Fatalf("the owner compacts on: %+v %v", res, err)
			}
			if err := s.Forget(ctx, "default", "c1", Access{Identity: "alice"}); err != nil {
				t.Fatal(err)
			}
			if _, found, _ := store.Load(ctx, Key{"default", "c1"}); found {
				t.Fatal("the owner's forget left the conversation")
			}
			// A state of unknown owner (saved before owners were recorded)
			// is an application's alone.
			legacy := State{Watermark: 1, PrefixHash: hashChain("", msgs("a")), Artifact: sdk.Message{Role: ArtifactRole, Content: "old"}}
			if err := store.Save(ctx, Key{"default", "c2"}, 0, legacy); err != nil {
				t.Fatal(err)
			}
			old := req("a", "b")
			old.Conversation = "c2"
			if _, err := s.Compact(ctx, old); !errors.Is(err, sdk.ErrNotFound) {
				t.Errorf("agent compaction of an unowned conversation: %v, want not found", err)
			}
			if err := s.Forget(ctx, "default", "c2", Access{Identity: "alice"}); err != nil {
				t.Fatal(err)
			}
			if _, found, _ := store.Load(ctx, Key{"default", "c2"}); !found {
				t.Fatal("an agent forgot a conversation of unknown owner")
			}
			old.Application = true
			if res, err := s.Compact(ctx, old); err != nil || res.Absorbed != 2 {
				t.Errorf("application compaction of an unowned conversation: %+v %v", res, err)
			}
			if err := s.Forget(ctx, "default", "c2", Access{Application: true}); err != nil {
				t.Fatal(err)
			}
			if _, found, _ := store.Load(ctx, Key{"default", "c2"}); found {
				t.Fatal("an application's forget left the conversation")
			}
		})
	}
}

// TestSQLStoreAddsOwnerToOldTable: a table made before owners were
// recorded gains the column, and its rows read with an unknown owner.
func TestSQLStoreAddsOwnerToOldTable(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, filepath.Join(t.TempDir(), "state.db"))
	if _, err := db.ExecContext(ctx, `CREATE TABLE compaction_state (
		realm TEXT NOT NULL, conversation TEXT NOT NULL, watermark INTEGER NOT NULL, prefix_hash TEXT NOT NULL,
		artifact_role TEXT NOT NULL, artifact_content TEXT NOT NULL, updated_at_ms INTEGER NOT NULL,
		reset_identity TEXT NOT NULL DEFAULT '', reset_session TEXT NOT NULL DEFAULT '',
		PRIMARY KEY (realm, conversation));
		INSERT INTO compaction_state VALUES ('default', 'c1', 2, 'h', 'user', 'old summary', 0, '', '')`); err != nil {
		t.Fatal(err)
	}
	store, err := NewSQLStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	st, found, err := store.Load(ctx, Key{"default", "c1"})
	if err != nil || !found || st.Owner != "" || st.Watermark != 2 {
		t.Fatalf("old row = %+v %v %v, want it kept with an unknown owner", st, found, err)
	}
	st.Watermark, st.Owner = 3, "alice"
	if err := store.Save(ctx, Key{"default", "c1"}, 2, st); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := store.Load(ctx, Key{"default", "c1"}); got.Owner != "alice" {
		t.Errorf("owner after save = %q", got.Owner)
	}
}
