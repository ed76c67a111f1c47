package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestLeastPrivilegeRoles: the provider starts and serves under a role
// given no more than it needs. A role that owns a schema an administrator
// made for it needs no CREATE privilege on the database; once the schema
// is migrated, a role with only USAGE on it and the right to read and
// write its tables and sequences serves every call.
func TestLeastPrivilegeRoles(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	admin := rawPool(t, "public")
	for _, tc := range []struct {
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
			schema := schemaFor(t, t.Name())
			role := "r" + schema
			// Fresh each run: roles outlive the test's database.
			if _, err := admin.Exec(ctx, fmt.Sprintf(`DROP SCHEMA IF EXISTS %[1]s CASCADE;
				DO $$ BEGIN
					IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '%[2]s') THEN
						DROP OWNED BY %[2]s; DROP ROLE %[2]s;
					END IF;
				END $$;
				CREATE ROLE %[2]s LOGIN`, schema, role)); err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(tc.name, "reader") {
				openStore(t, schema).Close() // the administrator migrates
			}
			if _, err := admin.Exec(ctx, fmt.Sprintf(tc.setup, schema, role)); err != nil {
				t.Fatal(err)
			}
			s := New()
			s.getenv = func(string) string { return strings.Replace(dsn, "user=postgres", "user="+role, 1) }
			defer s.Close()
			if err := s.Configure(ctx, configJSON(schema, "replica", sqlOnly)); err != nil {
				t.Fatalf("Configure as %s: %v", tc.name, err)
			}
			ids, err := s.Remember(ctx, realm, []sdk.Record{
				{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "least privilege", Body: "a turn", Thread: &sdk.Thread{ID: "t", Seq: 1}},
				{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "least privilege", Body: "another turn", Thread: &sdk.Thread{ID: "t", Seq: 2}},
			})
			if err != nil {
				t.Fatalf("Remember: %v", err)
			}
			if hits, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "privilege"}); err != nil || len(hits) != 2 {
				t.Errorf("Recall = %d hits, %v; want 2", len(hits), err)
			}
			if _, err := s.Supersede(ctx, realm, ids[0], sdk.Record{Title: "least privilege", Body: "a turn, corrected"}); err != nil {
				t.Errorf("Supersede: %v", err)
			}
			if err := s.MarkUsed(ctx, realm, ids[1:], time.Now()); err != nil {
				t.Errorf("MarkUsed: %v", err)
			}
			if _, err := s.Reindex(ctx, realm, nil); err != nil {
				t.Errorf("Reindex: %v", err)
			}
			if n, err := s.Forget(ctx, realm, ids); err != nil || n != 2 {
				t.Errorf("Forget = %d, %v; want 2", n, err)
			}
		})
	}
}

// TestReadOnlyServerRefused: a server that accepts read-only transactions
// only (a standby, or default_transaction_read_only) fails Configure,
// even on a migrated schema whose start needs no write, rather than
// starting healthy and failing every write.
func TestReadOnlyServerRefused(t *testing.T) {
	dsn := testDSN(t)
	schema := schemaFor(t, t.Name())
	openStore(t, schema).Close()
	s := New()
	s.getenv = func(string) string { return dsn + " options='-c default_transaction_read_only=on'" }
	defer s.Close()
	err := s.Configure(context.Background(), configJSON(schema, "replica", sqlOnly))
	if err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("Configure on a read-only server = %v, want an error saying it is read-only", err)
	}
}
