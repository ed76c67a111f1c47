package pgtest

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestClusterLifecycle starts a cluster of its own, uses a database on it
// and checks Stop really stops the server and removes its files.
func TestClusterLifecycle(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := Start(ctx, Options{})
	if err != nil {
		if errors.Is(err, ErrNoPostgres) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()
	dsn := c.NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var user string
	if err := conn.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	if user != "postgres" {
		t.Errorf("connected as %q, want postgres", user)
	}
	c.Stop()
	stopped = true
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Errorf("cluster directory %s still there after Stop: %v", c.dir, err)
	}
	if conn, err := pgx.Connect(ctx, dsn); err == nil {
		conn.Close(ctx)
		t.Error("connected after Stop")
	}
}

// TestSharedDatabasesAreSeparate: two databases of the shared cluster do
// not see each other's tables.
func TestSharedDatabasesAreSeparate(t *testing.T) {
	ctx := context.Background()
	c := Shared(t)
	a, b := c.NewDatabase(t), c.NewDatabase(t)
	if a == b {
		t.Fatalf("two databases share the connection string %s", a)
	}
	ca, err := pgx.Connect(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close(ctx)
	if _, err := ca.Exec(ctx, "CREATE TABLE only_in_a (x int)"); err != nil {
		t.Fatal(err)
	}
	cb, err := pgx.Connect(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close(ctx)
	var n int
	if err := cb.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("database b sees a's table")
	}
}

// TestBouncerTriesAnotherPortWhenItsIsTaken: the port chosen for a
// bouncer is free when chosen but may be bound by another process before
// pgbouncer binds it; the start tries a fresh port instead of failing.
func TestBouncerTriesAnotherPortWhenItsIsTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	busy := taken.Addr().(*net.TCPAddr).Port
	defer func(f func() (int, error)) { freePort = f }(freePort)
	calls, free := 0, freePort
	freePort = func() (int, error) {
		calls++
		if calls == 1 {
			return busy, nil
		}
		return free()
	}
	b := Shared(t).PgBouncer(t)
	if calls != 2 || b.Port() == busy {
		t.Fatalf("bouncer on port %d after %d choices; the taken port was %d", b.Port(), calls, busy)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, b.DSN("postgres")+" default_query_exec_mode=exec statement_cache_capacity=0")
	if err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
}
