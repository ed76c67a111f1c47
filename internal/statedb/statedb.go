// Package statedb is the host's own state database: one SQLite file in
// data_dir holding what the host itself must remember across restarts
// (session budgets and dedup sets today; compaction summaries and
// watermarks later). Plugins keep their own stores; nothing here is theirs.
//
// Each package owning tables registers them with Migrate under its own
// component name, as an ordered list of schema steps. A step, once
// released, is never edited: a change is a new step appended to the list.
package statedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	sqlite3 "github.com/mattn/go-sqlite3"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/fairgate"
)

// FileName is the state database's file inside data_dir.
const FileName = "memhost-state.db"

// Sentinel errors for conditions an operator must act on. Every error from
// this package that stems from one of them wraps it.
var (
	// ErrStorageFull: the disk (or a size limit) has no room for a write.
	// The data already written stays readable. It is the SDK's sentinel,
	// so the API answers it as 507 storage_full like a provider's.
	ErrStorageFull = sdk.ErrNoSpace
	// ErrReadOnly: the file or its file system refuses writes (507
	// read_only).
	ErrReadOnly = sdk.ErrReadOnly
	// ErrNewerSchema: the file was migrated by a newer memhost. Its text
	// says what to do: the version numbers before it say the problem.
	ErrNewerSchema = errors.New("written by a newer memhost: upgrade memhost")
	// ErrInUse: another process has the database open. One data_dir
	// belongs to one host: the session cache is exact only then.
	ErrInUse = errors.New("in use by another memhost")
)

// synchronous=NORMAL in WAL mode: a commit survives a host crash (kill -9)
// but the last commits may be lost on a power cut. Session accounting can
// afford that; an fsync per turn would be the turn's largest cost.
// journal_size_limit cuts a WAL that grew past its bound (walBoundFrames
// pages: a large transaction, a checkpoint held back) back to it when it
// starts over; SQLite never shrinks it otherwise.
var connPragmas = `
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA foreign_keys = ON;
PRAGMA busy_timeout = 5000;
PRAGMA temp_store = MEMORY;
PRAGMA wal_autocheckpoint = 0;
PRAGMA journal_size_limit = ` + fmt.Sprint(walBoundFrames*walPageBytes) + `;
`

const driverName = "memhost-statedb"

// fcntlPersistWAL is SQLITE_FCNTL_PERSIST_WAL.
const fcntlPersistWAL = 10

var registerDriver = sync.OnceFunc(func() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{
		ConnectHook: func(c *sqlite3.SQLiteConn) error {
			// A persistent WAL keeps the -wal and -shm files at close:
			// SQLite otherwise deletes them, and a host restarted on a
			// full disk could not create them again (the -shm needs 32
			// KiB), so it would not start at all.
			if err := c.SetFileControlInt("main", fcntlPersistWAL, 1); err != nil {
				return err
			}
			_, err := c.Exec(connPragmas, nil)
			return err
		},
	})
})

// DB is an open state database. It is safe for concurrent use.
type DB struct {
	path string
	lock *os.File
	db   *sql.DB
	// reader has connections for listings alone (Read): a WAL reader
	// neither waits for the writer nor holds it. On the one connection, a
	// realm's 64 concurrent trace listings held every realm's turns
	// behind them (another realm's injects: p95 5 ms to 6.7 s).
	reader *sql.DB
	// reads lets listings in by realm, the realm reading least first.
	reads *fairgate.Gate
	// ckpt folds the WAL back off the write path (checkpoint.go).
	ckpt *checkpointer
	// file is the database file as opened: a write checks the path still
	// names it, since SQLite would go on writing to a file deleted or
	// replaced behind it, and lose all of it at the next start.
	file os.FileInfo
}

// Held reports whether a memhost holds the state database in dir (one
// serving it, or a command running its plugins), without taking it.
func Held(dir string) bool { return held(filepath.Join(dir, FileName) + ".lock") }

// Open opens (creating if needed) the state database in dir. The file is
// created with mode 0600 (and tightened to it if it was wider); SQLite
// gives the WAL and shared-memory files the same mode.
//
// A second process opening the same file is refused with ErrInUse.
func Open(ctx context.Context, dir string) (d *DB, err error) {
	registerDriver()
	path := filepath.Join(dir, FileName)
	lock, err := acquire(path + ".lock")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			release(lock)
		}
	}()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	f.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	db, err := sql.Open(driverName, dsn(path))
	if err != nil {
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	// One connection: the host's writes are small and serialized in Go
	// rather than by SQLite busy waits, and transactions never deadlock
	// upgrading a read lock.
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	reader, err := sql.Open(driverName, readerDSN(path))
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	reader.SetMaxOpenConns(readConns)
	reader.SetMaxIdleConns(readConns)
	d = &DB{path: path, lock: lock, db: db, reader: reader, reads: fairgate.New(readConns)}
	defer func() {
		if err != nil {
			reader.Close()
		}
	}()
	const meta = `CREATE TABLE IF NOT EXISTS statedb_migrations (
		component TEXT PRIMARY KEY,
		version   INTEGER NOT NULL
	) WITHOUT ROWID`
	if _, err := db.ExecContext(ctx, meta); err != nil {
		db.Close()
		return nil, d.wrap("open "+path, err)
	}
	if d.file, err = os.Stat(path); err != nil {
		db.Close()
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	if d.ckpt, err = startCheckpointer(path); err != nil {
		db.Close()
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	return d, nil
}

// dsn builds a URI for path, escaping what SQLite would read as URI syntax.
// The driver's statement cache keeps each query string prepared on the
// connection: a turn's session reads and writes then skip SQLite's parser,
// which was most of their cost.
func dsn(path string) string {
	return fileURI(path) + "?_txlock=immediate&_stmt_cache_size=32"
}

// readConns is the connections listings share: as many as the cores a
// small host has, since a listing is CPU work once its pages are cached.
const readConns = 2

// readerDSN is dsn for the listing connections: they refuse writes, their
// transactions do not take the write lock, and mode=rw never creates the
// file, which a path whose file was deleted would otherwise get afresh.
func readerDSN(path string) string {
	return fileURI(path) + "?mode=rw&_query_only=1&_stmt_cache_size=32"
}

func fileURI(path string) string {
	return "file:" + (&url.URL{Path: filepath.ToSlash(path)}).EscapedPath()
}

// SQL answers the underlying handle, for stores written against
// database/sql (internal/compaction). It has one connection: a query made
// on it while a Tx of the same goroutine is open waits forever.
func (d *DB) SQL() *sql.DB { return d.db }

// Path answers the database file's path.
func (d *DB) Path() string { return d.path }

// Close closes the database and releases it to other processes. Closing
// twice is harmless.
func (d *DB) Close() error {
	if d.ckpt != nil {
		d.ckpt.close()
	}
	d.reader.Close()
	err := d.db.Close()
	if d.lock != nil {
		release(d.lock)
		d.lock = nil
	}
	if err != nil {
		return d.wrap("close", err)
	}
	return nil
}

// Migrate brings component's tables to the latest of steps: steps[i] is
// the SQL taking the component from version i to i+1. Steps already
// applied are skipped; the rest run in one transaction with the version
// bump, so a failed step leaves the component at its old version. A file
// at a version beyond len(steps) is refused (ErrNewerSchema).
func (d *DB) Migrate(ctx context.Context, component string, steps []string) error {
	if component == "" {
		return fmt.Errorf("state database: migrate: empty component name")
	}
	return d.Tx(ctx, "migrate "+component, func(tx *sql.Tx) error {
		var v int
		err := tx.QueryRowContext(ctx, `SELECT version FROM statedb_migrations WHERE component = ?`, component).Scan(&v)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if v > len(steps) {
			return fmt.Errorf("component %q is at version %d, this memhost's is %d: %w", component, v, len(steps), ErrNewerSchema)
		}
		for i := v; i < len(steps); i++ {
			if _, err := tx.ExecContext(ctx, steps[i]); err != nil {
				return fmt.Errorf("step %d: %w", i+1, err)
			}
		}
		if v == len(steps) {
			return nil
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO statedb_migrations (component, version) VALUES (?, ?)
			ON CONFLICT (component) DO UPDATE SET version = excluded.version`, component, len(steps))
		return err
	})
}

// Version answers the schema version of component (0 when never migrated).
func (d *DB) Version(ctx context.Context, component string) (int, error) {
	var v int
	err := d.db.QueryRowContext(ctx, `SELECT version FROM statedb_migrations WHERE component = ?`, component).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, d.wrap("schema version", err)
	}
	return v, nil
}

// Tx runs fn in one write transaction and commits it when fn returns nil.
// fn uses tx only (the database has one connection: a query on DB inside
// fn would wait for fn forever) and returns errors unwrapped. Errors name
// op ("save session") but not the file, since they may reach an API
// client; a full disk or a read-only file wraps ErrStorageFull or
// ErrReadOnly.
func (d *DB) Tx(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	if err := d.moved(); err != nil {
		return d.wrap(op, err)
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return d.wrap(op, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return d.wrap(op, err)
	}
	if err := tx.Commit(); err != nil {
		return d.wrap(op, err)
	}
	d.ckpt.committed()
	return nil
}

// Read runs fn with a handle for listings (traces, proposals), let in by
// realm: fn's queries see what was committed when each began, and neither
// wait for the write connection nor hold it, so a turn's session write
// never queues behind a listing. Among realms waiting, the one reading
// least goes first, so a realm's flood of listings waits on itself. fn
// returns errors unwrapped; Read wraps them with op.
func (d *DB) Read(ctx context.Context, realm, op string, fn func(*sql.DB) error) error {
	if err := d.reads.Acquire(ctx, realm, 1); err != nil {
		return d.wrap(op, err)
	}
	defer d.reads.Release(realm, 1)
	if d.moved() != nil {
		// A new connection could not open the file opened; the write
		// connection still reads it.
		return d.Wrap(op, fn(d.db))
	}
	return d.Wrap(op, fn(d.reader))
}

// QueryRow and Exec run statements bounded by a key or a realm's bound (a
// turn's session visits, a count of a realm's sessions) without ctx's
// cancellation: watching a cancellable context costs database/sql and the
// driver a goroutine each per statement, and waking them cost a turn more
// than its statements (BenchmarkTurn, durable: 175 µs of CPU with them,
// 127 without). ctx bounds the wait for the connection, which another
// component may hold, and is checked before the statement.

// QueryRow runs one read outside any transaction and scans its one row
// into dest (sql.ErrNoRows when there is none); pass its error through
// Wrap. The connection is given back before it returns, whatever the
// caller does next.
func (d *DB) QueryRow(ctx context.Context, dest []any, query string, args ...any) error {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.QueryRowContext(context.WithoutCancel(ctx), query, args...).Scan(dest...)
}

// Exec runs one statement outside an explicit transaction.
func (d *DB) Exec(ctx context.Context, op, query string, args ...any) (sql.Result, error) {
	if err := d.moved(); err != nil {
		return nil, d.wrap(op, err)
	}
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, d.wrap(op, err)
	}
	defer conn.Close()
	r, err := conn.ExecContext(context.WithoutCancel(ctx), query, args...)
	if err != nil {
		return nil, d.wrap(op, err)
	}
	d.ckpt.committed()
	return r, nil
}

// moved answers an error wrapping ErrReadOnly when the path no longer
// names the file opened (deleted, renamed or replaced): writes would land
// in a file no later start reads.
func (d *DB) moved() error {
	if fi, err := os.Stat(d.path); err == nil && os.SameFile(fi, d.file) {
		return nil
	}
	return fmt.Errorf("%w: the database file was deleted or replaced while open; restart the host", ErrReadOnly)
}

// Wrap adds the file, op and any sentinel to an error from a query made
// through this database; nil stays nil.
func (d *DB) Wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	return d.wrap(op, err)
}

// wrap leaves the file's path out: these errors can reach an API client,
// and the path is logged once at start instead.
func (d *DB) wrap(op string, err error) error {
	return fmt.Errorf("state database: %s: %w", op, Classify(err))
}

// Classify adds to an error from a SQLite query the sentinel its code
// means: ErrStorageFull for a full disk, ErrReadOnly for a file that
// refuses writes, sdk.ErrUnavailable for a file another process holds
// locked past the busy timeout (a client tries again later); any other
// error comes back as it is. Every store on a host SQLite file passes its
// errors through it, so a full disk answers 507 storage_full on every
// path.
func Classify(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch se.Code {
		case sqlite3.ErrFull:
			return fmt.Errorf("%w: %w", ErrStorageFull, err)
		case sqlite3.ErrReadonly:
			return fmt.Errorf("%w: %w", ErrReadOnly, err)
		case sqlite3.ErrBusy, sqlite3.ErrLocked:
			return fmt.Errorf("%w (another process holds the file's write lock): %w", err, sdk.ErrUnavailable)
		}
		// A quota or a file-size limit reaches SQLite as an I/O error
		// with its errno, which SQLite's text already names.
		switch sdk.CodeOf(se.SystemErrno) {
		case sdk.CodeStorageFull:
			return fmt.Errorf("%w: %w", err, ErrStorageFull)
		case sdk.CodeReadOnly:
			return fmt.Errorf("%w: %w", err, ErrReadOnly)
		}
	}
	return err
}
