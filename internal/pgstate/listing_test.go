package pgstate

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/internal/proposal"
)

// TestListingsLeaveTurnsAConnection: trace and proposal listings shared
// the pool with every turn's session write, so one realm's flood of
// listings could hold every connection and another realm's turns waited
// for one (as the local state database's one connection made them wait:
// p95 5 ms to 6.7 s). Here the listed tables are locked so each listing
// holds its connection: the listings take half the pool, and a turn of
// another realm still writes.
func TestListingsLeaveTurnsAConnection(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	const poolSize, flood = 4, 8
	// Statements may wait out the write's deadline on the lock.
	db, err := Open(ctx, dsn, Options{PoolSize: poolSize, StatementTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	traces, ledger, sessions := NewTraces(db), NewProposals(db), NewSessions(db, SessionOptions{})
	if err := traces.Append(ctx, []coordinator.TurnTrace{{Realm: "ra", Identity: "alice", Session: "s", At: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	locker, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE `+db.prefix+`turn_trace, `+db.prefix+`proposals IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	listings := []func() error{
		func() error { _, err := traces.Session(ctx, "ra", nil, "s", 10); return err },
		func() error { _, err := traces.Record(ctx, "ra", nil, "id", 10); return err },
		func() error { _, err := traces.Recent(ctx, "ra", nil, 10); return err },
		func() error { _, _, err := ledger.List(ctx, "ra", proposal.Cursor{}, 10); return err },
		func() error { _, err := ledger.Proposed(ctx, "ra", "agent", 10); return err },
	}
	errs := make(chan error, flood)
	for i := range flood {
		go func() { errs <- listings[i%len(listings)]() }()
	}
	// Every listing either holds a connection, blocked on the lock, or
	// waits to be let in. Watched from outside the locking transaction,
	// in which the server's activity view would stay as first read.
	watcher, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close(ctx)
	for {
		var blocked int
		if err := watcher.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&blocked); err != nil {
			t.Fatal(err)
		}
		if blocked+db.listings.Waiting() == flood {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The deadline is the test's, not a speed target: with every
	// connection held the write would wait until the lock is released.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	key := coordinator.SessionKey{Realm: "rb", Identity: "bob", Session: "s"}
	if err := sessions.Update(wctx, key, func(st *coordinator.SessionState) bool {
		st.InjectedBytes += 10
		return true
	}); err != nil {
		t.Fatalf("a turn's session write while another realm's listings wait: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	for range flood {
		if err := <-errs; err != nil {
			t.Fatalf("a listing after the lock was released: %v", err)
		}
	}
}
