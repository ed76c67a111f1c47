// Package markdown is memhost's plain provider: one markdown file per
// record, with the record's metadata in a front-matter header and the body
// as markdown, so a memory can be read, edited and reviewed (in git, say)
// by people. It declares no record manifest.
//
// The provider keeps every record of its root in memory, with the shared
// BM25F engine (sdk/index) for lexical recall and a snapshot of both so a
// large root opens fast, and follows hand edits (additions, edits,
// deletions) through a file watcher where the platform has one and a
// bounded periodic sweep otherwise. One instance at a time uses a root:
// Configure locks it (lock_unix.go). See frontmatter.go for the file
// format, layout.go for the tree, index.go for scoring, snapshot.go for
// the snapshot.
package markdown

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
)

// Version is the plugin's semantic version.
const Version = "0.1.0"

// DefaultRoot is the root used when the config names none, relative to
// the plugin's working directory (the deployment's data directory).
const DefaultRoot = "md"

const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "memhost markdown provider",
  "type": "object",
  "properties": {
    "root": {
      "type": "string",
      "description": "Directory holding the record files. A relative path resolves against the plugin's working directory (the deployment's data directory). Created if missing. A lock file .memhost-lock in it keeps a second instance off the root.",
      "default": "md"
    },
    "snapshot": {
      "type": "boolean",
      "description": "Keep a snapshot of the recall index (records and postings), so a large root opens without reading every file. Each file's stamp is still checked at open; files that differ are read again.",
      "default": true
    },
    "snapshot_path": {
      "type": "string",
      "description": "Where the snapshot lives. A relative path resolves against the plugin's working directory. Default: .memhost-index inside the root."
    }
  },
  "additionalProperties": false
}`

// Config is the instance configuration.
type Config struct {
	Root string `json:"root"`
	// Snapshot turns the index snapshot on (the default) or off.
	Snapshot *bool `json:"snapshot,omitempty"`
	// SnapshotPath is the snapshot file; "" means DefaultSnapshot in the root.
	SnapshotPath string `json:"snapshot_path,omitempty"`
}

// Provider is the markdown provider. It is safe for concurrent use.
type Provider struct {
	mu     sync.RWMutex
	st     *store
	opts   options
	logger *slog.Logger
}

// New answers an unconfigured provider; Configure opens its root.
func New() *Provider {
	return &Provider{opts: defaultOptions()}
}

// Info describes the plugin.
func (p *Provider) Info() sdk.Info {
	return sdk.Info{
		Name:         "markdown",
		Version:      Version,
		Kinds:        []sdk.PluginKind{sdk.KindProvider},
		Protocols:    []int{sdk.ProtocolVersion},
		Capabilities: sdk.Capabilities{sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapSupersede, sdk.CapArchive, sdk.CapReindex, sdk.CapVectors, sdk.CapNeighbours},
		ConfigSchema: json.RawMessage(configSchema),
	}
}

// ParseConfig decodes a config object strictly: unknown keys, trailing
// data and anything but a JSON object are errors wrapping sdk.ErrInvalid.
func ParseConfig(raw json.RawMessage) (Config, error) {
	var c Config
	if err := sdk.DecodeConfig(raw, &c); err != nil {
		return c, fmt.Errorf("markdown: config (keys: root, snapshot, snapshot_path): %w", err)
	}
	if c.Root == "" {
		c.Root = DefaultRoot
	}
	return c, nil
}

// Configure opens the root, creating it if missing, and loads every
// record in it. Configuring again switches to the new root (on the same
// root, the old store closes first, freeing the lock). A root another
// instance holds is refused with sdk.ErrConflict.
func (p *Provider) Configure(_ context.Context, raw json.RawMessage) error {
	cfg, err := ParseConfig(raw)
	if err != nil {
		return err
	}
	root, err := filepath.Abs(cfg.Root)
	if err != nil {
		return fmt.Errorf("markdown: root %q: %v: %w", cfg.Root, err, sdk.ErrInvalid)
	}
	if err := os.MkdirAll(root, dirPerm); err != nil {
		return fmt.Errorf("markdown: create root %s: %v: %w", root, err, sdk.ErrInvalid)
	}
	if fi, err := os.Stat(root); err != nil || !fi.IsDir() {
		return fmt.Errorf("markdown: root %s is not a directory: %w", root, sdk.ErrInvalid)
	}
	logger := p.logger
	if logger == nil {
		logger = sdk.Logger()
	}
	snap := ""
	if cfg.Snapshot == nil || *cfg.Snapshot {
		snap = filepath.Join(root, DefaultSnapshot)
		if cfg.SnapshotPath != "" {
			if snap, err = filepath.Abs(cfg.SnapshotPath); err != nil {
				return fmt.Errorf("markdown: snapshot_path %q: %v: %w", cfg.SnapshotPath, err, sdk.ErrInvalid)
			}
		}
	}
	// A store on the same root must let go of its lock first.
	p.mu.Lock()
	old := p.st
	if old != nil && old.root == root {
		p.st = nil
	} else {
		old = nil
	}
	p.mu.Unlock()
	if old != nil {
		old.close()
	}
	// One instance per root: a start finishes every batch intent and
	// removes every temp file it finds, which would break another
	// instance's batch in flight.
	lock, err := lockRoot(filepath.Join(root, lockName))
	if err != nil {
		return err
	}
	opts := p.opts
	if !opts.foldsCase {
		if opts.foldsCase, err = foldsCase(root); err != nil {
			// Checking every new directory against its siblings costs a
			// listing; skipping it where case folds mixes tenants.
			logger.Warn("could not tell whether the root's file system folds case; checking names as if it does", "error", err)
			opts.foldsCase = true
		}
	}
	if opts.foldsCase {
		logger.Info("the root's file system takes names differing only in case as one; a realm or scope whose directory differs from an existing one only in case is refused")
	}
	st := openStore(root, snap, lock, logger, opts)
	p.mu.Lock()
	old = p.st
	p.st = st
	p.mu.Unlock()
	if old != nil {
		old.close()
	}
	return nil
}

// Close stops watching the root and releases its lock. Calls after Close
// fail.
func (p *Provider) Close() error {
	p.mu.Lock()
	st := p.st
	p.st = nil
	p.mu.Unlock()
	if st != nil {
		st.close()
	}
	return nil
}

var errNotConfigured = fmt.Errorf("markdown: not configured: %w", sdk.ErrUnavailable)

func (p *Provider) store(ctx context.Context) (*store, error) {
	if err := ctx.Err(); err != nil {
		return nil, ctxErr(err)
	}
	p.mu.RLock()
	st := p.st
	p.mu.RUnlock()
	if st == nil {
		return nil, errNotConfigured
	}
	return st, nil
}

func ctxErr(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("markdown: %w: %w", sdk.ErrDeadline, err)
	}
	return fmt.Errorf("markdown: %w", err)
}

// Recall answers the active, unexpired records best matching q.Query,
// ranked by BM25F (see index.go).
func (p *Provider) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	st, err := p.store(ctx)
	if err != nil {
		return nil, err
	}
	return st.recall(ctx, q)
}

// Remember stores records, all or nothing; a record whose scope already
// holds the same title and body answers the existing id.
func (p *Provider) Remember(ctx context.Context, realm string, records []sdk.Record) ([]string, error) {
	st, err := p.store(ctx)
	if err != nil {
		return nil, err
	}
	ids, err := st.remember(ctx, realm, records)
	if errors.Is(err, errFileChanged) {
		// A hand edit landed since the index read the file: once more,
		// on the edited record.
		ids, err = st.remember(ctx, realm, records)
	}
	return ids, storageError(err)
}

// Get answers the records with ids, any status, in the order asked.
func (p *Provider) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	st, err := p.store(ctx)
	if err != nil {
		return nil, err
	}
	return st.get(realm, ids)
}

// ReadThread answers the active records at places of realm's threads.
func (p *Provider) ReadThread(ctx context.Context, realm string, places []sdk.ThreadPlace) ([]sdk.Record, error) {
	st, err := p.store(ctx)
	if err != nil {
		return nil, err
	}
	return st.readThread(realm, places), nil
}

// Forget deletes the files of ids; ids already gone are not an error.
func (p *Provider) Forget(ctx context.Context, realm string, ids []string) (int, error) {
	st, err := p.store(ctx)
	if err != nil {
		return 0, err
	}
	n, err := st.forget(realm, ids)
	return n, storageError(err)
}

// Supersede stores replacement (Supersedes = oldID) and marks the old
// record superseded.
func (p *Provider) Supersede(ctx context.Context, realm, oldID string, replacement sdk.Record) (string, error) {
	st, err := p.store(ctx)
	if err != nil {
		return "", err
	}
	id, err := st.supersede(ctx, realm, oldID, replacement)
	if errors.Is(err, errFileChanged) {
		id, err = st.supersede(ctx, realm, oldID, replacement)
	}
	return id, storageError(err)
}

// storageError is sdk.FileStorageError: a file or directory of the tree
// the plugin's user may not write (EACCES, EPERM) is read_only, as a
// read-only mount is, while its own refusal to write through a link
// (sdk.ErrPermission) stays permission_denied.
var storageError = sdk.FileStorageError

var (
	_ sdk.Provider        = (*Provider)(nil)
	_ sdk.RecordWriter    = (*Provider)(nil)
	_ sdk.RecordGetter    = (*Provider)(nil)
	_ sdk.RecordForgetter = (*Provider)(nil)
	_ sdk.Superseder      = (*Provider)(nil)
	_ sdk.ThreadReader    = (*Provider)(nil)
)

// timeNow truncates to the millisecond, the precision the wire carries,
// so a record reads back the same in-process and through the plugin.
func timeNow(now func() time.Time) time.Time {
	return now().UTC().Truncate(time.Millisecond)
}
