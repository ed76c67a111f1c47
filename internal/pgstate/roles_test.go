package pgstate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/sdk"
)

// TestLeastPrivilegeRoles: the store opens and serves under a role given
// no more than it needs. A role that owns a schema an administrator made
// for it needs no CREATE privilege on the database; once the schema is
// migrated, a role with only USAGE on it and the right to read and write
// its tables and sequences serves every call.
func TestLeastPrivilegeRoles(t *testing.T) {
	ctx := context.Background()
	for i, tc := range []struct {
		name  string
		setup string // %[1]s is the schema, %[2]s the role
	}{
		{"owner of a schema made for it", `CREATE SCHEMA %[1]s AUTHORIZATION %[2]s`},
		{"reader and writer of a migrated schema", `
			GRANT USAGE ON SCHEMA %[1]s TO %[2]s;
			GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %[1]s TO %[2]s;
			GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA %[1]s TO %[2]s`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := pgtest.Shared(t)
			dsn := c.NewDatabase(t)
			schema := DefaultSchema
			// Roles outlive the test's database: one of its own per run.
			role := fmt.Sprintf("pgstate_role_%d_%d", i, time.Now().UnixNano())
			if err := c.Exec(ctx, "CREATE ROLE "+role+" LOGIN"); err != nil {
				t.Fatal(err)
			}
			admin, err := Open(ctx, dsn, Options{}) // connects as the superuser
			if err != nil {
				t.Fatal(err)
			}
			defer admin.Close()
			if !strings.HasPrefix(tc.name, "reader") {
				if _, err := admin.pool.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := admin.pool.Exec(ctx, fmt.Sprintf(tc.setup, schema, role)); err != nil {
				t.Fatal(err)
			}
			db, err := Open(ctx, strings.Replace(dsn, "user=postgres", "user="+role, 1), Options{})
			if err != nil {
				t.Fatalf("Open as %s: %v", tc.name, err)
			}
			defer db.Close()
			if err := db.CheckHostKey(ctx, []byte("host key")); err != nil {
				t.Errorf("CheckHostKey: %v", err)
			}
			key := coordinator.SessionKey{Realm: "r", Identity: "i", Session: "s"}
			if err := NewSessions(db, SessionOptions{}).Update(ctx, key, func(st *coordinator.SessionState) bool { st.InjectedBytes++; return true }); err != nil {
				t.Errorf("session Update: %v", err)
			}
			st := compaction.State{Watermark: 1, PrefixHash: "h", Artifact: sdk.Message{Role: "system", Content: "sum"}, UpdatedAt: time.Now()}
			if err := NewCompaction(db).Save(ctx, compaction.Key{Realm: "r", Identity: "alice", Conversation: "c"}, 0, st); err != nil {
				t.Errorf("compaction Save: %v", err)
			}
			if err := NewProposals(db).Add(ctx, []proposal.Entry{{Realm: "r", ID: "p1", Proposer: "agent", CreatedAt: time.Now()}}, 10); err != nil {
				t.Errorf("proposal Add: %v", err)
			}
			if err := NewTraces(db).Append(ctx, []coordinator.TurnTrace{{Realm: "r", Identity: "i", Session: "s", At: time.Now()}}); err != nil {
				t.Errorf("trace Append: %v", err)
			}
		})
	}
}

// TestReadOnlyServerRefused: a server that accepts read-only transactions
// only (a standby, or default_transaction_read_only) fails Open, even on a
// migrated schema whose start needs no write, rather than opening and
// failing every turn.
func TestReadOnlyServerRefused(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	admin, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	admin.Close()
	db, err := Open(ctx, dsn+" options='-c default_transaction_read_only=on'", Options{})
	if err == nil {
		db.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("Open on a read-only server = %v, want an error saying it is read-only", err)
	}
}
