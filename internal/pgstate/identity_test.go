package pgstate

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/sdk"
)

// joinCompactor answers the carry-over and the messages joined: enough
// for the watermark to move.
type joinCompactor struct{}

func (joinCompactor) Compact(_ context.Context, req sdk.CompactRequest) (sdk.Message, error) {
	var parts []string
	if req.CarryOver != nil {
		parts = append(parts, req.CarryOver.Content)
	}
	for _, m := range req.Evicted {
		parts = append(parts, m.Content)
	}
	return sdk.Message{Role: "user", Content: strings.Join(parts, " | ")}, nil
}

func messages(contents ...string) []sdk.Message {
	out := make([]sdk.Message, len(contents))
	for i, c := range contents {
		out[i] = sdk.Message{Role: "user", Content: c}
	}
	return out
}

// TestCompactionKeyedByIdentity: on the shared state as on the local one,
// two identities using one conversation id each have their own state; one's
// forget leaves the other's; an application forgets every identity's; a
// state stored before identities keyed the table is continued only by an
// application, for the identity it names.
func TestCompactionKeyedByIdentity(t *testing.T) {
	ctx := context.Background()
	store := NewCompaction(open(t, 1)[0])
	s := compaction.New(compaction.Options{Compactor: joinCompactor{}, Store: store})
	alice, bob := sdk.Identity{Realm: "r", ID: "alice"}, sdk.Identity{Realm: "r", ID: "bob"}
	compact := func(id sdk.Identity, conv string, app bool, absorbed, compacted int, evicted ...string) {
		t.Helper()
		res, err := s.Compact(ctx, compaction.Request{Identity: id, Conversation: conv, Evicted: messages(evicted...), Application: app})
		if err != nil || res.Absorbed != absorbed || res.Compacted != compacted {
			t.Fatalf("%s compacts %s %v: %+v %v, want absorbed %d compacted %d", id.ID, conv, evicted, res, err, absorbed, compacted)
		}
	}
	identities := func(conv string) []string {
		t.Helper()
		ids, err := store.Identities(ctx, "r", conv)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(slices.Values(ids))
	}
	compact(alice, "c1", false, 3, 3, "a", "b", "c")
	compact(bob, "c1", false, 1, 1, "x")
	compact(alice, "c1", false, 4, 1, "a", "b", "c", "d")
	if err := s.Forget(ctx, "r", "c1", compaction.Access{Identity: "bob"}); err != nil {
		t.Fatal(err)
	}
	if got := identities("c1"); !slices.Equal(got, []string{"alice"}) {
		t.Fatalf("after bob's forget: %v, want alice's only", got)
	}
	compact(bob, "c1", false, 1, 1, "x")
	if err := s.Forget(ctx, "r", "c1", compaction.Access{Application: true}); err != nil {
		t.Fatal(err)
	}
	if got := identities("c1"); len(got) != 0 {
		t.Fatalf("after the application's forget: %v, want none", got)
	}

	legacy := compaction.State{Watermark: 1, PrefixHash: compactedHash(t, "a"), Artifact: sdk.Message{Role: "user", Content: "old"}}
	if err := store.Save(ctx, compaction.Key{Realm: "r", Conversation: "c2"}, 0, legacy); err != nil {
		t.Fatal(err)
	}
	compact(alice, "c2", false, 1, 1, "x")
	compact(bob, "c2", true, 2, 1, "a", "b")
	if got := identities("c2"); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Fatalf("after the application adopted the legacy state: %v, want alice's and bob's", got)
	}
}

// compactedHash answers the prefix hash a state that absorbed msgs holds,
// as the Service computes it: compacted on a scratch service.
func compactedHash(t *testing.T, msgs ...string) string {
	t.Helper()
	store := compaction.NewMemoryStore()
	s := compaction.New(compaction.Options{Compactor: joinCompactor{}, Store: store})
	id := sdk.Identity{Realm: "r", ID: "scratch"}
	if _, err := s.Compact(context.Background(), compaction.Request{Identity: id, Conversation: "c", Evicted: messages(msgs...)}); err != nil {
		t.Fatal(err)
	}
	st, _, _ := store.Load(context.Background(), compaction.Key{Realm: "r", Identity: "scratch", Conversation: "c"})
	return st.PrefixHash
}

// TestMigrationKeysCompactionByIdentity: a schema migrated by the version
// before identities keyed compaction_state keeps its rows: an owned one is
// its owner's, an unowned one the legacy identity's (”), pending resets
// included, and two identities can then hold one conversation id.
func TestMigrationKeysCompactionByIdentity(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The schema as the version before this step left it.
	before := slices.IndexFunc(migrations, func(m string) bool { return strings.Contains(m, "ADD COLUMN identity") })
	if before < 0 {
		t.Fatal("no migration keys compaction_state by identity")
	}
	setup := []string{
		`CREATE SCHEMA ` + DefaultSchema,
		`CREATE TABLE ` + DefaultSchema + `.state_migrations (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
		`SET search_path TO ` + DefaultSchema,
	}
	setup = append(setup, migrations[:before]...)
	setup = append(setup,
		`INSERT INTO state_migrations (version) SELECT generate_series(1, `+strconv.Itoa(before)+`)`,
		`INSERT INTO compaction_state (realm, conversation, watermark, prefix_hash, artifact_role, artifact_content, updated_at_ms, reset_identity, reset_session, owner)
		 VALUES ('r', 'c1', 2, 'h2', 'user', 'alice summary', 0, 'alice', 's1', 'alice'),
		        ('r', 'c2', 5, 'h5', 'user', 'unowned summary', 0, '', '', '')`,
		`RESET search_path`,
	)
	for _, stmt := range setup {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	db, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := NewCompaction(db)
	for key, want := range map[compaction.Key]compaction.State{
		{Realm: "r", Identity: "alice", Conversation: "c1"}: {Watermark: 2, PrefixHash: "h2", Artifact: sdk.Message{Role: "user", Content: "alice summary"}, Pending: compaction.PendingReset{Identity: "alice", Session: "s1"}},
		{Realm: "r", Identity: "", Conversation: "c2"}:      {Watermark: 5, PrefixHash: "h5", Artifact: sdk.Message{Role: "user", Content: "unowned summary"}},
	} {
		got, found, err := store.Load(ctx, key)
		got.UpdatedAt = want.UpdatedAt
		if err != nil || !found || got != want {
			t.Errorf("%v after the upgrade = %+v %v %v, want %+v", key, got, found, err, want)
		}
	}
	if err := store.Save(ctx, compaction.Key{Realm: "r", Identity: "bob", Conversation: "c1"}, 0, compaction.State{Watermark: 1}); err != nil {
		t.Fatalf("bob's state beside alice's under one id: %v", err)
	}
	if ids, err := store.Identities(ctx, "r", "c1"); err != nil || len(ids) != 2 {
		t.Errorf("identities of c1 = %v %v, want alice and bob", ids, err)
	}
}
