package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/sdk/fairgate"
)

// pgdb is the provider's connection pool. Normally each connection
// carries the schema and statement timeout from its start (startup
// parameters). Behind a pooler in transaction mode (PgBouncer's
// pool_mode = transaction, transaction_pooling = true here) a connection is
// the server's only for one transaction, startup parameters are refused
// and session settings leak between clients: then every operation runs in
// a transaction whose BEGIN also sets both with SET LOCAL (one round trip),
// and no statement is prepared by name.
//
// Transactions and reads on the pool wait for a connection at slots (see
// admit), not in the pool's own queue.
type pgdb struct {
	*pgxpool.Pool
	// setLocal follows BEGIN under transaction pooling; empty otherwise.
	setLocal string
	// slots admits work to the pool, one slot a connection (see admit).
	slots *fairgate.Gate
}

type realmKey struct{}

// inRealm answers ctx naming the realm its work on the pool is for, the
// key admit waits by. Work of no realm (the replica's, the schema check)
// waits as one realm of its own.
func inRealm(ctx context.Context, realm string) context.Context {
	return context.WithValue(ctx, realmKey{}, realm)
}

// admit waits, within ctx, for a connection for the realm ctx names, and
// answers the func that gives it back (once, however often called). The
// pool hands its connections out in arrival order, so a realm's flood of
// manifests, exports or listings queued in front of every other realm's
// recall on the same provider: 64 full manifests of one realm made the
// recalls of another miss the host's 500 ms deadline. Here, across
// realms, the realm holding the fewest connections goes first (fairgate),
// and within a realm, arrival order.
func (d *pgdb) admit(ctx context.Context) (func(), error) {
	if d.slots == nil {
		return func() {}, nil
	}
	realm, _ := ctx.Value(realmKey{}).(string)
	if err := d.slots.Acquire(ctx, realm, 1); err != nil {
		return nil, err
	}
	return sync.OnceFunc(func() { d.slots.Release(realm, 1) }), nil
}

// admittedTx gives its connection's slot back when it ends.
type admittedTx struct {
	pgx.Tx
	release func()
}

func (t *admittedTx) Commit(ctx context.Context) error {
	defer t.release()
	return t.Tx.Commit(ctx)
}

func (t *admittedTx) Rollback(ctx context.Context) error {
	defer t.release()
	return t.Tx.Rollback(ctx)
}

// dbtx is what pool and transaction share.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

func newPGDB(pool *pgxpool.Pool, set settings) *pgdb {
	d := &pgdb{Pool: pool, slots: fairgate.New(int64(pool.Config().MaxConns))}
	if set.transactionPooling {
		// The idle timeout as config.go sets it without a pooler.
		d.setLocal = "; SET LOCAL search_path = " + pgx.Identifier{set.schema}.Sanitize() + "; " + timeoutsSQL(set.statementTimeout, set.statementTimeout)
	}
	return d
}

// maintenanceTimeout is the least each statement, and each idle gap
// between statements, of the work that serves no request may take: a
// migration, the schema check, a replica's load. The configured
// statement_timeout is meant for requests; on a loaded server a short one
// ended this work between round trips, and the store did not open or the
// replica never loaded. A host that froze mid-transaction still frees what
// it held within the bound.
const maintenanceTimeout = time.Minute

// setTimeouts gives the rest of tx its statement and idle timeouts (0:
// none).
func setTimeouts(ctx context.Context, tx pgx.Tx, statement, idle time.Duration) error {
	_, err := tx.Exec(ctx, timeoutsSQL(statement, idle))
	return err
}

// withTimeouts answers o beginning its transaction with the statement and
// idle timeouts given, set in BEGIN's own round trip: set by a statement
// after it, the gap between the two ran under the session's idle
// timeout, and a client descheduled that long on a loaded machine had the
// server end the transaction (SQLSTATE 25P03) before its timeouts were
// set.
func withTimeouts(o pgx.TxOptions, statement, idle time.Duration) pgx.TxOptions {
	o.BeginQuery = beginSQL(o) + "; " + timeoutsSQL(statement, idle)
	return o
}

// timeoutsSQL sets a transaction's statement and idle timeouts.
func timeoutsSQL(statement, idle time.Duration) string {
	return fmt.Sprintf("SET LOCAL statement_timeout = %d; SET LOCAL idle_in_transaction_session_timeout = %d", statement.Milliseconds(), idle.Milliseconds())
}

// BeginTx begins a transaction, with the session settings under
// transaction pooling. A BEGIN that fails on a connection the server
// closed while it sat in the pool is begun again on another: nothing
// happened yet, and after a server restart or failover every pooled
// connection is dead (the pool pings only those idle over a second).
func (d *pgdb) BeginTx(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error) {
	if d.setLocal != "" {
		// The session's settings first: a BeginQuery withTimeouts made
		// sets its own timeouts after them.
		o.BeginQuery = beginSQL(o) + d.setLocal + strings.TrimPrefix(o.BeginQuery, beginSQL(o))
	}
	release, err := d.admit(ctx)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		tx, err := d.Pool.BeginTx(ctx, o)
		if err == nil {
			return &admittedTx{Tx: tx, release: release}, nil
		}
		if !d.again(ctx, attempt, err, staleConnection(ctx, err)) {
			release()
			return nil, err
		}
	}
}

// again tells whether a call that failed with err at its attempt-th try
// runs again: when retryable, up to maxStaleAttempts. A call that never
// reached the server (its connection found closed, or ended by the server
// for idling, idle_session_timeout) runs again, a write too, until it has
// tried every pooled connection and a new one, as pgxpool's own Acquire
// does: after a quiet spell shorter than the second past which the pool
// pings a connection before handing it out, every one may be dead.
func (d *pgdb) again(ctx context.Context, attempt int, err error, retryable bool) bool {
	if ctx.Err() != nil {
		return false
	}
	if idleEnded(err) || pgconn.SafeToRetry(err) {
		return attempt <= int(d.Config().MaxConns)
	}
	return retryable && attempt < maxStaleAttempts
}

// maxStaleAttempts bounds the attempts of one call whose statement may
// have reached a connection found dead.
const maxStaleAttempts = 3

// idleEnded tells whether err is the server ending a session that sat
// idle: it is sent before the server reads the next statement.
func idleEnded(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == codeIdleSessionTimeout
}

// staleConnection tells whether err is a pooled connection's failure
// rather than the server's answer or a refusal to connect (which the
// refusal pause governs), with the caller still waiting.
func staleConnection(ctx context.Context, err error) bool {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	if ctx.Err() != nil || errors.As(err, &ce) {
		return false
	}
	if errors.As(err, &pe) {
		return pe.Code == codeAdminShutdown || pe.Code == codeCrashShutdown || pe.Code == codeIdleSessionTimeout // its backend was terminated
	}
	var ne net.Error
	return pgconn.SafeToRetry(err) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Begin begins a read-committed read-write transaction.
func (d *pgdb) Begin(ctx context.Context) (pgx.Tx, error) { return d.BeginTx(ctx, pgx.TxOptions{}) }

// run runs fn on the pool itself, or under transaction pooling in a
// transaction of mode o (so the settings hold).
// On the pool itself a read runs again when its connection was found
// dead; a write always runs in a transaction.
func (d *pgdb) run(ctx context.Context, o pgx.TxOptions, fn func(q dbtx) error) error {
	if d.setLocal != "" || o.AccessMode != pgx.ReadOnly {
		// A write runs in a transaction, whose BEGIN alone runs again on
		// a dead connection: fn's statements each take a pooled
		// connection of their own, so running fn again after its second
		// found one dead would apply its first twice.
		return pgx.BeginTxFunc(ctx, d, o, func(tx pgx.Tx) error { return fn(tx) })
	}
	release, err := d.admit(ctx)
	if err != nil {
		return err
	}
	defer release()
	for attempt := 1; ; attempt++ {
		err := fn(d.Pool)
		retryable := staleConnection(ctx, err) || pgconn.SafeToRetry(err)
		if err == nil || !d.again(ctx, attempt, err, retryable) {
			return err
		}
	}
}

var readOnly = pgx.TxOptions{AccessMode: pgx.ReadOnly}

// beginSQL is the BEGIN statement of o.
func beginSQL(o pgx.TxOptions) string {
	s := "BEGIN"
	if o.IsoLevel != "" {
		s += " ISOLATION LEVEL " + string(o.IsoLevel)
	}
	if o.AccessMode != "" {
		s += " " + string(o.AccessMode)
	}
	if o.DeferrableMode != "" {
		s += " " + string(o.DeferrableMode)
	}
	return s
}
