// Package pgstate keeps the host state that many hosts must share in
// PostgreSQL: session budgets and dedup sets (a coordinator.SessionStore)
// and compaction state (a compaction.Store). With it, any host behind a
// load balancer can serve any turn of any session.
//
// There is no cache in front of the database: a cached state would be
// stale the moment another host wrote the session. A read-only visit is
// one SELECT; a visit that changes state is one transaction that locks
// the session's row (SELECT ... FOR UPDATE), so concurrent turns of one
// session on any number of hosts are applied one after another.
package pgstate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/sdk"
)

// Defaults of Options.
const (
	DefaultSchema           = "memhost_state"
	DefaultPoolSize         = 8
	DefaultStatementTimeout = 5 * time.Second
)

// ErrInvalid marks a connection string or schema name that cannot be used.
var ErrInvalid = errors.New("invalid shared state settings")

var schemaNameRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Options tune a DB. Zero values take the defaults.
type Options struct {
	// Schema holds the tables; created on first start. It may sit in the
	// provider's database, beside the provider's own schema.
	Schema           string
	PoolSize         int
	StatementTimeout time.Duration
}

// DB is a pool on the shared state database, migrated.
type DB struct {
	pool   *pgxpool.Pool
	schema string
	prefix string // the quoted schema and a dot
}

// Open connects to dsn and migrates the schema. Errors never repeat dsn,
// which may hold a password.
func Open(ctx context.Context, dsn string, opts Options) (*DB, error) {
	if opts.Schema == "" {
		opts.Schema = DefaultSchema
	}
	if opts.PoolSize <= 0 {
		opts.PoolSize = DefaultPoolSize
	}
	if opts.StatementTimeout <= 0 {
		opts.StatementTimeout = DefaultStatementTimeout
	}
	if !schemaNameRE.MatchString(opts.Schema) {
		return nil, fmt.Errorf("shared state: schema %q must be 1-63 lower-case letters, digits or underscores: %w", opts.Schema, ErrInvalid)
	}
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("shared state: the connection string does not parse: %w", ErrInvalid)
	}
	pc.MaxConns = int32(opts.PoolSize)
	rp := pc.ConnConfig.RuntimeParams
	rp["statement_timeout"] = fmt.Sprint(opts.StatementTimeout.Milliseconds())
	if rp["application_name"] == "" {
		rp["application_name"] = "memhost-host"
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("shared state: connect: %w", classify(err))
	}
	db := &DB{pool: pool, schema: opts.Schema, prefix: pgx.Identifier{opts.Schema}.Sanitize() + "."}
	if err := db.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return db, nil
}

// q qualifies the table names of a statement with the schema: statements
// never rely on search_path, which a connection pooler (PgBouncer) may not
// pass through, and which the postgres provider sets to its own schema.
func (db *DB) q(sql string) string {
	return tableRE.ReplaceAllStringFunc(sql, func(t string) string { return db.prefix + t })
}

var tableRE = regexp.MustCompile(`\b(sessions|compaction_state|proposals|turn_trace)\b`)

// Close closes the pool.
func (db *DB) Close() { db.pool.Close() }

// migrations are the schema steps; append, never edit.
var migrations = []string{
	`CREATE TABLE sessions (
		realm      text        NOT NULL,
		identity   text        NOT NULL,
		session    text        NOT NULL,
		state      jsonb       NOT NULL,
		touched_at timestamptz NOT NULL,
		PRIMARY KEY (realm, identity, session)
	);
	CREATE INDEX sessions_by_realm_age ON sessions (realm, touched_at);
	CREATE INDEX sessions_by_age ON sessions (touched_at);
	CREATE TABLE compaction_state (
		realm            text   NOT NULL,
		conversation     text   NOT NULL,
		watermark        bigint NOT NULL,
		prefix_hash      text   NOT NULL,
		artifact_role    text   NOT NULL,
		artifact_content text   NOT NULL,
		updated_at_ms    bigint NOT NULL,
		PRIMARY KEY (realm, conversation)
	);`,
	consoleMigration,
}

// migrateLockKey is the first key of the migration advisory lock ("mhst");
// the second is the schema's hash, so two schemas migrate independently.
const migrateLockKey = 0x6d687374

// migrate applies missing steps in one transaction under an advisory
// lock, so hosts starting together apply each step once.
func (db *DB) migrate(ctx context.Context) error {
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, migrateLockKey, db.schema); err != nil {
			return err
		}
		ident := pgx.Identifier{db.schema}.Sanitize()
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+ident); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+ident+`.state_migrations (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM `+ident+`.state_migrations`).Scan(&have); err != nil {
			return err
		}
		if have > len(migrations) {
			return fmt.Errorf("schema %s is at version %d, newer than this host's %d (upgrade the host): %w", db.schema, have, len(migrations), ErrInvalid)
		}
		for v := have; v < len(migrations); v++ {
			if _, err := tx.Exec(ctx, `SET LOCAL search_path TO `+ident); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, migrations[v]); err != nil {
				return fmt.Errorf("step %d: %w", v+1, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+ident+`.state_migrations (version) VALUES ($1)`, v+1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("shared state: migrate: %w", classify(err))
	}
	return nil
}

// SQLSTATE codes branched on.
const (
	codeSerialization    = "40001"
	codeDeadlock         = "40P01"
	codeQueryCanceled    = "57014"
	codeAdminShutdown    = "57P01"
	codeCrashShutdown    = "57P02"
	codeCannotConnectNow = "57P03"
)

// classify marks a server that cannot be reached or is going down as
// sdk.ErrUnavailable and a timeout as sdk.ErrDeadline, so the API answers
// 503 / 504 during an outage rather than 500.
func classify(err error) error {
	if err == nil || errors.Is(err, sdk.ErrUnavailable) || errors.Is(err, sdk.ErrDeadline) || errors.Is(err, ErrInvalid) {
		return err
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == codeQueryCanceled:
			return fmt.Errorf("%w: %w", sdk.ErrDeadline, err)
		case pe.Code == codeAdminShutdown, pe.Code == codeCrashShutdown, pe.Code == codeCannotConnectNow,
			len(pe.Code) == 5 && pe.Code[:2] == "08":
			return fmt.Errorf("%w: %w", sdk.ErrUnavailable, err)
		}
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", sdk.ErrDeadline, err)
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || errors.As(err, &ne) || pgconn.SafeToRetry(err) || errors.Is(err, pgx.ErrTxClosed) || pgconn.Timeout(err) {
		return fmt.Errorf("%w: %w", sdk.ErrUnavailable, err)
	}
	// A connection dropped mid-statement surfaces as a bare EOF.
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("%w: %w", sdk.ErrUnavailable, err)
	}
	return err
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}
