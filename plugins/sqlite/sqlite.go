// Package sqlite is memhost's SQLite provider: every record of every realm
// in one SQLite file (WAL, synchronous=FULL), exact BM25 recall from an in-memory
// index of the shared tokenizer's terms (sdk/index), record manifests ranked by use, usage
// counters, supersede, and the injection ledger.
//
// One process owns a database file at a time: Configure takes an exclusive
// flock on "<path>.lock" and refuses a second opener with sdk.ErrConflict.
package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
)

// Version is the plugin's semantic version.
const Version = "0.1.0"

// DefaultPath is the database file used when the configuration names none,
// relative to the plugin's working directory (the deployment's data
// directory).
const DefaultPath = "memory.db"

// configSchema is the JSON Schema of Config, published in Info.
const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "memhost sqlite provider",
  "type": "object",
  "properties": {
    "path": {
      "type": "string",
      "description": "SQLite database file; relative paths resolve in the data directory. A lock file <path>.lock sits beside it.",
      "default": "memory.db",
      "minLength": 1
    },
    "posting_budget": {
      "type": "integer",
      "description": "Ignored, kept so existing configurations still load: recall is always exact BM25, answered by the in-memory index.",
      "default": 0,
      "minimum": 0
    },
    ` + sdk.LedgerBoundsSchema + `
  },
  "additionalProperties": false
}`

// Config is the provider's configuration.
type Config struct {
	// Path is the database file (DefaultPath when empty).
	Path string `json:"path"`
	// PostingBudget is ignored: it bounded FTS5's work per query, and FTS5
	// no longer answers recall. Kept so existing configurations load.
	PostingBudget int `json:"posting_budget"`
	// LedgerBounds bound the injection ledger.
	sdk.LedgerBounds
}

// ParseConfig decodes a configuration strictly: a JSON object with known
// keys only, nothing after it. Errors wrap sdk.ErrInvalid.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var cfg Config
	if err := sdk.DecodeConfig(raw, &cfg); err != nil {
		return cfg, fmt.Errorf("sqlite: config: %w", err)
	}
	if cfg.Path == "" {
		cfg.Path = DefaultPath
	}
	if cfg.PostingBudget < 0 {
		return cfg, fmt.Errorf("sqlite: config: %w", &sdk.FieldError{Field: "posting_budget",
			Problem: fmt.Sprintf("is %d, must be 0 (exact) or positive", cfg.PostingBudget), Err: sdk.ErrInvalid})
	}
	if _, _, err := cfg.Limits(); err != nil {
		return cfg, fmt.Errorf("sqlite: config: %w", err)
	}
	if err := checkPath(cfg.Path); err != nil {
		return cfg, fmt.Errorf("sqlite: config: %w", err)
	}
	return cfg, nil
}

// checkPath refuses paths SQLite would not treat as a plain file: an
// in-memory database would lose every write, and a URI would let config
// change open flags behind the provider's back.
func checkPath(p string) error {
	bad := func(why string) error {
		return &sdk.FieldError{Field: "path", Problem: fmt.Sprintf("%q %s", p, why), Err: sdk.ErrInvalid}
	}
	switch {
	case strings.TrimSpace(p) == "":
		return bad("is blank")
	case strings.ContainsRune(p, 0):
		return bad("contains a NUL byte")
	case p == ":memory:" || strings.HasPrefix(p, "file:"):
		return bad("must be a file path, not an in-memory database or URI")
	case strings.HasSuffix(p, "/") || strings.HasSuffix(p, `\`):
		return bad("names a directory, not a file")
	}
	return nil
}

// Store is the SQLite provider. The zero value is not usable; call New.
// It is safe for concurrent use once configured.
type Store struct {
	// mu guards db: calls hold it shared for their whole run, Configure
	// and Close exclusively, so Close waits for calls in flight.
	mu     sync.RWMutex
	db     *database
	closed bool

	log  *slog.Logger
	opts options
}

// options are the tunables tests and benchmarks adjust; production uses
// the defaults.
type options struct {
	now          func() time.Time
	busyTimeout  time.Duration
	maintainIdle time.Duration
	// walBound (frames) and checkpointGather pace the WAL checkpoint
	// (checkpoint.go).
	walBound         int
	checkpointGather time.Duration
	// encoding, when set, runs as a snapshot starts encoding the index:
	// tests hold a snapshot there.
	encoding func()
	// ledgerRetention and ledgerMaxRows bound the ledger (Config).
	ledgerRetention time.Duration
	ledgerMaxRows   int64
}

func defaultOptions() options {
	return options{
		now:              time.Now,
		busyTimeout:      5 * time.Second,
		maintainIdle:     time.Second,
		walBound:         walBoundFrames,
		checkpointGather: time.Second,
		ledgerRetention:  sdk.DefaultLedgerRetention,
		ledgerMaxRows:    sdk.DefaultLedgerMaxRows,
	}
}

// New returns an unconfigured provider.
func New() *Store {
	return &Store{log: sdk.Logger(), opts: defaultOptions()}
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
	_ io.Closer           = (*Store)(nil)
)

// Info describes the plugin.
func (s *Store) Info() sdk.Info {
	return sdk.Info{
		Name:      "sqlite",
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

// Configure decodes the configuration and opens the database: it takes the
// lock, migrates the schema and checks the file is a healthy memhost
// database, so a corrupt, foreign or locked file fails here, naming it.
func (s *Store) Configure(ctx context.Context, raw json.RawMessage) error {
	cfg, err := ParseConfig(raw)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return fmt.Errorf("sqlite: configure after close: %w", sdk.ErrUnavailable)
	case s.db != nil:
		return fmt.Errorf("sqlite: already configured with %s: %w", s.db.path, sdk.ErrConflict)
	}
	opts := s.opts
	opts.ledgerRetention, opts.ledgerMaxRows, _ = cfg.Limits() // ParseConfig checked them
	db, err := openDatabase(ctx, cfg.Path, opts, s.log)
	if err != nil {
		return err
	}
	s.db = db
	s.log.Debug("opened database", "path", db.path)
	return nil
}

// Close waits for calls in flight, stops background maintenance and closes
// the database, releasing its lock. Closing twice is harmless.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.db == nil {
		return nil
	}
	err := s.db.close()
	s.db = nil
	return err
}

// use runs fn with the open database, holding the shared lock.
func (s *Store) use(fn func(db *database) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		if s.closed {
			return fmt.Errorf("sqlite: provider is closed: %w", sdk.ErrUnavailable)
		}
		return fmt.Errorf("sqlite: provider is not configured: %w", sdk.ErrUnavailable)
	}
	return fn(s.db)
}

// Recall answers the active, unexpired records of the query's realm and
// scopes that best match its text, best first (see recall.go).
func (s *Store) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	var hits []sdk.Hit
	err := s.use(func(db *database) (err error) {
		hits, err = db.recall(ctx, q, s.opts.now())
		return err
	})
	return hits, err
}

// Remember stores records all or nothing and answers their ids; a record
// whose content is already live in its scope answers the existing id.
func (s *Store) Remember(ctx context.Context, realm string, records []sdk.Record) ([]string, error) {
	var ids []string
	err := s.use(func(db *database) (err error) {
		ids, err = db.remember(ctx, realm, records, s.opts.now())
		return err
	})
	return ids, err
}

// Get answers the records found among ids, of any status, in the order
// asked.
func (s *Store) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	var recs []sdk.Record
	err := s.use(func(db *database) (err error) {
		recs, err = db.get(ctx, realm, ids)
		return err
	})
	return recs, err
}

// ReadThread answers the records at places of threads, found through the
// index's thread context.
func (s *Store) ReadThread(ctx context.Context, realm string, places []sdk.ThreadPlace) ([]sdk.Record, error) {
	var recs []sdk.Record
	err := s.use(func(db *database) (err error) {
		if err := db.awaitIndex(ctx); err != nil {
			return err
		}
		recs, err = db.get(ctx, realm, db.ix.AtPlaces(realm, indexPlaces(places)))
		return err
	})
	return recs, err
}

// Forget deletes records and answers how many were there.
func (s *Store) Forget(ctx context.Context, realm string, ids []string) (int, error) {
	var n int
	err := s.use(func(db *database) (err error) {
		n, err = db.forget(ctx, realm, ids)
		return err
	})
	return n, err
}

// Manifest lists metadata rows of the realm's recallable records (see
// manifest.go for the working-set rule).
func (s *Store) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	var rows []sdk.ManifestRow
	err := s.use(func(db *database) (err error) {
		rows, err = db.manifest(ctx, q, s.opts.now())
		return err
	})
	return rows, err
}

// Supersede stores replacement and marks oldID superseded, in one
// transaction, and answers the replacement's id.
func (s *Store) Supersede(ctx context.Context, realm, oldID string, replacement sdk.Record) (string, error) {
	var id string
	err := s.use(func(db *database) (err error) {
		id, err = db.supersede(ctx, realm, oldID, replacement, s.opts.now())
		return err
	})
	return id, err
}

// MarkUsed counts one use of each record at the given time; an id listed
// twice counts once.
func (s *Store) MarkUsed(ctx context.Context, realm string, ids []string, at time.Time) error {
	return s.countUses(ctx, realm, sdk.OneUseEach(ids), at)
}

// CountUses counts each use's uses of its record at the given time.
func (s *Store) CountUses(ctx context.Context, realm string, uses []sdk.Use, at time.Time) error {
	if err := sdk.ValidateUses("uses", uses); err != nil {
		return err
	}
	return s.countUses(ctx, realm, uses, at)
}

func (s *Store) countUses(ctx context.Context, realm string, uses []sdk.Use, at time.Time) error {
	return s.use(func(db *database) error {
		if at.IsZero() {
			at = s.opts.now()
		}
		return db.countUses(ctx, realm, uses, at)
	})
}

// WriteLedger appends injection ledger entries, all or nothing.
func (s *Store) WriteLedger(ctx context.Context, entries []sdk.LedgerEntry) error {
	return s.use(func(db *database) error {
		return db.writeLedger(ctx, entries, s.opts.now())
	})
}
