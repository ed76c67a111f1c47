package pgstate

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// renewer is the connection compaction holds are renewed on: one of its
// own, outside the pool. When a failover or a dropped NAT entry leaves
// the pooled connections dead without a word, each renewal sent on one
// gives up at its tick, and the pool's places may all be kept by calls
// waiting on dead connections; renewals on the pool could then not run at
// all while the database stood reachable, and the hold lapsed under a
// running compaction. A renewal here that gives
// up leaves this connection closed, and the next opens another. It is
// opened at the first renewal and shared by every hold on the database,
// one renewal at a time.
type renewer struct {
	cfg *pgx.ConnConfig
	// turn is held by the renewal under way, and guards conn and closed.
	turn   chan struct{}
	conn   *pgx.Conn
	closed bool
}

var errRenewerClosed = errors.New("the state database is closed")

func newRenewer(cfg *pgx.ConnConfig) *renewer {
	return &renewer{cfg: cfg.Copy(), turn: make(chan struct{}, 1)}
}

// exec runs sql on the renewal connection, opening it first if it is not
// open; ctx bounds both. A connection found closed, or ended by the server
// for idling between compactions, before sql reached the server is
// replaced once.
func (r *renewer) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return pgconn.CommandTag{}, ctx.Err()
	}
	defer func() { <-r.turn }()
	for attempt := 1; ; attempt++ {
		if r.closed {
			return pgconn.CommandTag{}, errRenewerClosed
		}
		if r.conn == nil || r.conn.IsClosed() {
			conn, err := pgx.ConnectConfig(ctx, r.cfg)
			if err != nil {
				return pgconn.CommandTag{}, err
			}
			r.conn = conn
		}
		tag, err := r.conn.Exec(ctx, sql, args...)
		if attempt == 1 && (idleEnded(err) || unsent(ctx, err)) {
			r.conn.Close(ctx)
			r.conn = nil
			continue
		}
		return tag, err
	}
}

// close closes the renewal connection; renewals after it fail.
func (r *renewer) close(ctx context.Context) {
	select {
	case r.turn <- struct{}{}:
	case <-ctx.Done():
		return
	}
	defer func() { <-r.turn }()
	r.closed = true
	if r.conn != nil {
		r.conn.Close(ctx)
		r.conn = nil
	}
}
