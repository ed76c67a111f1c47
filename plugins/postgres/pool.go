package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgdb is the provider's connection pool. Normally each connection
// carries the schema and statement timeout from its start (startup
// parameters). Behind a pooler in transaction mode (PgBouncer's
// pool_mode = transaction, transaction_pooling = true here) a connection is
// the server's only for one transaction, startup parameters are refused
// and session settings leak between clients: then every operation runs in
// a transaction whose BEGIN also sets both with SET LOCAL (one round trip),
// and no statement is prepared by name.
type pgdb struct {
	*pgxpool.Pool
	// setLocal follows BEGIN under transaction pooling; empty otherwise.
	setLocal string
}

// dbtx is what pool and transaction share.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func newPGDB(pool *pgxpool.Pool, set settings) *pgdb {
	d := &pgdb{Pool: pool}
	if set.transactionPooling {
		d.setLocal = fmt.Sprintf("; SET LOCAL search_path = %s; SET LOCAL statement_timeout = %d",
			pgx.Identifier{set.schema}.Sanitize(), set.statementTimeout.Milliseconds())
	}
	return d
}

// BeginTx begins a transaction, with the session settings under
// transaction pooling.
func (d *pgdb) BeginTx(ctx context.Context, o pgx.TxOptions) (pgx.Tx, error) {
	if d.setLocal != "" {
		o.BeginQuery = beginSQL(o) + d.setLocal
	}
	return d.Pool.BeginTx(ctx, o)
}

// Begin begins a read-committed read-write transaction.
func (d *pgdb) Begin(ctx context.Context) (pgx.Tx, error) { return d.BeginTx(ctx, pgx.TxOptions{}) }

// run runs fn on the pool itself, or under transaction pooling in a
// transaction of mode o (so the settings hold).
func (d *pgdb) run(ctx context.Context, o pgx.TxOptions, fn func(q dbtx) error) error {
	if d.setLocal == "" {
		return fn(d.Pool)
	}
	return pgx.BeginTxFunc(ctx, d, o, func(tx pgx.Tx) error { return fn(tx) })
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
