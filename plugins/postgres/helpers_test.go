package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk/conformance"
	"github.com/memhost/memhost/sdk/host"
)

func TestMain(m *testing.M) {
	code := testbin.Main(m)
	pgtest.StopShared()
	os.Exit(code)
}

// testDSNEnv carries the test database's connection string to plugins,
// in-process and as processes (they inherit the environment), as a
// deployment's MEMHOST_POSTGRES_DSN would.
const testDSNEnv = "MEMHOST_POSTGRES_TEST_DSN"

var testDB struct {
	sync.Mutex
	dsn string
}

// testDSN answers the connection string of the test process's database on
// the shared cluster and exports it as testDSNEnv; tests keep apart by
// schema (schemaFor).
func testDSN(tb testing.TB) string {
	tb.Helper()
	c := pgtest.Shared(tb)
	testDB.Lock()
	defer testDB.Unlock()
	if testDB.dsn == "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		name, err := c.CreateDatabase(ctx)
		if err != nil {
			tb.Fatal(err)
		}
		testDB.dsn = c.DSN(name)
		os.Setenv(testDSNEnv, testDB.dsn)
	}
	return testDB.dsn
}

// schemaName names a schema of its own for key (a test name, a directory).
func schemaName(key string) string {
	h := sha256.Sum256([]byte(key))
	return "t_" + hex.EncodeToString(h[:10])
}

// schemas holds which test took each schema name last.
var schemas struct {
	sync.Mutex
	taker map[string]testing.TB
}

// schemaFor names tb's schema for key (its name, with a suffix for a
// second one). A test run again in the same process (-count) starts on
// an empty schema: what an earlier run of it left there is dropped, or
// that run's records, changes and altered constraints met the next.
func schemaFor(tb testing.TB, key string) string {
	tb.Helper()
	name := schemaName(key)
	schemas.Lock()
	defer schemas.Unlock()
	if schemas.taker == nil {
		schemas.taker = map[string]testing.TB{}
	}
	prev, taken := schemas.taker[name]
	schemas.taker[name] = tb
	if !taken || prev == tb {
		return name
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testDSN(tb))
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
		tb.Fatal(err)
	}
	return name
}

func configJSON(schema string, extra ...any) json.RawMessage {
	cfg := map[string]any{"dsn_env": testDSNEnv, "schema": schema}
	for i := 0; i+1 < len(extra); i += 2 {
		cfg[extra[i].(string)] = extra[i+1]
	}
	data, _ := json.Marshal(cfg)
	return data
}

// openStore configures an in-process store on schema, closed when tb ends.
func openStore(tb testing.TB, schema string, opts ...func(*Store)) *Store {
	tb.Helper()
	return openStoreWith(tb, configJSON(schema), opts...)
}

// openStoreWith configures an in-process store with cfg, closed when tb
// ends.
func openStoreWith(tb testing.TB, cfg json.RawMessage, opts ...func(*Store)) *Store {
	tb.Helper()
	testDSN(tb)
	s := New()
	for _, o := range opts {
		o(s)
	}
	if err := s.Configure(context.Background(), cfg); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// sqlOnly is the replica setting of a store whose recall answers from SQL.
var sqlOnly = map[string]any{"enabled": false}

// recallPaths are the two ways recall answers, from SQL and from the
// replica: the ranking tests run on both.
var recallPaths = []string{"sql", "replica"}

// openPath configures a store on schema (with extra config keys) whose
// every recall answers by path, "sql" or "replica", or fails tb: the
// replica is waited for, and given the time a loaded machine needs to
// apply a write.
func openPath(tb testing.TB, schema, path string, extra ...any) *Store {
	tb.Helper()
	rep := any(sqlOnly)
	if path == "replica" {
		rep = map[string]any{"read_wait": "10s", "max_lag": "1m"}
	}
	s := openStoreWith(tb, configJSON(schema, append(extra, "replica", rep)...), func(s *Store) {
		s.recall.plan = func(p string) {
			if (p == "replica") != (path == "replica") {
				tb.Errorf("recall answered by %s, want %s", p, path)
			}
		}
	})
	if path == "replica" {
		waitServing(tb, s)
	}
	return s
}

// waitServing waits until s's replica serves recall.
func waitServing(tb testing.TB, s *Store) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for !s.replica.serving() {
		if time.Now().After(deadline) {
			tb.Fatal("the replica did not load and listen within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// launchPlugin starts the built plugin as the host does and configures it
// with cfg; it is stopped when tb ends.
func launchPlugin(tb testing.TB, cfg json.RawMessage) (*host.Conn, *conformance.Client) {
	tb.Helper()
	path, sum := testbin.Plugin(tb, "postgres")
	ctx := context.Background()
	conn, err := host.Launch(ctx, host.LaunchOptions{Name: "postgres", Path: path, SHA256: sum, Dir: tb.TempDir()})
	if err != nil {
		tb.Fatalf("launch plugin: %v", err)
	}
	tb.Cleanup(conn.Close)
	if err := conn.Configure(ctx, cfg); err != nil {
		tb.Fatalf("configure plugin: %v", err)
	}
	p, err := conformance.ClientOf(conn)
	if err != nil {
		tb.Fatal(err)
	}
	return conn, p
}

// ownCluster starts a PostgreSQL cluster of the test's own (to stop and
// start under it), stopped when t ends, and answers it with the connection
// string of a fresh database on it; it skips in -short mode and without
// PostgreSQL.
func ownCluster(t *testing.T) (*pgtest.Cluster, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a cluster of its own")
	}
	ctx := context.Background()
	c, err := pgtest.Start(ctx, pgtest.Options{})
	if errors.Is(err, pgtest.ErrNoPostgres) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	name, err := c.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return c, c.DSN(name) + " connect_timeout=2"
}
