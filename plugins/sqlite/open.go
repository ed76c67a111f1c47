package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/fairgate"
	"github.com/memhost/memhost/sdk/filelock"
	memindex "github.com/memhost/memhost/sdk/index"
)

// Durability: the database runs in WAL mode with synchronous=FULL, so a
// commit returns only after its WAL frames are fsynced. An acknowledged
// write therefore survives kill -9 of the plugin (which WAL alone already
// guarantees: the frames are in the OS page cache) and also a power cut or
// kernel crash (which synchronous=NORMAL would not). Batches make the fsync
// per commit, not per record, so the cost is small.
const connPragmas = `
PRAGMA foreign_keys = ON;
PRAGMA synchronous = FULL;
PRAGMA temp_store = MEMORY;
PRAGMA mmap_size = 0;
PRAGMA journal_size_limit = 67108864;
PRAGMA wal_autocheckpoint = 0;
`

// Memory is sized on purpose (the plugin's RSS is the index plus these):
// recall reads only the few rows it answers, by primary key, so readers
// need little page cache; the writer walks the records' b-tree indexes and
// gets more. No mmap: mapped pages count as the plugin's resident memory,
// and the OS page cache serves the same reads without that.
const (
	writerCacheKiB = 16 << 10
	readerCacheKiB = 4 << 10
)

// readers bounds the read connections; WAL lets them all read while the one
// writer writes. Two match the cores recall runs on.
const readers = 2

const driverName = "memhost-sqlite3"

// fcntlPersistWAL is SQLITE_FCNTL_PERSIST_WAL.
const fcntlPersistWAL = 10

var registerDriver = sync.OnceFunc(func() {
	sql.Register(driverName, &sqlite3.SQLiteDriver{
		ConnectHook: func(c *sqlite3.SQLiteConn) error {
			if err := c.RegisterFunc(usageKeySQL, usageKeyFunc, true); err != nil {
				return err
			}
			// A persistent WAL keeps the -wal and -shm files when the
			// last connection closes: deleted, they must be made again
			// at the next open (the -shm needs 32 KiB), and a store
			// reopened on a full disk could not open at all.
			if err := c.SetFileControlInt("main", fcntlPersistWAL, 1); err != nil {
				return err
			}
			_, err := c.Exec(connPragmas, nil)
			return err
		},
	})
})

// database is one open database file.
type database struct {
	path string
	// file is the database file opened: a write checks that path still
	// names it (moved).
	file os.FileInfo
	lock *filelock.Lock
	// w has one connection, so writes are serialized in Go rather than by
	// SQLite's busy waits; r serves reads concurrently.
	w, r *sql.DB
	// slots admits reads to r, one slot a connection (see acquireRead).
	slots *fairgate.Gate
	opts  options
	log   *slog.Logger
	maint *maintainer
	ckpt  *checkpointer // folds the WAL back (checkpoint.go)

	// ix answers recall. wmu serializes write transactions; imu the index
	// updates. A write queues its index change (pending, under qmu) before
	// it lets go of wmu, and whoever holds imu applies the queue in commit
	// order while the next transaction already runs. A snapshot holds imu
	// while it encodes the index, which delays applying changes, never a
	// write. smu serializes writing the snapshot file; the lock order is
	// smu, wmu, imu, qmu. snapGen is the generation the snapshot file
	// holds (noSnapshot when none matches), written under wmu and imu;
	// fromSnapshot tells how this open built the index.
	ix           *memindex.Index
	used         usageOrder // the used records in rank order (usage.go)
	smu          sync.Mutex
	wmu          sync.Mutex
	live         liveContent // under wmu (content.go)
	imu          sync.Mutex
	qmu          sync.Mutex
	pending      []pendingChange
	pendingOps   int // the operations pending holds
	snapGen      uint64
	fromSnapshot bool
	// store is the database's identity (index_gen.store), which stamps
	// the snapshot and the index log.
	store []byte
	// appliedLogEnd is where appliedGen's log frame ends (an
	// indexLog.end position), under imu.
	appliedLogEnd int64

	// tap, under imu, collects the index changes committed while a
	// reindex reads the records (reindex.go); reindexing admits one
	// reindex at a time.
	tap        *reindexTap
	reindexing chan struct{}
	// ilog carries the index's changes since the snapshot (indexlog.go);
	// replayed counts the frames this open replayed from it.
	ilog     *indexLog
	replayed uint64
	// committedGen is the generation of the last commit that changed the
	// index, appliedGen of the last change applied to it; applied is
	// signalled (under applyMu) as appliedGen moves.
	committedGen, appliedGen atomic.Uint64
	applyMu                  sync.Mutex
	applied                  *sync.Cond
}

// dsn builds a URI for path, escaping what SQLite would read as URI syntax.
func dsn(path string, params ...string) string {
	p := filepath.ToSlash(path)
	if !strings.HasPrefix(p, "/") {
		p = "/" + p // a Windows drive path
	}
	return "file:" + (&url.URL{Path: p}).EscapedPath() + "?" + strings.Join(params, "&")
}

// openDatabase opens (creating if needed) the database at path: takes the
// lock, switches to WAL, migrates, and checks the schema and index answer.
// Every failure names the file.
func openDatabase(ctx context.Context, path string, opts options, log *slog.Logger) (*database, error) {
	registerDriver()
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: path %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: create directory for %s: %w", abs, err)
	}
	// The lock, the snapshot and the index log belong to the file, not to
	// a name for it: a second host configured with a link to the file
	// must find the first one's lock. (A file not yet created has no
	// links to resolve.)
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	lock, err := lockFile(abs + ".lock")
	if err != nil {
		return nil, err
	}
	d := &database{path: abs, lock: lock, opts: opts, log: log, slots: fairgate.New(int64(readers)), reindexing: make(chan struct{}, 1)}
	d.applied = sync.NewCond(&d.applyMu)
	if err := d.open(ctx); err != nil {
		d.close()
		return nil, describeOpenError(abs, opts.busyTimeout, err)
	}
	if d.ckpt, err = startCheckpointer(d); err != nil {
		d.close()
		return nil, describeOpenError(abs, opts.busyTimeout, err)
	}
	d.maint = startMaintainer(d)
	return d, nil
}

func (d *database) open(ctx context.Context) error {
	// Memories are private: create the file owner-only (SQLite gives its
	// -wal and -shm files the same mode).
	if f, err := os.OpenFile(d.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return err
	}
	// The driver's statement cache makes each query string a prepared
	// statement, reused across calls on a connection.
	busy := fmt.Sprintf("_busy_timeout=%d", d.opts.busyTimeout.Milliseconds())
	const cache = "_stmt_cache_size=64"
	var err error
	if d.w, err = sql.Open(driverName, dsn(d.path, busy, cache, "_txlock=immediate", fmt.Sprintf("_cache_size=-%d", writerCacheKiB))); err != nil {
		return err
	}
	d.w.SetMaxOpenConns(1)
	d.w.SetMaxIdleConns(1)
	var mode string
	if err := d.w.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode); err != nil {
		return err
	}
	if mode != "wal" {
		return fmt.Errorf("could not switch to WAL mode (journal mode is %q)", mode)
	}
	// migrate takes the write lock (BEGIN IMMEDIATE) even when there is
	// nothing to do, so a database another process holds locked fails here.
	if err := migrate(ctx, d.w, d.log); err != nil {
		return err
	}
	if d.r, err = sql.Open(driverName, dsn(d.path, busy, cache, "_query_only=1", fmt.Sprintf("_cache_size=-%d", readerCacheKiB))); err != nil {
		return err
	}
	d.r.SetMaxOpenConns(readers)
	d.r.SetMaxIdleConns(readers)
	if err := d.check(ctx); err != nil {
		return err
	}
	if d.file, err = os.Stat(d.path); err != nil {
		return err
	}
	// The live contents and the usage order are read beside the index
	// load: they are mostly SQLite's work, the index Go's decoding.
	loaded := make(chan error, 1)
	go func() { loaded <- errors.Join(d.live.load(ctx, d.r), d.used.load(ctx, d.r)) }()
	return errors.Join(d.loadIndex(ctx), <-loaded)
}

// check reads the tables, so a damaged file fails at start rather than on
// the first call.
func (d *database) check(ctx context.Context) error {
	var n int64
	if _, err := indexGen(ctx, d.r); err != nil {
		return err
	}
	if err := d.r.QueryRowContext(ctx, "SELECT count(*) FROM (SELECT 1 FROM records LIMIT 1)").Scan(&n); err != nil {
		return fmt.Errorf("read records: %w", err)
	}
	return nil
}

// describeOpenError turns SQLite's terse codes into a line an operator can
// act on. The line says the problem once: in its own words, not again in
// SQLite's ("database or disk is full") nor in its class's ("storage
// full"), which the error still matches.
func describeOpenError(path string, busy time.Duration, err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) {
		var problem string
		var class error
		switch se.Code {
		case sqlite3.ErrNotADB:
			problem = "not an SQLite database (corrupt, encrypted or another kind of file)"
		case sqlite3.ErrCorrupt:
			problem = "the database is corrupt; restore it from a backup"
		case sqlite3.ErrBusy, sqlite3.ErrLocked:
			problem, class = fmt.Sprintf("the database is locked by another process (waited %v)", busy), sdk.ErrConflict
		case sqlite3.ErrFull:
			problem, class = "the disk is full", sdk.ErrNoSpace
		case sqlite3.ErrReadonly:
			// The database, its -wal or -shm file, or their directory:
			// SQLite does not say which, and a writable directory with a
			// read-only -shm reads the same.
			problem, class = "the database or a file SQLite keeps beside it (-wal, -shm) is read-only, or their directory is; memhost needs to write them", sdk.ErrReadOnly
		case sqlite3.ErrCantOpen, sqlite3.ErrPerm:
			problem = "cannot open the file for writing"
		}
		if problem != "" {
			// What the open was doing ("migrate to schema version 9")
			// is err's text before SQLite's words.
			if doing, ok := strings.CutSuffix(err.Error(), ": "+se.Error()); ok {
				problem = doing + ": " + problem
			}
			e := &openError{msg: fmt.Sprintf("sqlite: open %s: %s", path, problem), errs: []error{err}}
			if class != nil {
				e.errs = append(e.errs, class)
			}
			return e
		}
	}
	return fmt.Errorf("sqlite: open %s: %w", path, storageError(err))
}

// openError is a failed open said in words of its own; it matches the
// errors it describes (SQLite's, and the class of the problem).
type openError struct {
	msg  string
	errs []error
}

func (e *openError) Error() string   { return e.msg }
func (e *openError) Unwrap() []error { return e.errs }

// close stops maintenance, checkpoints the WAL into the database and
// releases the lock. It is safe on a half-opened database.
func (d *database) close() error {
	if d.maint != nil {
		d.maint.stop()
	}
	_ = d.awaitIndex(context.Background()) // before the log and the snapshot are touched
	var errs []error
	if d.r != nil {
		errs = append(errs, d.r.Close())
	}
	if d.w != nil && d.ix != nil && d.maint != nil {
		if err := d.snapshot(context.Background()); err != nil {
			d.log.Warn("the next open rebuilds the recall index", "error", err.Error())
		}
	}
	if d.ilog != nil {
		errs = append(errs, d.ilog.close())
	}
	if d.ckpt != nil {
		errs = append(errs, d.ckpt.close())
	}
	if d.w != nil {
		// Best effort: fold the WAL back so the file stands alone.
		_, _ = d.w.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
		errs = append(errs, d.w.Close())
	}
	d.lock.Release()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sqlite: close %s: %w", d.path, err)
	}
	return nil
}

// indexChange collects what a write transaction does to the in-memory
// state beside the database: the recall index's changes, applied once it
// commits, and its view of the live contents (content.go).
type indexChange struct {
	ops     []indexOp
	content contentChange
	used    []usedRow // new usage keys of active records
	unused  []usedRow // records that left recall, out of the usage order
}

// unrank notes that the record at seq left recall: the usage order forgets
// it once the transaction commits.
func (c *indexChange) unrank(realm string, scope sdk.Scope, seq int64) {
	c.unused = append(c.unused, usedRow{seq: seq, realm: realm, scope: scope})
}

func (c *indexChange) put(seq int64, r *sdk.Record, doc *indexDoc) {
	c.ops = append(c.ops, indexOp{doc: putDoc(seq, r, doc)})
}

func (c *indexChange) del(realm, id string) {
	c.ops = append(c.ops, indexOp{del: true, realm: realm, id: id})
}

// write runs fn in one write transaction (BEGIN IMMEDIATE). When fn
// changed the index it bumps index_gen, and after the commit applies the
// change to the in-memory index; maintenance hears of the write.
func (d *database) write(ctx context.Context, fn func(tx *sql.Tx, ch *indexChange) error) error {
	return storageError(d.writeTx(ctx, fn))
}

// run begins a write transaction and runs fn in it, answering the open
// transaction and its changes; on failure the transaction is rolled back.
func (d *database) run(ctx context.Context, fn func(tx *sql.Tx, ch *indexChange) error) (*sql.Tx, *indexChange, error) {
	tx, err := d.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, nil, err
	}
	ch := &indexChange{content: contentChange{base: &d.live}}
	if d.live.stale {
		err = d.live.load(ctx, tx)
	}
	if err == nil {
		err = fn(tx, ch)
	}
	if err != nil {
		tx.Rollback()
		return nil, nil, err
	}
	return tx, ch, nil
}

// errMoved refuses a write to a database file deleted or replaced while
// open (its data directory removed, say): the write would be acknowledged
// into a file no later start reads.
var errMoved = fmt.Errorf("the database file was deleted or replaced while open, so a write would be lost; restore it or restart the plugin: %w", sdk.ErrReadOnly)

// moved answers errMoved when the path no longer names the file opened.
func (d *database) moved() error {
	if fi, err := os.Stat(d.path); err == nil && os.SameFile(fi, d.file) {
		return nil
	}
	return errMoved
}

func (d *database) writeTx(ctx context.Context, fn func(tx *sql.Tx, ch *indexChange) error) error {
	if err := d.moved(); err != nil {
		return err
	}
	d.wmu.Lock()
	defer d.wmu.Unlock()
	tx, ch, err := d.run(ctx, fn)
	if errors.Is(err, errStaleContent) {
		// Only a bug or a hand edit of the file gets here: the records
		// are the truth, so the map is reloaded and the write runs again.
		d.log.Warn("reloading the live contents", "error", err.Error())
		d.live.stale = true
		tx, ch, err = d.run(ctx, fn)
	}
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var gen uint64
	if len(ch.ops) > 0 {
		if err := tx.QueryRowContext(ctx, "UPDATE index_gen SET gen = gen + 1 WHERE one = 1 RETURNING gen").Scan(&gen); err != nil {
			return err
		}
	}
	// A write whose deadline passed while it ran is not committed: its
	// caller was answered deadline_exceeded.
	if err := sdk.ContextErr(ctx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		// Whether SQLite kept the transaction is not known here.
		d.live.stale = true
		return err
	}
	ch.content.commit()
	d.used.drop(ch.unused)
	d.used.set(ch.used)
	d.ckpt.noteCommit(len(ch.ops))
	if len(ch.ops) == 0 {
		return nil
	}
	// The log frame is written before the answer (a kill -9 after it then
	// replays rather than rebuilds), under wmu, so frames follow commit
	// order.
	if err := d.ilog.append(gen, ch.ops); err != nil {
		// The commit stands; the next open without a fresh snapshot
		// rebuilds instead of replaying.
		d.log.Warn("the index log stops until the next snapshot", "error", err.Error())
	}
	// The write is durable and answered now; its index change is applied
	// behind the answer, overlapping the caller's next request. Recall
	// waits for it (awaitIndex), so a caller still reads its own writes.
	d.qmu.Lock()
	d.pending = append(d.pending, pendingChange{gen: gen, ops: ch.ops, logEnd: d.ilog.end()})
	d.pendingOps += len(ch.ops)
	full := d.pendingOps > maxPendingOps
	d.qmu.Unlock()
	d.committedGen.Store(gen)
	go d.applyPending()
	if full {
		// The queue holds every queued record's document: past the bound
		// (a bulk import during a snapshot of a large index), writes wait
		// for it to be applied, holding wmu, rather than grow it. The
		// write is committed: its answer waits for the queue regardless.
		_ = d.awaitIndex(context.Background())
	}
	return nil
}

// maxPendingOps bounds the index changes queued while a snapshot encodes
// the index: a few megabytes of documents, many interactive writes, and
// a few batches of an import.
const maxPendingOps = 4096

// pendingChange is a committed index change not yet applied: its
// generation, its operations and where its log frame ends.
type pendingChange struct {
	gen    uint64
	ops    []indexOp
	logEnd int64
}

// applyPending applies the queued index changes.
func (d *database) applyPending() {
	d.imu.Lock()
	defer d.imu.Unlock()
	d.applyPendingLocked()
}

// applyPendingLocked applies the queued index changes in commit order; the
// caller holds imu. Holding wmu too, the index is then the database's.
func (d *database) applyPendingLocked() {
	d.qmu.Lock()
	queue := d.pending
	d.pending, d.pendingOps = nil, 0
	d.qmu.Unlock()
	for _, c := range queue {
		if err := applyOps(d.ix, c.ops); err != nil {
			// Only a document the index refuses as malformed gets here,
			// which prepareRecord rules out; the next open rebuilds.
			d.log.Error("the recall index missed a committed change", "error", err.Error())
		}
		if d.tap != nil {
			d.tap.ops = append(d.tap.ops, c.ops...)
		}
		d.appliedLogEnd = c.logEnd
		d.applyMu.Lock()
		d.appliedGen.Store(c.gen)
		d.applied.Broadcast()
		d.applyMu.Unlock()
	}
	if len(queue) > 0 {
		d.maint.noteWrite()
	}
}

// awaitIndex returns once every index change committed before the call
// has been applied: at once when none is in flight. A change waits for a
// snapshot being encoded (it holds imu), which at a large index takes
// seconds, so the wait ends with ctx too, answering its error.
func (d *database) awaitIndex(ctx context.Context) error {
	want := d.committedGen.Load()
	if d.appliedGen.Load() >= want {
		return nil
	}
	stop := context.AfterFunc(ctx, func() {
		d.applyMu.Lock()
		d.applied.Broadcast()
		d.applyMu.Unlock()
	})
	defer stop()
	d.applyMu.Lock()
	defer d.applyMu.Unlock()
	for d.appliedGen.Load() < want {
		if err := ctx.Err(); err != nil {
			return err
		}
		d.applied.Wait()
	}
	return nil
}

// storageError classifies a write failure: SQLITE_FULL (or an I/O error
// whose errno is EDQUOT or EFBIG) is a full disk, SQLITE_READONLY or EROFS a
// read-only store, SQLITE_BUSY past the busy timeout a store another
// process holds for now (unavailable: the client tries again later);
// anything else is returned as it is.
func storageError(err error) error {
	var se sqlite3.Error
	if errors.As(err, &se) {
		switch {
		case se.Code == sqlite3.ErrFull:
			return fmt.Errorf("%w: %w", err, sdk.ErrNoSpace)
		case se.Code == sqlite3.ErrReadonly:
			return fmt.Errorf("%w: %w", err, sdk.ErrReadOnly)
		case se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked:
			return fmt.Errorf("%w (another process, a backup say, holds the database's write lock): %w", err, sdk.ErrUnavailable)
		// SQLite's text names the system error already (a quota or a
		// file-size limit is an I/O error with its errno): add its class,
		// not the errno's words again.
		case sdk.CodeOf(se.SystemErrno) == sdk.CodeStorageFull:
			return fmt.Errorf("%w: %w", err, sdk.ErrNoSpace)
		case sdk.CodeOf(se.SystemErrno) == sdk.CodeReadOnly:
			return fmt.Errorf("%w: %w", err, sdk.ErrReadOnly)
		}
	}
	return sdk.StorageError(err)
}

// acquireRead waits for one of the read connections for a read of realm,
// first come first served within the realm and, across realms, the realm
// holding the fewest first (fairgate), and answers the func that gives
// it back. database/sql hands a
// freed connection to a random waiter, so under load (32 concurrent
// recalls for 4 connections) an unlucky recall lost the draw again and
// again and missed the host's 500 ms recall deadline while its neighbours
// took 20 ms; the slots' queue bounds the wait by the reads ahead of it.
func (d *database) acquireRead(ctx context.Context, realm string) (func(), error) {
	if err := d.slots.Acquire(ctx, realm, 1); err != nil {
		return nil, err
	}
	return func() { d.slots.Release(realm, 1) }, nil
}
