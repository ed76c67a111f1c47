package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/tokenize"
)

// TestSchemaFollowsTokenizer: the stored terms are the tokenizer's, so a
// tokenizer version without the migration that re-indexes under it would
// leave every realm answering with terms no query cuts any more.
func TestSchemaFollowsTokenizer(t *testing.T) {
	if termsVersion != tokenize.Version {
		t.Fatalf("the schema's terms are of tokenizer version %d, the tokenizer is %d: add a migration that re-indexes every realm and set termsVersion", termsVersion, tokenize.Version)
	}
}

// TestRequiredColumnsMatchMigrations: the list checkSchema holds a schema
// to is exactly what the migrations build, so a new migration cannot
// leave it behind.
func TestRequiredColumnsMatchMigrations(t *testing.T) {
	schema := schemaFor(t, t.Name())
	openStore(t, schema)
	rows, err := rawPool(t, "public").Query(context.Background(), `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = $1`, schema)
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

// TestIncompleteSchema: a schema whose version row is current but whose
// tables were renamed is refused at Configure, naming what is missing and
// the fix; a running provider's watch finds it and exits. So are a change
// log whose numbers are cached per session (replicas would pass changes
// over) and a schema migrated past this build meanwhile (an older writer
// would not log its changes).
func TestIncompleteSchema(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, alter, want, fix string }{
		{"renamed table", "ALTER TABLE %s.records RENAME TO records_old", "table records", "rename it back"},
		{"renamed column", "ALTER TABLE %s.ledger RENAME COLUMN surface TO via", "column ledger.surface", "rename it back"},
		{"cached change numbers", "ALTER SEQUENCE %s.changes_seq_seq CACHE 10", "caches 10 numbers", "CACHE 1"},
		{"newer schema", "INSERT INTO %s.schema_migrations (version) VALUES (1000)", "version 1000", "upgrade the plugin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := schemaFor(t, t.Name())
			exited := make(chan int, 1)
			old := schemaWatchInterval
			schemaWatchInterval = 20 * time.Millisecond
			t.Cleanup(func() { schemaWatchInterval = old })
			openStore(t, schema, func(s *Store) { s.exit = func(code int) { exited <- code } })
			if _, err := rawPool(t, "public").Exec(ctx, fmt.Sprintf(tc.alter, schema)); err != nil {
				t.Fatal(err)
			}
			select {
			case code := <-exited:
				if code == 0 {
					t.Error("the watch exited with status 0")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the running provider never noticed the incomplete schema")
			}
			s := New()
			defer s.Close()
			err := s.Configure(ctx, configJSON(schema))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.fix) {
				t.Errorf("Configure on the altered schema = %v, want it to name %s and the fix", err, tc.want)
			}
		})
	}
}

// TestConnectRefusalsAreUnavailable: a server refusing a connection, at
// connect or later, is sdk.ErrUnavailable, and the message names neither
// user, database nor address.
func TestConnectRefusalsAreUnavailable(t *testing.T) {
	dsn := testDSN(t)
	ctx := context.Background()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, noDB := pgconn.Connect(ctx, dsn+" dbname=secretdb_absent")
	_, noServer := pgconn.Connect(ctx, "host=/nonexistent/secretdir port=5999 user=secretrole dbname=secretdb")
	refused := &pgconn.PgError{Severity: "FATAL", Code: "53300", Message: `too many connections for role "secretrole"`}
	for name, err := range map[string]error{
		"no database at connect": noDB,
		"no server at connect":   noServer,
		"53300":                  fmt.Errorf("acquire: %w", refused),
	} {
		if err == nil {
			t.Fatalf("%s: the connection succeeded", name)
		}
		got := classify(err)
		if !errors.Is(got, sdk.ErrUnavailable) {
			t.Errorf("%s: %v is not unavailable", name, got)
		}
		for _, leak := range []string{"secret", cfg.User, cfg.Host, fmt.Sprint(cfg.Port)} {
			if strings.Contains(got.Error(), leak) {
				t.Errorf("%s: message %q names %s", name, got, leak)
			}
		}
	}
}

// TestRefusalPausesConnecting: after the server refused a connection, the
// pool does not try another for refusalPause; calls fail at once with
// sdk.ErrUnavailable instead of spending their deadline on attempts.
func TestRefusalPausesConnecting(t *testing.T) {
	s := New()
	if err := s.beforeConnect(context.Background(), nil); err != nil {
		t.Fatalf("before any refusal: %v", err)
	}
	s.refused.Store(time.Now().UnixNano())
	if err := s.beforeConnect(context.Background(), nil); !errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("just after a refusal: %v, want unavailable", err)
	}
	s.refused.Store(time.Now().Add(-refusalPause).UnixNano())
	if err := s.beforeConnect(context.Background(), nil); err != nil {
		t.Errorf("a pause after the refusal: %v, want an attempt", err)
	}
}
