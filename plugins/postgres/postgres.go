// Package postgres is memhost's PostgreSQL provider: every record of every
// realm in one PostgreSQL schema, shared by any number of hosts. Recall is
// BM25 computed in SQL over the provider's own inverted index of the shared
// tokenizer's terms; it also keeps record manifests ranked by use, usage
// counters, supersede and the injection ledger.
//
// Unlike the file-backed providers, many plugin processes (one per host)
// may open one schema at once: writes are idempotent by content hash
// through a unique index, and schema migrations take an advisory lock.
package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/sdk"
)

// Version is the plugin's semantic version.
const Version = "0.1.0"

// Store is the PostgreSQL provider. The zero value is not usable; call
// New. It is safe for concurrent use once configured.
type Store struct {
	// mu guards pool: calls hold it shared, Configure and Close
	// exclusively, so Close waits for calls in flight.
	mu     sync.RWMutex
	pool   *pgdb
	set    settings
	closed bool

	log    *slog.Logger
	now    func() time.Time
	getenv func(string) string
	recall recallOptions
	// stopWatch ends the schema watch (and the trimming of a process
	// without a replica) and waits for them; exit ends the process when the
	// watch finds the schema incomplete (os.Exit; tests replace it).
	stopWatch func()
	exit      func(code int)
	// refused is when the server last refused a connection (Unix ns).
	refused atomic.Int64
	// replica answers recall when it is current (replica.go); nil when
	// the configuration turns it off.
	replica *replica
}

// New returns an unconfigured provider.

// connTracer, when set, traces the statements of every connection a store
// opens (tests: a client descheduled between its round trips).
var connTracer atomic.Pointer[pgx.QueryTracer]

func New() *Store {
	return &Store{log: sdk.Logger(), now: time.Now, getenv: os.Getenv, exit: os.Exit}
}

var (
	_ sdk.Plugin          = (*Store)(nil)
	_ sdk.Provider        = (*Store)(nil)
	_ sdk.RecordWriter    = (*Store)(nil)
	_ sdk.RecordGetter    = (*Store)(nil)
	_ sdk.RecordForgetter = (*Store)(nil)
	_ sdk.ManifestLister  = (*Store)(nil)
	_ sdk.Superseder      = (*Store)(nil)
	_ sdk.UsageMarker     = (*Store)(nil)
	_ sdk.UsageCounter    = (*Store)(nil)
	_ sdk.LedgerWriter    = (*Store)(nil)
	_ sdk.Archiver        = (*Store)(nil)
	_ sdk.Reindexer       = (*Store)(nil)
	_ sdk.VectorStore     = (*Store)(nil)
	_ sdk.ThreadReader    = (*Store)(nil)
	_ io.Closer           = (*Store)(nil)
)

// Info describes the plugin.
func (s *Store) Info() sdk.Info {
	return sdk.Info{
		Name:      "postgres",
		Version:   Version,
		Kinds:     []sdk.PluginKind{sdk.KindProvider},
		Protocols: []int{sdk.ProtocolVersion},
		Capabilities: sdk.Capabilities{
			sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest,
			sdk.CapSupersede, sdk.CapUsage, sdk.CapUsageCounts, sdk.CapLedger, sdk.CapArchive, sdk.CapReindex, sdk.CapVectors,
			sdk.CapNeighbours,
		},
		ConfigSchema: json.RawMessage(configSchema),
	}
}

// Configure decodes the configuration, connects, and migrates the schema,
// so a bad connection string, an unreachable server or a foreign schema
// fails here, naming the database (never the password).
func (s *Store) Configure(ctx context.Context, raw json.RawMessage) error {
	set, err := parseConfig(raw, s.getenv)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("postgres: configure after close: %w", sdk.ErrUnavailable)
	case s.pool != nil:
		return fmt.Errorf("postgres: already configured: %w", sdk.ErrConflict)
	}
	target := describeTarget(set.pool)
	set.pool.BeforeConnect = s.beforeConnect
	if tr := connTracer.Load(); tr != nil {
		set.pool.ConnConfig.Tracer = *tr
	}
	pool, err := pgxpool.NewWithConfig(ctx, set.pool)
	if err != nil {
		return fmt.Errorf("postgres: connect to %s: %w", target, startFailure(err))
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return fmt.Errorf("postgres: connect to %s: %w", target, startFailure(err))
	}
	db := newPGDB(pool, set)
	if err := migrate(ctx, db, set.schema, s.log); err != nil {
		pool.Close()
		return fmt.Errorf("postgres: %s: %w", target, classify(err))
	}
	if err := checkSchema(ctx, db, set.schema); err != nil {
		pool.Close()
		return fmt.Errorf("postgres: %s: %w", target, err)
	}
	s.pool, s.set = db, set
	s.recall.realmStats = set.realmStats
	watchCtx, stop := context.WithCancel(context.Background())
	var watching sync.WaitGroup
	s.stopWatch = func() { stop(); watching.Wait() }
	watching.Add(1)
	go func() { defer watching.Done(); s.watchSchema(watchCtx, db, set.schema) }()
	if set.replica.enabled {
		s.replica = newReplica(db, set, s.log)
		s.replica.start() // it trims the change log too
	} else {
		watching.Add(1)
		go func() { defer watching.Done(); trimLoop(watchCtx, db, set.replica.retention, s.log) }()
	}
	s.log.Debug("connected", "target", target, "schema", set.schema, "pool_size", set.poolSize)
	return nil
}

// schemaWatchInterval is how often a running provider checks its schema.
var schemaWatchInterval = 10 * time.Second

// watchSchema checks the schema every schemaWatchInterval. A schema found
// incomplete ends the process: the host restarts the plugin, whose
// Configure then fails on the same check, so the host reports not ready
// (GET /readyz) with the reason until the schema is whole again. A check
// that cannot reach the database proves nothing and is ignored.
func (s *Store) watchSchema(ctx context.Context, db *pgdb, schema string) {
	every(ctx, schemaWatchInterval, func() bool {
		if err := checkSchema(ctx, db, schema); errors.Is(err, errSchema) && ctx.Err() == nil {
			s.log.Error("postgres: the schema is no longer complete; exiting so the host restarts the plugin and reports not ready", "error", err)
			s.exit(3)
			return false
		}
		return true
	})
}

// every runs fn every d until ctx ends or fn answers false.
func every(ctx context.Context, d time.Duration, fn func() bool) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if !fn() {
				return
			}
		}
	}
}

// Close waits for calls in flight and closes the pool. Closing twice is
// harmless.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.stopWatch != nil {
		s.stopWatch()
	}
	if s.replica != nil {
		s.replica.close()
		s.replica = nil
	}
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
	return nil
}

// use runs fn with the pool, holding the shared lock.
func (s *Store) use(fn func(db *pgdb) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.pool == nil {
		if s.closed {
			return fmt.Errorf("postgres: provider is closed: %w", sdk.ErrUnavailable)
		}
		return fmt.Errorf("postgres: provider is not configured: %w", sdk.ErrUnavailable)
	}
	err := fn(s.pool)
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		s.refused.Store(time.Now().UnixNano())
	}
	return err
}

// refusalPause is how long after the server refused a connection new
// connections are not attempted: calls waiting for one fail at once with
// 503 rather than each spending a connection attempt (and often their
// deadline) on a server at its connection limit, and the server is not
// stormed with attempts it will refuse.
const refusalPause = time.Second

// errRefusedRecently fails a connection attempt within refusalPause.
var errRefusedRecently = &hiddenError{msg: "a new connection to the database failed a moment ago: " + sdk.ErrUnavailable.Error(), sentinel: sdk.ErrUnavailable, cause: errors.New("connection refused recently")}

// beforeConnect is the pool's BeforeConnect: see refusalPause.
func (s *Store) beforeConnect(context.Context, *pgx.ConnConfig) error {
	if last := s.refused.Load(); last != 0 && time.Since(time.Unix(0, last)) < refusalPause {
		return errRefusedRecently
	}
	return nil
}

// Recall answers the active, unexpired records of the query's realm and
// scopes that best match its text, best first (see recall.go).
// It answers from the replica when that is current, else from SQL; only
// the replica ranks with a query vector (vectors.go).
func (s *Store) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	ctx = inRealm(ctx, q.Realm)
	limit, terms, err := recallArgs(q)
	if err != nil {
		return nil, err
	}
	if len(terms) == 0 && q.QueryVector == nil {
		return []sdk.Hit{}, nil
	}
	var hits []sdk.Hit
	err = s.use(func(db *pgdb) (err error) {
		now := s.now()
		if s.replica != nil {
			var ok bool
			if hits, ok, err = s.replica.recall(ctx, q, terms, limit, now); ok || err != nil {
				s.recall.note("replica")
				return err
			}
		}
		if err := checkQueryVector(ctx, db, q); err != nil {
			return err
		}
		if len(terms) == 0 {
			s.recall.note("no terms")
			hits = []sdk.Hit{}
			return nil
		}
		hits, err = recall(ctx, db, q, limit, terms, now, s.recall)
		return err
	})
	return hits, err
}

// acknowledge notes a change log position this process committed, for
// recall's read-your-writes.
func (s *Store) acknowledge(seq int64) {
	if s.replica != nil && seq > 0 {
		s.replica.acknowledge(seq)
	}
}

// Remember stores records all or nothing and answers their ids; a record
// whose content is already live in its scope answers the existing id.
func (s *Store) Remember(ctx context.Context, realm string, records []sdk.Record) ([]string, error) {
	ctx = inRealm(ctx, realm)
	var ids []string
	err := s.use(func(db *pgdb) (err error) {
		var seq int64
		ids, seq, err = remember(ctx, db, realm, records, s.now())
		s.acknowledge(seq)
		return err
	})
	return ids, err
}

// Get answers the records found among ids, of any status, in the order
// asked.
func (s *Store) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	ctx = inRealm(ctx, realm)
	var recs []sdk.Record
	err := s.use(func(db *pgdb) (err error) {
		recs, err = get(ctx, db, realm, ids)
		return err
	})
	return recs, err
}

// ReadThread answers the active records of realm at places of threads
// (sdk.ThreadReader), read from SQL (read.go).
func (s *Store) ReadThread(ctx context.Context, realm string, places []sdk.ThreadPlace) ([]sdk.Record, error) {
	ctx = inRealm(ctx, realm)
	var recs []sdk.Record
	err := s.use(func(db *pgdb) (err error) {
		recs, err = readThread(ctx, db, realm, places)
		return err
	})
	return recs, err
}

// Forget deletes records and answers how many were there.
func (s *Store) Forget(ctx context.Context, realm string, ids []string) (int, error) {
	ctx = inRealm(ctx, realm)
	var n int
	err := s.use(func(db *pgdb) (err error) {
		var seq int64
		n, seq, err = forget(ctx, db, realm, ids)
		s.acknowledge(seq)
		return err
	})
	return n, err
}

// Manifest lists metadata rows of the realm's recallable records (see
// manifest.go for the working-set rule).
func (s *Store) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	ctx = inRealm(ctx, q.Realm)
	var rows []sdk.ManifestRow
	err := s.use(func(db *pgdb) (err error) {
		rows, err = manifest(ctx, db, q, s.now())
		return err
	})
	return rows, err
}

// Supersede stores replacement and marks oldID superseded, in one
// transaction, and answers the replacement's id.
func (s *Store) Supersede(ctx context.Context, realm, oldID string, replacement sdk.Record) (string, error) {
	ctx = inRealm(ctx, realm)
	var id string
	err := s.use(func(db *pgdb) (err error) {
		var seq int64
		id, seq, err = supersede(ctx, db, realm, oldID, replacement, s.now())
		s.acknowledge(seq)
		return err
	})
	return id, err
}

// MarkUsed counts one use of each record at the given time; an id listed
// twice counts once.
func (s *Store) MarkUsed(ctx context.Context, realm string, ids []string, at time.Time) error {
	ctx = inRealm(ctx, realm)
	return s.countUses(ctx, realm, sdk.OneUseEach(ids), at)
}

// CountUses counts each use's uses of its record at the given time.
func (s *Store) CountUses(ctx context.Context, realm string, uses []sdk.Use, at time.Time) error {
	ctx = inRealm(ctx, realm)
	if err := sdk.ValidateUses("uses", uses); err != nil {
		return err
	}
	return s.countUses(ctx, realm, uses, at)
}

func (s *Store) countUses(ctx context.Context, realm string, uses []sdk.Use, at time.Time) error {
	return s.use(func(db *pgdb) error {
		if at.IsZero() {
			at = s.now()
		}
		return countUses(ctx, db, realm, uses, at)
	})
}

// WriteLedger appends injection ledger entries, all or nothing.
func (s *Store) WriteLedger(ctx context.Context, entries []sdk.LedgerEntry) error {
	if len(entries) > 0 {
		ctx = inRealm(ctx, entries[0].Realm) // the host sends one realm's entries a batch
	}
	return s.use(func(db *pgdb) error {
		return writeLedger(ctx, db, entries, s.set.ledger, s.now())
	})
}
