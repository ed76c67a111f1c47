package pgstate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/sdk"
)

// TestRequiredColumnsMatchMigrations: CheckSchema's list is exactly what
// the migrations build.
func TestRequiredColumnsMatchMigrations(t *testing.T) {
	db := open(t, 1)[0]
	rows, err := db.pool.Query(context.Background(), catalogColumns, db.schema)
	if err != nil {
		t.Fatal(err)
	}
	built := map[string][]string{}
	var table, column string
	if _, err := pgx.ForEachRow(rows, []any{&table, &column}, func() error {
		built[table] = append(built[table], column)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, m := range []map[string][]string{built, requiredColumns} {
		for k := range m {
			m[k] = slices.Sorted(slices.Values(m[k]))
		}
	}
	if fmt.Sprint(built) != fmt.Sprint(requiredColumns) {
		t.Errorf("migrations build\n%v\nrequiredColumns lists\n%v", built, requiredColumns)
	}
}

// TestCheckSchemaFindsRenames: a renamed table or column is ErrSchema,
// naming it.
func TestCheckSchemaFindsRenames(t *testing.T) {
	ctx := context.Background()
	db := open(t, 1)[0]
	if err := db.CheckSchema(ctx); err != nil {
		t.Fatalf("fresh schema: %v", err)
	}
	for _, tc := range []struct{ alter, undo, want string }{
		{"ALTER TABLE memhost_state.sessions RENAME TO sessions_old", "ALTER TABLE memhost_state.sessions_old RENAME TO sessions", "table sessions"},
		{"ALTER TABLE memhost_state.compaction_state RENAME COLUMN reset_session TO rs", "ALTER TABLE memhost_state.compaction_state RENAME COLUMN rs TO reset_session", "column compaction_state.reset_session"},
	} {
		if _, err := db.pool.Exec(ctx, tc.alter); err != nil {
			t.Fatal(err)
		}
		err := db.CheckSchema(ctx)
		if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("after %q: %v, want ErrSchema naming %s", tc.alter, err, tc.want)
		}
		if _, err := db.pool.Exec(ctx, tc.undo); err != nil {
			t.Fatal(err)
		}
	}
}

// TestHostKeyVerifier: the first key is recorded (as a verifier, never
// the key); the same key passes, another is refused.
func TestHostKeyVerifier(t *testing.T) {
	ctx := context.Background()
	dbs := open(t, 2)
	key := []byte("6d756c7469686f73742d6b65792d303132333435363738396162636465663031")
	if err := dbs[0].CheckHostKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := dbs[1].CheckHostKey(ctx, key); err != nil {
		t.Errorf("the same key on a second host: %v", err)
	}
	err := dbs[1].CheckHostKey(ctx, []byte("another-key-another-key-another-key!"))
	if !errors.Is(err, ErrHostKeyMismatch) || !strings.Contains(err.Error(), "host_key_env") {
		t.Errorf("another key: %v, want ErrHostKeyMismatch naming the fix", err)
	}
	var stored string
	if err := dbs[0].pool.QueryRow(ctx, `SELECT verifier FROM memhost_state.host_key`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(stored, string(key)) || strings.Contains(string(key), stored) {
		t.Errorf("the stored verifier %q holds the key", stored)
	}
}

// TestSaveWithIsOneTransaction: a compaction's summary and its session
// reset commit together; when the reset cannot be made (its row locked
// past the statement timeout), neither is stored.
func TestSaveWithIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	// The timeout covers Open's schema statements too, which a loaded
	// server may take longer than a fraction of a second over.
	db, err := Open(ctx, pgtest.Shared(t).NewDatabase(t), Options{StatementTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	sessions, comp := NewSessions(db, SessionOptions{}), NewCompaction(db)
	sk := coordinator.SessionKey{Realm: "r", Identity: "alice", Session: "s"}
	spend := func(st *coordinator.SessionState) bool { st.InjectedBytes += 100; return true }
	if err := sessions.Update(ctx, sk, spend); err != nil {
		t.Fatal(err)
	}
	reset := func(ctx context.Context) error {
		return sessions.Update(ctx, sk, func(st *coordinator.SessionState) bool { st.InjectedBytes = 0; return true })
	}
	key := compaction.Key{Realm: "r", Identity: "alice", Conversation: "c"}
	st := compaction.State{Watermark: 3, PrefixHash: "h", Artifact: sdk.Message{Role: "user", Content: "summary"}, UpdatedAt: time.Now()}

	// Another connection holds the session's row, idle on purpose: the
	// server would end it at the statement timeout too, as it ends a
	// frozen host's, and race SaveWith's own timeout.
	lock, err := db.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `SET LOCAL statement_timeout = 0; SET LOCAL idle_in_transaction_session_timeout = 0; SELECT 1 FROM memhost_state.sessions FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	err = comp.SaveWith(ctx, key, 0, st, reset)
	lock.Rollback(ctx)
	if !errors.Is(err, sdk.ErrDeadline) {
		t.Fatalf("SaveWith with the session locked: %v, want a deadline", err)
	}
	if _, found, err := comp.Load(ctx, key); err != nil || found {
		t.Fatalf("the summary was stored without its reset (found %v, %v)", found, err)
	}

	if err := comp.SaveWith(ctx, key, 0, st, reset); err != nil {
		t.Fatal(err)
	}
	if got, found, err := comp.Load(ctx, key); err != nil || !found || got.Watermark != 3 {
		t.Fatalf("after SaveWith: %+v %v %v", got, found, err)
	}
	var bytes int
	if err := sessions.Update(ctx, sk, func(st *coordinator.SessionState) bool { bytes = st.InjectedBytes; return false }); err != nil || bytes != 0 {
		t.Errorf("after SaveWith the session holds %d bytes (%v), want the reset", bytes, err)
	}
}

// TestConnectRefusalIsUnavailable: a server refusing the connection is
// sdk.ErrUnavailable, and the message names neither user, database nor
// address.
func TestConnectRefusalIsUnavailable(t *testing.T) {
	dsn := pgtest.Shared(t).DSN("secretdb_absent")
	_, err := Open(context.Background(), dsn, Options{})
	if !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("Open on a missing database: %v, want unavailable", err)
	}
	for _, leak := range []string{"secretdb", "user=", "postgres", ".s.PGSQL"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("message %q names %s", err, leak)
		}
	}
}
