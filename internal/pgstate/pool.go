package pgstate

import (
	"context"
	"errors"
	"io"
	"net"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pool is the state database's connection pool. After a server restart
// or failover, or a backend terminated by an administrator, pooled
// connections are dead, and pgxpool pings only those idle for over a
// second before handing them out: on a busy host the next calls would
// each fail on one. So a call that failed on a dead connection before
// anything was done runs again on another: a transaction's BEGIN and a
// read whatever the failure, a write only when nothing reached the
// server (as the postgres provider's pool does).
type pool struct{ *pgxpool.Pool }

// maxStaleAttempts bounds the attempts of one call whose statement may
// have reached a connection found dead.
const maxStaleAttempts = 3

// staleConnection tells whether err is a pooled connection's failure
// rather than the server's answer or a refusal to connect, with the
// caller still waiting.
func staleConnection(ctx context.Context, err error) bool {
	var ce *pgconn.ConnectError
	var pe *pgconn.PgError
	if err == nil || ctx.Err() != nil || errors.As(err, &ce) {
		return false
	}
	if errors.As(err, &pe) {
		return pe.Code == codeAdminShutdown || pe.Code == codeCrashShutdown || pe.Code == codeIdleSessionTimeout // its backend was terminated
	}
	var ne net.Error
	return pgconn.SafeToRetry(err) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// unsent tells whether err says the statement never reached the server.
func unsent(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && pgconn.SafeToRetry(err)
}

// idleEnded tells whether err is the server ending a session that sat
// idle (idle_session_timeout): it is sent before the server reads the
// next statement.
func idleEnded(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == codeIdleSessionTimeout
}

// again runs fn until it succeeds, fails for another reason than retry
// accepts, or maxStaleAttempts are spent. A call that never reached the
// server (its connection found closed, or ended for idling) runs again, a
// write too, until it has tried every pooled connection and a new one, as
// pgxpool's own Acquire does: after a quiet spell shorter than the second
// past which the pool pings a connection before handing it out, every
// one may be dead.
func again[T any](ctx context.Context, p *pgxpool.Pool, retry func(context.Context, error) bool, fn func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		v, err := fn()
		if err == nil || ctx.Err() != nil {
			return v, err
		}
		if idleEnded(err) || pgconn.SafeToRetry(err) {
			if attempt <= int(p.Config().MaxConns) {
				continue
			}
			return v, err
		}
		if attempt >= maxStaleAttempts || !retry(ctx, err) {
			return v, err
		}
	}
}

// Begin begins a transaction (pgx.BeginFunc calls it).
func (p pool) Begin(ctx context.Context) (pgx.Tx, error) {
	return again(ctx, p.Pool, staleConnection, func() (pgx.Tx, error) { return p.Pool.Begin(ctx) })
}

// Query runs a read.
func (p pool) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return again(ctx, p.Pool, staleConnection, func() (pgx.Rows, error) { return p.Pool.Query(ctx, sql, args...) })
}

// QueryRow runs a read; its error, as pgx's, comes from Scan.
func (p pool) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return retriedRow{ctx: ctx, p: p.Pool, sql: sql, args: args}
}

type retriedRow struct {
	ctx  context.Context
	p    *pgxpool.Pool
	sql  string
	args []any
}

func (r retriedRow) Scan(dest ...any) error {
	_, err := again(r.ctx, r.p, staleConnection, func() (struct{}, error) {
		return struct{}{}, r.p.QueryRow(r.ctx, r.sql, r.args...).Scan(dest...)
	})
	return err
}

// Exec runs a write, again only when it never reached the server.
func (p pool) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return again(ctx, p.Pool, unsent, func() (pgconn.CommandTag, error) { return p.Pool.Exec(ctx, sql, args...) })
}
