package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/sdk"
)

// TestReplicaWaitLeavesCallerTimeForSQL: a recall whose caller's deadline
// is nearer than read_wait, on a replica that cannot apply, answers from
// SQL within that deadline rather than spending it all waiting and
// failing: the change to wait for is another store's write, or the
// recalling store's own.
func TestReplicaWaitLeavesCallerTimeForSQL(t *testing.T) {
	schema := schemaFor(t, t.Name())
	var plans planLog
	a := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	b := openStoreWith(t, configJSON(schema, "replica", replicaCfg("10s")), plans.hook)
	gate := holdApplies(t, b)
	waitServing(t, b)
	ctx := context.Background()
	gate.held.Store(true)
	for _, c := range []struct {
		name   string
		writer *Store
		title  string
	}{
		{"another store's write", a, "copper kettle"},
		{"its own write", b, "brass kettle"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := c.writer.Remember(ctx, realm, []sdk.Record{note(c.title, "kettle on the stove")}); err != nil {
				t.Fatal(err)
			}
			// Half of it is waited out on the held replica; the other
			// half is the SQL recall's, which on a loaded machine (the
			// database server starved as well) 500 ms did not promise.
			const budget = 4 * time.Second
			cctx, cancel := context.WithTimeout(ctx, budget)
			defer cancel()
			start := time.Now()
			hits, err := b.Recall(cctx, sdk.RecallQuery{Realm: realm, Query: "kettle"})
			if err != nil {
				t.Fatalf("recall with a %v deadline on a held replica: %v", budget, err)
			}
			if !slices.Contains(titles(hits), c.title) {
				t.Errorf("recall answered %v, want %q among them", titles(hits), c.title)
			}
			if plan := plans.last(); plan == "replica" {
				t.Errorf("a held replica answered")
			}
			if took := time.Since(start); took > budget {
				t.Errorf("recall took %v, past the caller's deadline of %v", took, budget)
			}
		})
	}
}

// TestReplicaLogRewound: the change log going back below the replica's
// position (the database restored from a backup, or failed over to a
// standby that had not received the latest changes) must not leave the
// replica passing over the changes written since under numbers it has
// already applied: recall still finds them, and the replica reloads and
// serves again. The log is rewound while the replica is held, then
// written to until it ends below the replica's position, or past it.
func TestReplicaLogRewound(t *testing.T) {
	for _, c := range []struct {
		name   string
		writes []string // after the rewind
	}{
		{"the log ends below the replica", []string{"quill four"}},
		{"the log ends past the replica", []string{"quill four", "quill five", "quill six"}},
		// The head is the replica's position again, numbering other
		// changes: only the row there tells.
		{"the log ends where the replica does", []string{"quill four", "quill five"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			schema := schemaFor(t, t.Name())
			var plans planLog
			a := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
			b := openStoreWith(t, configJSON(schema, "replica", replicaCfg("10s")), plans.hook)
			gate := holdApplies(t, b)
			waitServing(t, b)
			db := rawPool(t, schema)
			ctx := context.Background()
			ids, err := a.Remember(ctx, realm, []sdk.Record{note("quill one", "goose quill"), note("quill two", "swan quill"), note("quill three", "crow quill")})
			if err != nil {
				t.Fatal(err)
			}
			var kept int64 // the log's head after the first write
			if err := db.QueryRow(ctx, "SELECT max(seq) FROM changes").Scan(&kept); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Forget(ctx, realm, ids[1:]); err != nil {
				t.Fatal(err)
			}
			var head int64
			if err := db.QueryRow(ctx, "SELECT max(seq) FROM changes").Scan(&head); err != nil {
				t.Fatal(err)
			}
			if !b.replica.waitApplied(ctx, head, time.Now().Add(time.Minute)) {
				t.Fatal("the replica did not apply the writes within a minute")
			}
			// Hold the replica, then rewind the log to the first write: the
			// forget's rows are gone and their numbers are handed out again.
			gate.held.Store(true)
			b.replica.poke()
			<-gate.entered
			if _, err := db.Exec(ctx, "DELETE FROM changes WHERE seq > $1", kept); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(ctx, "SELECT setval(pg_get_serial_sequence('changes', 'seq'), $1)", kept); err != nil {
				t.Fatal(err)
			}
			want := []string{"quill one"}
			for _, title := range c.writes {
				if _, err := a.Remember(ctx, realm, []sdk.Record{note(title, "heron quill")}); err != nil {
					t.Fatal(err)
				}
				want = append(want, title)
			}
			slices.Sort(want)
			gate.held.Store(false)
			gate.free()
			hits, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "quill"})
			if err != nil {
				t.Fatal(err)
			}
			if got := titles(hits); !slices.Equal(got, want) {
				t.Errorf("after the log was rewound, recall answered %v (by %s), want %v", got, plans.last(), want)
			}
			// The replica answers again, with the new writes.
			deadline := time.Now().Add(time.Minute)
			for {
				hits, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "quill"})
				if err != nil {
					t.Fatal(err)
				}
				got, plan := titles(hits), plans.last()
				if plan == "replica" {
					if !slices.Equal(got, want) {
						t.Errorf("the replica answered %v after the log was rewound, want %v", got, want)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the replica did not serve again within a minute of the log being rewound")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestStalledWriterReleasesTheChangeLog: from an outside review. A host
// that stops between taking the change log's lock and committing (frozen,
// or cut off without a reset, as under SIGSTOP) left its transaction idle
// on the server, holding the lock: every host's writes, in every realm,
// failed at their statement timeout until the operating system gave up on
// the connection (hours). The server now ends a transaction idle for a
// statement timeout, and the writes go on.
func TestStalledWriterReleasesTheChangeLog(t *testing.T) {
	schema := schemaFor(t, t.Name())
	cfg := configJSON(schema, "statement_timeout", "1s", "replica", sqlOnly)
	stalled, other := openStoreWith(t, cfg), openStoreWith(t, cfg)
	ctx := context.Background()
	tx, err := stalled.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := logChanges(ctx, tx, realm, opPut, []string{"stalled"}); err != nil {
		t.Fatal(err)
	}
	// The stalled host sends nothing more.
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := other.Remember(ctx, "another", []sdk.Record{note("after the stall", "written by another host")})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still fail 15 s after a host stalled holding the change log: %v", err)
		}
	}
}

// TestReplicaConnectionsOutliveIdleSessionTimeout: a server or role that
// ends idle sessions (idle_session_timeout) does not end the replica's own
// connections, which idle between changes and beats: with it, the LISTEN
// connection dropped at every quiet spell and the replica stopped serving
// until it was back and caught up.
func TestReplicaConnectionsOutliveIdleSessionTimeout(t *testing.T) {
	base := testDSN(t)
	for _, c := range []struct{ name, options string }{
		{"server default", ""},
		{"sessions idle 100ms end", " options='-c idle_session_timeout=100'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("MEMHOST_IDLE_SESSION_DSN", base+c.options)
			schema := schemaFor(t, t.Name())
			s := openStoreWith(t, json.RawMessage(`{"dsn_env": "MEMHOST_IDLE_SESSION_DSN", "schema": "`+schema+`"}`))
			ctx := context.Background()
			conn, err := pgx.ConnectConfig(ctx, s.replica.listen)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			var got string
			if err := conn.QueryRow(ctx, "SHOW idle_session_timeout").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != "0" {
				t.Errorf("the replica's connections end after idling %s, want never", got)
			}
		})
	}
}

// TestPoolOutlivesIdleSessionTimeout: a server or role ending sessions
// idle for less than the second after which the pool pings a connection
// before handing it out ended every pooled connection in a quiet spell,
// and the next call failed with "terminating connection due to
// idle-session timeout" (a 500) on each in turn. Nothing of the call ran:
// it runs again on another connection, a write too.
func TestPoolOutlivesIdleSessionTimeout(t *testing.T) {
	const poolSize = 4
	base := testDSN(t)
	// 400 ms: under the second past which the pool pings a connection
	// before handing it out, and long enough that a connection the retry
	// opens is not itself ended before its first statement on a loaded
	// machine (at 100 ms, make test's parallel run saw that once).
	t.Setenv("MEMHOST_IDLE_POOL_DSN", base+" application_name=idle_pool options='-c idle_session_timeout=400'")
	schema := schemaFor(t, t.Name())
	s := openStoreWith(t, json.RawMessage(fmt.Sprintf(`{"dsn_env": "MEMHOST_IDLE_POOL_DSN", "schema": %q, "pool_size": %d, "replica": {"enabled": false}}`, schema, poolSize)))
	ctx := context.Background()
	const realm = "idle"
	rec := sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "kept", Body: "apple banana"}
	ids, err := s.Remember(ctx, realm, []sdk.Record{rec})
	if err != nil {
		t.Fatal(err)
	}
	watch, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close(ctx)
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"remember", func() error {
			_, err := s.Remember(ctx, realm, []sdk.Record{{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "new", Body: "cherry"}})
			return err
		}},
		{"recall", func() error { _, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "apple"}); return err }},
		{"get", func() error { _, err := s.Get(ctx, realm, ids); return err }},
		{"mark used", func() error { return s.MarkUsed(ctx, realm, ids, time.Now()) }},
		// Two statements (the rows, then the trim): they run in one
		// transaction, so neither runs twice when the other meets a dead
		// connection.
		{"write ledger", func() error {
			return s.WriteLedger(ctx, []sdk.LedgerEntry{{Realm: realm, Identity: "me", RecordID: ids[0], Surface: "turn", Bytes: 10, At: time.Now()}})
		}},
		{"manifest", func() error {
			_, err := s.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: 10})
			return err
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Fill the pool, then let the server end every connection.
			err := s.use(func(db *pgdb) error {
				var held []*pgxpool.Conn
				defer func() {
					for _, c := range held {
						c.Release()
					}
				}()
				for range poolSize {
					c, err := db.Acquire(ctx)
					if err != nil {
						return err
					}
					held = append(held, c)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for {
				var n int
				if err := watch.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'idle_pool'").Scan(&n); err != nil {
					t.Fatal(err)
				}
				if n == 0 {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := c.call(); err != nil {
				t.Errorf("%s after the server ended the idle connections: %v", c.name, err)
			}
		})
	}
}

// TestReplicaLoadOutlastsChangeRetention: the changes written after a
// load's snapshot stay in the log, past change_retention, until the load
// is done. A load slower than the retention on a schema being written
// found them trimmed and loaded again, and again, never to catch up.
func TestReplicaLoadOutlastsChangeRetention(t *testing.T) {
	schema, a, b, gate := heldReplica(t)
	ctx := context.Background()
	if _, err := a.Remember(ctx, realm, []sdk.Record{note("before", "tide table")}); err != nil {
		t.Fatal(err)
	}
	// A trim past the held replica makes it load again.
	trimAll(t, a.pool)
	db := rawPool(t, schema)
	var once atomic.Bool
	trimmed := make(chan struct{})
	// While the load runs: a write after its snapshot, then, once the
	// load has lasted past the retention (the log's times moved back an
	// hour), a trim at a retention of a minute.
	during := func() {
		if !once.CompareAndSwap(false, true) {
			return
		}
		defer close(trimmed)
		for deadline := time.Now().Add(time.Minute); ; {
			var loading bool
			if err := db.QueryRow(ctx, "SELECT loading FROM replicas WHERE name = $1", b.replica.name).Scan(&loading); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				t.Error(err)
				return
			}
			if loading {
				break
			}
			if time.Now().After(deadline) {
				t.Error("the loading replica's row did not say so within a minute")
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := a.Remember(ctx, realm, []sdk.Record{note("during", "tide table")}); err != nil {
			t.Error(err)
			return
		}
		if _, err := db.Exec(ctx, "UPDATE changes SET at = at - interval '1 hour'"); err != nil {
			t.Error(err)
			return
		}
		if _, err := trimChanges(ctx, a.pool, time.Minute); err != nil {
			t.Error(err)
		}
	}
	loadHook.Store(&during)
	t.Cleanup(func() { loadHook.Store(nil) })
	gate.held.Store(false)
	gate.free()
	<-trimmed
	settled(t, b)
	if n := b.replica.loads.Load(); n != 2 {
		t.Errorf("the replica loaded %d times; want twice (at start, after the trim), then a catch-up", n)
	}
	var plans planLog
	plans.hook(b)
	hits, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "tide"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 2 || plans.last() != "replica" {
		t.Errorf("recall answered %d of the 2 records written, by %s; want both, by the replica", len(hits), plans.last())
	}
}

// TestReplicaLoadOutlastsStatementTimeout: a load's statements and its
// snapshot's idling are not cut at a short statement_timeout: a batch's
// statement lasts while the replica indexes the rows it streams, so a
// timeout of a few hundred milliseconds ended every load of a sizable
// realm and the replica never served.
func TestReplicaLoadOutlastsStatementTimeout(t *testing.T) {
	schema := schemaFor(t, t.Name())
	a := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	ctx := context.Background()
	if _, err := a.Remember(ctx, realm, []sdk.Record{note("kept", "tide table")}); err != nil {
		t.Fatal(err)
	}
	// A load's indexing outlasting the timeout, as a large realm's does,
	// and a slow server's first read of the snapshot.
	slowLoads(t, 300*time.Millisecond)
	var first sync.Once
	slowRead := func() { first.Do(func() { time.Sleep(300 * time.Millisecond) }) }
	snapshotHook.Store(&slowRead)
	t.Cleanup(func() { snapshotHook.Store(nil) })
	b := openStoreWith(t, configJSON(schema, "statement_timeout", "100ms", "replica", replicaCfg("10s")))
	waitServing(t, b)
	if n := b.replica.firstLoadFailures.Load(); n != 0 {
		t.Errorf("%d loads failed before one went through; want none", n)
	}
}

// TestMigrationOutlastsIdleTimeout: the gaps between a migration's
// statements are the plugin's own round trips, which a loaded machine
// stretches past a short statement_timeout; the server's idle timeout
// ended the migration's transaction and the store did not open.
func TestMigrationOutlastsIdleTimeout(t *testing.T) {
	schema := schemaFor(t, t.Name())
	idle := func() { time.Sleep(300 * time.Millisecond) }
	migrateHook.Store(&idle)
	t.Cleanup(func() { migrateHook.Store(nil) })
	// Opened twice: once creating the schema, once reading its version.
	// openStoreWith fails the test when the store does not open.
	openStoreWith(t, configJSON(schema, "statement_timeout", "100ms"))
	openStoreWith(t, configJSON(schema, "statement_timeout", "100ms"))
}

// TestSchemaCheckOutlastsStatementTimeout: the schema check that opens a
// store reads the catalog, which on a loaded server outlasts a short
// statement_timeout; the check was cut and the store did not open.
// TestMaintenanceOutlastsAStalledClient: the migration and the schema
// check set their minute by a statement after BEGIN, so the gap between
// the two ran under the request's idle timeout; a make-test run on a
// loaded machine had the server end the schema check there ("terminating
// connection due to idle-in-transaction timeout"). Here the client stalls
// before every statement it sends inside a transaction, longer than the
// timeout: the store still opens.
func TestMaintenanceOutlastsAStalledClient(t *testing.T) {
	var tr pgx.QueryTracer = stallInTransaction{300 * time.Millisecond}
	connTracer.Store(&tr)
	t.Cleanup(func() { connTracer.Store(nil) })
	// openStoreWith fails the test when the store does not open.
	openStoreWith(t, configJSON(schemaFor(t, t.Name()), "statement_timeout", "100ms", "replica", sqlOnly))
}

// stallInTransaction sleeps before each statement sent inside an open
// transaction, as a client descheduled between its round trips would.
type stallInTransaction struct{ d time.Duration }

func (s stallInTransaction) TraceQueryStart(ctx context.Context, conn *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if conn.PgConn().TxStatus() == 'T' {
		time.Sleep(s.d)
	}
	return ctx
}

func (stallInTransaction) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func TestSchemaCheckOutlastsStatementTimeout(t *testing.T) {
	for _, tc := range []struct {
		name string
		slow func(context.Context, pgx.Tx) error
	}{
		{"a statement past the timeout", func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "SELECT pg_sleep(0.3)")
			return err
		}},
		{"an idle gap past the timeout", func(ctx context.Context, tx pgx.Tx) error {
			time.Sleep(300 * time.Millisecond)
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkHook.Store(&tc.slow)
			t.Cleanup(func() { checkHook.Store(nil) })
			// openStoreWith fails the test when the store does not open.
			openStoreWith(t, configJSON(schemaFor(t, t.Name()), "statement_timeout", "100ms", "replica", sqlOnly))
		})
	}
}
