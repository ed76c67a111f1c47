package compaction

import (
	"context"
	"path/filepath"
	"sort"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

var bob = sdk.Identity{Realm: "default", ID: "bob"}

// TestConversationsAreKeyedByIdentity: two identities using one
// conversation id each have their own summary and watermark; neither's
// compaction is refused or shaped by the other's, and a forget by one
// leaves the other's. An application forgets one identity's or, naming
// none, every identity's.
func TestConversationsAreKeyedByIdentity(t *testing.T) {
	ctx := context.Background()
	for name, store := range bothStores(t) {
		t.Run(name, func(t *testing.T) {
			s := New(Options{Compactor: &fakeCompactor{}, Store: store})
			compact := func(id sdk.Identity, wantAbsorbed, wantCompacted int, evicted ...string) {
				t.Helper()
				res, err := s.Compact(ctx, Request{Identity: id, Conversation: "c1", Evicted: msgs(evicted...)})
				if err != nil || res.Absorbed != wantAbsorbed || res.Compacted != wantCompacted {
					t.Fatalf("%s compacts %v: %+v %v, want absorbed %d compacted %d", id.ID, evicted, res, err, wantAbsorbed, wantCompacted)
				}
			}
			has := func(id string) bool {
				t.Helper()
				_, found, err := store.Load(ctx, Key{"default", id, "c1"})
				if err != nil {
					t.Fatal(err)
				}
				return found
			}
			compact(alice, 3, 3, "a", "b", "c")
			// bob claims the same id: his own conversation, from nothing.
			compact(bob, 1, 1, "x")
			compact(alice, 4, 1, "a", "b", "c", "d")
			compact(bob, 2, 1, "x", "y")
			if err := s.Forget(ctx, "default", "c1", Access{Identity: "bob"}); err != nil {
				t.Fatal(err)
			}
			if !has("alice") || has("bob") {
				t.Fatalf("bob's forget: alice's kept %v, bob's kept %v; want only bob's gone", has("alice"), has("bob"))
			}
			compact(alice, 5, 1, "a", "b", "c", "d", "e")
			compact(bob, 1, 1, "x")
			if err := s.Forget(ctx, "default", "c1", Access{Identity: "alice", Application: true}); err != nil {
				t.Fatal(err)
			}
			if has("alice") || !has("bob") {
				t.Fatalf("application forget naming alice: alice's kept %v, bob's kept %v", has("alice"), has("bob"))
			}
			compact(alice, 1, 1, "a")
			if err := s.Forget(ctx, "default", "c1", Access{Application: true}); err != nil {
				t.Fatal(err)
			}
			if has("alice") || has("bob") {
				t.Fatal("application forget naming no identity left a state")
			}
		})
	}
}

// TestLegacyConversationIsAnApplications: a state saved before identities
// were recorded (identity "") is never reached by an agent, whose call
// starts its own conversation; an application's compaction for an
// identity continues it as that identity's.
func TestLegacyConversationIsAnApplications(t *testing.T) {
	ctx := context.Background()
	for name, store := range bothStores(t) {
		t.Run(name, func(t *testing.T) {
			s := New(Options{Compactor: &fakeCompactor{}, Store: store})
			legacyKey := Key{Realm: "default", Conversation: "c2"}
			legacy := State{Watermark: 1, PrefixHash: hashChain("", msgs("a")), Artifact: sdk.Message{Role: ArtifactRole, Content: "old"}}
			if err := store.Save(ctx, legacyKey, 0, legacy); err != nil {
				t.Fatal(err)
			}
			if res, err := s.Compact(ctx, Request{Identity: alice, Conversation: "c2", Evicted: msgs("x")}); err != nil || res.Absorbed != 1 || res.Compacted != 1 {
				t.Fatalf("agent compaction beside a legacy state: %+v %v, want its own conversation", res, err)
			}
			if got, found, _ := store.Load(ctx, legacyKey); !found || got.Watermark != 1 {
				t.Fatalf("an agent's compaction touched the legacy state: %+v %v", got, found)
			}
			app := Request{Identity: bob, Conversation: "c2", Evicted: msgs("a", "b"), Application: true}
			if res, err := s.Compact(ctx, app); err != nil || res.Absorbed != 2 || res.Compacted != 1 {
				t.Fatalf("application compaction of the legacy state: %+v %v, want it continued", res, err)
			}
			if _, found, _ := store.Load(ctx, legacyKey); found {
				t.Error("the adopted legacy state is still stored")
			}
			if got, found, _ := store.Load(ctx, Key{"default", "bob", "c2"}); !found || got.Watermark != 2 {
				t.Errorf("bob's state after adoption: %+v %v", got, found)
			}
			if err := s.Forget(ctx, "default", "c2", Access{Application: true}); err != nil {
				t.Fatal(err)
			}
			if ids, err := store.Identities(ctx, "default", "c2"); err != nil || len(ids) != 0 {
				t.Fatalf("after the application's forget: %v %v", ids, err)
			}
		})
	}
}

// TestSQLStoreMigratesToIdentityKey: tables made by earlier versions (no
// owner column; an owner column) are keyed by identity after the upgrade:
// an owned row becomes its owner's, an unowned one the legacy identity's,
// and every row keeps its summary and pending reset.
func TestSQLStoreMigratesToIdentityKey(t *testing.T) {
	for _, tc := range []struct {
		name, table, rows string
		want              map[Key]int
	}{
		{"before owners", `CREATE TABLE compaction_state (
			realm TEXT NOT NULL, conversation TEXT NOT NULL, watermark INTEGER NOT NULL, prefix_hash TEXT NOT NULL,
			artifact_role TEXT NOT NULL, artifact_content TEXT NOT NULL, updated_at_ms INTEGER NOT NULL,
			reset_identity TEXT NOT NULL DEFAULT '', reset_session TEXT NOT NULL DEFAULT '',
			PRIMARY KEY (realm, conversation))`,
			`INSERT INTO compaction_state VALUES ('default', 'c1', 2, 'h', 'user', 'old summary', 0, 'alice', 's1')`,
			map[Key]int{{"default", "", "c1"}: 2}},
		{"with owners", `CREATE TABLE compaction_state (
			realm TEXT NOT NULL, conversation TEXT NOT NULL, watermark INTEGER NOT NULL, prefix_hash TEXT NOT NULL,
			artifact_role TEXT NOT NULL, artifact_content TEXT NOT NULL, updated_at_ms INTEGER NOT NULL,
			reset_identity TEXT NOT NULL DEFAULT '', reset_session TEXT NOT NULL DEFAULT '', owner TEXT NOT NULL DEFAULT '',
			PRIMARY KEY (realm, conversation))`,
			`INSERT INTO compaction_state VALUES ('default', 'c1', 2, 'h', 'user', 'old summary', 0, 'alice', 's1', 'alice'),
				('default', 'c2', 5, 'h', 'user', 'unowned', 0, '', '', '')`,
			map[Key]int{{"default", "alice", "c1"}: 2, {"default", "", "c2"}: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "state.db")
			db := openDB(t, path)
			if _, err := db.ExecContext(ctx, tc.table+`; `+tc.rows); err != nil {
				t.Fatal(err)
			}
			if _, err := NewSQLStore(ctx, db); err != nil {
				t.Fatal(err)
			}
			// Opening again finds the table migrated.
			store, err := NewSQLStore(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			for key, wm := range tc.want {
				st, found, err := store.Load(ctx, key)
				if err != nil || !found || st.Watermark != wm {
					t.Errorf("%v after the upgrade = %+v %v %v, want watermark %d", key, st, found, err, wm)
				}
			}
			pending, err := store.PendingResets(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for key, p := range pending {
				if p != (PendingReset{Identity: "alice", Session: "s1"}) || key.Conversation != "c1" {
					t.Errorf("pending reset %v %+v", key, p)
				}
			}
			if len(pending) != 1 {
				t.Errorf("%d pending resets after the upgrade, want 1", len(pending))
			}
			// Another identity now has its own row under the same id.
			if err := store.Save(ctx, Key{"default", "bob", "c1"}, 0, State{Watermark: 1}); err != nil {
				t.Fatal(err)
			}
			ids, err := store.Identities(ctx, "default", "c1")
			sort.Strings(ids)
			if err != nil || len(ids) != 2 || ids[1] != "bob" {
				t.Errorf("identities of c1 = %v %v", ids, err)
			}
		})
	}
}

// TestArchivesAreKeyedByIdentity: two identities' episodes of one
// conversation id have distinct ids, so one's archive write neither
// refuses nor clears the other's, and one's forget (an uncommitted
// compaction's leftovers included) leaves the other's; episodes archived
// before ids carried the identity are forgotten by their own identity
// only.
func TestArchivesAreKeyedByIdentity(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	s := archived(p, ArchivePolicy{Enabled: true}, Options{})
	ctx := context.Background()
	// alice's compaction archived and never committed: no state, two
	// episodes.
	if err := s.opts.Archive.Archive(ctx, alice, "c1", 0, 2, []Episode{{Seq: 0, Message: sdk.Message{Role: "user", Content: "alice 0"}}, {Seq: 1, Message: sdk.Message{Role: "user", Content: "alice 1"}}}); err != nil {
		t.Fatal(err)
	}
	// Episodes of alice's stored before ids carried the identity.
	p.MustAdd("default", sdk.Record{ID: legacyEpisodeID("default", "c2", 0), Scope: "identity:alice", Kind: sdk.KindEpisode, Title: "legacy", Body: "alice legacy"})
	if _, err := s.Compact(ctx, Request{Identity: bob, Conversation: "c1", Evicted: msgs("bob 0")}); err != nil {
		t.Fatal(err)
	}
	for _, forget := range []struct {
		conv string
		as   Access
	}{{"c1", Access{Identity: "bob"}}, {"c2", Access{Identity: "bob"}}} {
		if err := s.Forget(ctx, "default", forget.conv, forget.as); err != nil {
			t.Fatal(err)
		}
	}
	if got := episodeBodies(t, p); len(got) != 3 || got[0] != "alice 0" || got[1] != "alice 1" || got[2] != "alice legacy" {
		t.Fatalf("episodes after bob's compaction and forgets = %q, want alice's three", got)
	}
	for _, conv := range []string{"c1", "c2"} {
		if err := s.Forget(ctx, "default", conv, Access{Identity: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := episodeBodies(t, p); len(got) != 0 {
		t.Fatalf("episodes after alice's forgets = %q, want none", got)
	}
}

// episodeBodies answers the bodies of every live episode, sorted.
func episodeBodies(t *testing.T, p *coordinatortest.Provider) []string {
	t.Helper()
	page, err := p.Export(context.Background(), "default", "", sdk.MaxExportPage)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range page.Records {
		if r.Kind == sdk.KindEpisode && r.Status == sdk.StatusActive {
			out = append(out, r.Body)
		}
	}
	sort.Strings(out)
	return out
}
