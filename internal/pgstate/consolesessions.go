package pgstate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// ConsoleSessions keeps the operator console's sign-ins for every host on
// the database (console.SharedSessions): a sign-in made through one host
// is one on all, and a sign-out on one ends it on all.
type ConsoleSessions struct{ db *DB }

// NewConsoleSessions answers the console's sign-ins on db.
func NewConsoleSessions(db *DB) *ConsoleSessions { return &ConsoleSessions{db: db} }

// Put stores a sign-in and keeps the bounds: the token's oldest beyond
// perToken go, then the oldest of all beyond total, expired ones first.
func (c *ConsoleSessions) Put(ctx context.Context, digest, token, csrf string, expires time.Time, perToken, total int) error {
	err := pgx.BeginFunc(ctx, c.db.pool, func(tx pgx.Tx) error {
		for _, stmt := range []struct {
			sql  string
			args []any
		}{
			{`DELETE FROM console_sessions WHERE expires_ms <= ` + dbNowMillis, nil},
			{`INSERT INTO console_sessions (digest, token, csrf, expires_ms) VALUES ($1, $2, $3, $4)`, []any{digest, token, csrf, expires.UnixMilli()}},
			{`DELETE FROM console_sessions WHERE digest IN (SELECT digest FROM console_sessions WHERE token = $1
				ORDER BY expires_ms DESC, digest OFFSET $2)`, []any{token, perToken}},
			{`DELETE FROM console_sessions WHERE digest IN (SELECT digest FROM console_sessions
				ORDER BY expires_ms DESC, digest OFFSET $1)`, []any{total}},
		} {
			if _, err := tx.Exec(ctx, c.db.q(stmt.sql), stmt.args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("console sign-ins: store: %w", classify(err))
	}
	return nil
}

// Get answers the sign-in of digest, if it has not expired.
func (c *ConsoleSessions) Get(ctx context.Context, digest string) (token, csrf string, expires time.Time, found bool, err error) {
	var ms int64
	err = c.db.pool.QueryRow(ctx, c.db.q(`SELECT token, csrf, expires_ms FROM console_sessions WHERE digest = $1 AND expires_ms > `+dbNowMillis), digest).
		Scan(&token, &csrf, &ms)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", "", time.Time{}, false, nil
	}
	if err != nil {
		return "", "", time.Time{}, false, fmt.Errorf("console sign-ins: read: %w", classify(err))
	}
	return token, csrf, time.UnixMilli(ms), true, nil
}

// Delete ends the sign-in of digest on every host.
func (c *ConsoleSessions) Delete(ctx context.Context, digest string) error {
	if _, err := c.db.pool.Exec(ctx, c.db.q(`DELETE FROM console_sessions WHERE digest = $1`), digest); err != nil {
		return fmt.Errorf("console sign-ins: delete: %w", classify(err))
	}
	return nil
}
