package pgstate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/sdk"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// open answers n pools on one fresh database, each migrated as a host
// starting at the same moment would.
func open(t *testing.T, n int) []*DB {
	t.Helper()
	dsn := pgtest.Shared(t).NewDatabase(t)
	dbs := make([]*DB, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dbs[i], errs[i] = Open(context.Background(), dsn, Options{})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("host %d: %v", i, err)
		}
		t.Cleanup(dbs[i].Close)
	}
	return dbs
}

// ownServer answers a cluster of the test's own, which it may stop and
// start, and a store open on a fresh database of it.
func ownServer(t *testing.T) (*pgtest.Cluster, *DB) {
	t.Helper()
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
	db, err := Open(ctx, c.DSN(name), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return c, db
}

// TestConcurrentTurnsKeepBudgetAndDedup runs turns of one session on two
// "hosts" (two pools) at once: each turn spends 100 bytes of a 1000-byte
// budget and injects one id, possibly one another turn also picked.
func TestConcurrentTurnsKeepBudgetAndDedup(t *testing.T) {
	dbs := open(t, 2)
	stores := []*Sessions{NewSessions(dbs[0], SessionOptions{}), NewSessions(dbs[1], SessionOptions{})}
	key := coordinator.SessionKey{Realm: "r", Identity: "i", Session: "s"}
	const budget, cost = 1000, 100
	var wg sync.WaitGroup
	var mu sync.Mutex
	var accepted []string
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			store := stores[g%2]
			for turn := range 10 {
				id := fmt.Sprint("rec-", (g+turn)%12) // overlapping picks
				took := false
				err := store.Update(context.Background(), key, func(s *coordinator.SessionState) bool {
					took = false
					if s.InjectedBytes+cost > budget || slices.Contains(s.InjectedIDs, id) {
						return false
					}
					s.InjectedBytes += cost
					s.InjectedIDs = append(s.InjectedIDs, id)
					took = true
					return true
				})
				if err != nil {
					t.Error(err)
					return
				}
				if took {
					mu.Lock()
					accepted = append(accepted, id)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	var final coordinator.SessionState
	if err := stores[1].Update(context.Background(), key, func(s *coordinator.SessionState) bool { final = s.Clone(); return false }); err != nil {
		t.Fatal(err)
	}
	if final.InjectedBytes > budget || final.InjectedBytes != cost*len(final.InjectedIDs) {
		t.Errorf("bytes %d for %d ids, budget %d", final.InjectedBytes, len(final.InjectedIDs), budget)
	}
	slices.Sort(accepted)
	if len(slices.Compact(slices.Clone(accepted))) != len(accepted) {
		t.Errorf("an id was accepted twice: %v", accepted)
	}
	if len(accepted) != len(final.InjectedIDs) || len(accepted) != budget/cost {
		t.Errorf("accepted %d, stored %d, want %d", len(accepted), len(final.InjectedIDs), budget/cost)
	}
}

func TestSessionsLifecycle(t *testing.T) {
	db := open(t, 1)[0]
	ctx := context.Background()
	s := NewSessions(db, SessionOptions{PerRealm: 3, TTL: time.Hour})
	add := func(k coordinator.SessionKey) {
		t.Helper()
		if err := s.Update(ctx, k, func(st *coordinator.SessionState) bool { st.InjectedBytes += 7; return true }); err != nil {
			t.Fatal(err)
		}
	}
	key := func(realm string, i int) coordinator.SessionKey {
		return coordinator.SessionKey{Realm: realm, Identity: "i", Session: fmt.Sprint(i)}
	}
	// A visit that changes nothing stores nothing.
	if err := s.Update(ctx, key("a", 0), func(*coordinator.SessionState) bool { return false }); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Len(ctx, "a"); n != 0 {
		t.Errorf("read-only visit stored %d rows", n)
	}
	for i := range 5 {
		add(key("a", i))
	}
	add(key("b", 0))
	if n, _ := s.Len(ctx, "a"); n != 3 {
		t.Errorf("realm a holds %d sessions, bound 3", n)
	}
	if n, _ := s.Len(ctx, "b"); n != 1 {
		t.Errorf("realm b holds %d sessions, want 1 (a's flood must not evict it)", n)
	}
	var got int
	_ = s.Update(ctx, key("a", 4), func(st *coordinator.SessionState) bool { got = st.InjectedBytes; return false })
	if got != 7 {
		t.Errorf("newest session holds %d bytes, want 7", got)
	}
	// Age every row past the TTL: visits see a fresh session, Expire drops them.
	if _, err := db.pool.Exec(ctx, db.q(`UPDATE sessions SET touched_at = now() - interval '2 hours'`)); err != nil {
		t.Fatal(err)
	}
	_ = s.Update(ctx, key("a", 4), func(st *coordinator.SessionState) bool { got = st.InjectedBytes; return false })
	if got != 0 {
		t.Errorf("expired session shows %d bytes", got)
	}
	if n, err := s.Expire(ctx); err != nil || n != 4 {
		t.Errorf("Expire = %d, %v; want 4", n, err)
	}
}

func TestCompactionCompareAndSet(t *testing.T) {
	dbs := open(t, 2)
	a, b := NewCompaction(dbs[0]), NewCompaction(dbs[1])
	ctx := context.Background()
	key := compaction.Key{Realm: "r", Identity: "alice", Conversation: "c"}
	st := compaction.State{Watermark: 4, PrefixHash: "h4", Artifact: sdk.Message{Role: "system", Content: "sum"}, UpdatedAt: time.UnixMilli(1000).UTC()}
	if err := a.Save(ctx, key, 0, st); err != nil {
		t.Fatal(err)
	}
	if err := b.Save(ctx, key, 0, st); !errors.Is(err, compaction.ErrStale) {
		t.Errorf("second save from 0 = %v, want stale", err)
	}
	got, found, err := b.Load(ctx, key)
	if err != nil || !found || got != st {
		t.Errorf("host b loads %+v %v %v, want %+v", got, found, err, st)
	}
	next := st
	next.Watermark = 9
	if err := b.Save(ctx, key, 4, next); err != nil {
		t.Fatal(err)
	}
	if err := a.Save(ctx, key, 4, next); !errors.Is(err, compaction.ErrStale) {
		t.Errorf("save from an old watermark = %v, want stale", err)
	}
	if err := a.Delete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := b.Load(ctx, key); found {
		t.Error("state survived Delete")
	}
}

// TestOutageIsUnavailable: a stopped server answers sdk.ErrUnavailable,
// and the store serves again once it is back.
func TestOutageIsUnavailable(t *testing.T) {
	c, db := ownServer(t)
	s := NewSessions(db, SessionOptions{})
	key := coordinator.SessionKey{Realm: "r", Identity: "i", Session: "s"}
	inc := func(st *coordinator.SessionState) bool { st.InjectedBytes++; return true }
	if err := s.Update(context.Background(), key, inc); err != nil {
		t.Fatal(err)
	}
	c.StopServer()
	if err := s.Update(context.Background(), key, inc); !errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("during the outage: %v, want unavailable", err)
	}
	if err := c.StartServer(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), key, inc); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
	var got int
	_ = s.Update(context.Background(), key, func(st *coordinator.SessionState) bool { got = st.InjectedBytes; return false })
	if got != 2 {
		t.Errorf("bytes %d after two acknowledged writes, want 2", got)
	}
}

// TestConnectFailureSaysWhy: a connection string naming a host that does
// not resolve, or a server that never answers, fails Open as unavailable,
// saying which, never that the database refused, and never the password.
func TestConnectFailureSaysWhy(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	port := silent.Addr().(*net.TCPAddr).Port
	for _, c := range []struct{ dsn, want string }{
		{"postgres://u:hunter2@nonexistent.invalid:5432/db?sslmode=disable", "host name does not resolve"},
		{"postgres://u:hunter2@127.0.0.1:" + strconv.Itoa(port) + "/db?sslmode=disable&connect_timeout=1", "did not answer a new connection in time"},
	} {
		db, err := Open(context.Background(), c.dsn, Options{})
		if err == nil {
			db.Close()
		}
		if !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), c.want) ||
			strings.Contains(err.Error(), "refused") || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open %s: %v, want unavailable saying %q", c.dsn, err, c.want)
		}
	}
}

// TestUnavailableSaysSharedStateOnce: a server out of reach fails Open
// with a message naming the shared state once, and no plugin (the shared
// state is the host's).
func TestUnavailableSaysSharedStateOnce(t *testing.T) {
	_, err := Open(context.Background(), "host=/nonexistent port=5432 user=x dbname=y", Options{})
	if !errors.Is(err, sdk.ErrUnavailable) || strings.Count(err.Error(), "shared state") != 1 || strings.Contains(err.Error(), "plugin") {
		t.Errorf("Open with the server out of reach: %v, want unavailable naming the shared state once and no plugin", err)
	}
}

// TestReadOnlyServerIsUnavailable: a server that turns read-only under
// running hosts (a primary demoted, a failover's address still on the
// standby) fails a turn's session update as an outage (503), never an
// internal error carrying the server's words.
func TestReadOnlyServerIsUnavailable(t *testing.T) {
	ctx := context.Background()
	c, db := ownServer(t)
	s := NewSessions(db, SessionOptions{})
	key := coordinator.SessionKey{Realm: "r", Identity: "i", Session: "s"}
	inc := func(st *coordinator.SessionState) bool { st.InjectedBytes++; return true }
	if err := s.Update(ctx, key, inc); err != nil {
		t.Fatal(err)
	}
	pgtest.SetReadOnly(t, c.DSN("postgres"))
	var err error
	// A pooled session takes the reloaded setting at its next command
	// boundary, which may come after a transaction began: update until
	// one is refused, within a bound.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if err = s.Update(ctx, key, inc); err != nil || time.Now().After(deadline) {
			break
		}
	}
	if !errors.Is(err, sdk.ErrUnavailable) || strings.Contains(err.Error(), "ERROR") {
		t.Errorf("a session update on a read-only server: %v, want unavailable", err)
	}
}

// TestLostRacesAreUnavailable: from an outside review. A session or
// compaction write that lost its deadlock or serialization race on every
// attempt answered 500 internal with the server's "deadlock detected"; it
// is unavailable (503, with Retry-After), as the provider's is.
func TestLostRacesAreUnavailable(t *testing.T) {
	for _, code := range []string{codeDeadlock, codeSerialization} {
		err := classify(fmt.Errorf("save session: %w", &pgconn.PgError{Code: code, Message: "deadlock detected"}))
		if !errors.Is(err, sdk.ErrUnavailable) || strings.Contains(err.Error(), "deadlock detected") {
			t.Errorf("SQLSTATE %s = %v, want unavailable without the server's words", code, err)
		}
	}
}

// TestIdleTransactionsEndAtTheStatementTimeout: from an outside review,
// the class the postgres provider's change log showed. A turn holds its
// session's row (SELECT … FOR UPDATE) within a transaction; a host frozen
// or cut off inside it left the transaction idle on the server, the row
// locked for every other host, until the operating system dropped the
// connection (hours). The server ends a transaction idle for a statement
// timeout.
func TestIdleTransactionsEndAtTheStatementTimeout(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, pgtest.Shared(t).NewDatabase(t), Options{StatementTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var idle string
	if err := db.pool.QueryRow(ctx, "SELECT current_setting('idle_in_transaction_session_timeout')").Scan(&idle); err != nil {
		t.Fatal(err)
	}
	if idle != "2s" {
		t.Errorf("idle_in_transaction_session_timeout = %q, want the statement timeout, 2s", idle)
	}
}

// TestNewerSchemaIsRefusedOnce: a schema a newer host migrated is refused,
// saying the problem once and what to do, not also that the settings are
// invalid; nothing is migrated.
func TestNewerSchemaIsRefusedOnce(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	db, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.pool.Exec(ctx, `INSERT INTO `+DefaultSchema+`.state_migrations (version) VALUES (999)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = Open(ctx, dsn, Options{})
	if !errors.Is(err, ErrNewerSchema) || strings.Count(err.Error(), "newer") != 1 || strings.Contains(err.Error(), "invalid") || !strings.Contains(err.Error(), "upgrade") {
		t.Errorf("Open of a newer schema: %v, want it refused as newer once, saying to upgrade", err)
	}
}

// TestFullDiskSaysSo: from an outside review. A session write on a
// server whose disk is full (SQLSTATE 53100) answered "the database is
// unavailable", as an outage, and then unavailable where the host's SQLite
// state answers storage_full; it names the full disk once, and neither
// the server's words nor a Go type.
func TestFullDiskSaysSo(t *testing.T) {
	full := &pgconn.PgError{Severity: "ERROR", Code: "53100", Message: `could not extend file "base/16384/16473": No space left on device`}
	got := classify(fmt.Errorf("save session: %w", full))
	// storage_full, as any provider's full disk, not an outage: a client
	// branches on one code whatever the backend.
	if !errors.Is(got, sdk.ErrNoSpace) || errors.Is(got, sdk.ErrUnavailable) || sdk.CodeOf(got) != sdk.CodeStorageFull {
		t.Fatalf("a full disk = %v (code %s), want storage full", got, sdk.CodeOf(got))
	}
	msg := got.Error()
	if strings.Count(msg, "disk is full") != 1 || strings.Contains(msg, "is unavailable") {
		t.Errorf("a full disk = %q, want it named once, not as an outage", msg)
	}
	for _, leak := range []string{"could not extend", "base/", "pgconn", "PgError", "save session"} {
		if strings.Contains(msg, leak) {
			t.Errorf("a full disk = %q, names %q", msg, leak)
		}
	}
}

// TestATimeoutSaysSoOnce: a state call past its deadline is
// sdk.ErrDeadline, and its message says so once (it read "deadline
// exceeded: timeout: context deadline exceeded").
func TestATimeoutSaysSoOnce(t *testing.T) {
	err := classify(fmt.Errorf("save session: timeout: %w", context.DeadlineExceeded))
	if !errors.Is(err, sdk.ErrDeadline) || !errors.Is(err, context.DeadlineExceeded) || strings.Count(err.Error(), "deadline")+strings.Count(err.Error(), "timeout") > 1 {
		t.Errorf("a state call past its deadline = %q, want deadline exceeded, said once", err)
	}
}
