// Package bleve is memhost's full-text provider: one Bleve (scorch) index
// per realm under <dir>/<realm>.bleve.
//
// Scoring: BM25 (bleve's "bm25" scoring model, k1=1.2, b=0.75; bleve's
// variant takes the square root of the term frequency and scales a match
// by the share of query clauses it hits), over four text fields boosted
// tags 4, title 3, description 2, body 1. Text is indexed and queried as
// sdk/tokenize terms (CJK bigrams included), so the index agrees with
// every other memhost component; the query is built term by term, never
// parsed. Only active records carry text fields.
//
// Storage: each document stores the whole record as JSON (a hit needs no
// second lookup) and a small catalog entry; manifests are served from an
// in-memory catalog of those entries, loaded in the background when a
// realm opens (see catalog).
//
// Durability: scorch, with unsafe_batch off (its default, pinned here),
// answers a Batch only after the batch's segment file is fsynced and the
// root.bolt snapshot naming it is committed and fsynced. A batch is one
// segment in one snapshot, so it is all or nothing across a crash too, and
// an acknowledged write survives kill -9 of the plugin (and power loss).
// At open, the newest snapshot must load: scorch would otherwise fall back
// to an older one silently.
//
// Exclusive use: Configure takes a non-blocking flock on <dir>/LOCK, so a
// second process pointed at the same directory is refused at once instead
// of blocking on bolt's own lock or corrupting the index.
package bleve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/memhost/memhost/sdk"
)

// Version is the plugin's semantic version.
const Version = "0.1.0"

// DefaultDir is where indexes live when the config names no dir, relative
// to the plugin's working directory (the deployment's data directory).
const DefaultDir = "bleve"

const (
	indexSuffix   = ".bleve"
	partialSuffix = ".bleve.partial"
	lockFileName  = "LOCK"
)

// configSchema is the JSON Schema of the plugin configuration.
const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "memhost bleve provider",
  "type": "object",
  "additionalProperties": false,
  "properties": {
    "dir": {
      "type": "string",
      "minLength": 1,
      "default": "bleve",
      "description": "Directory holding one <realm>.bleve index per realm; relative paths resolve against the data directory."
    }
  }
}`

// Config is the plugin configuration.
type Config struct {
	Dir string `json:"dir"`
}

// ParseConfig decodes raw strictly: one JSON object, known keys only.
func ParseConfig(raw json.RawMessage) (Config, error) {
	cfg := Config{Dir: DefaultDir}
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return cfg, nil // null means the defaults
	}
	if err := sdk.DecodeConfig(raw, &cfg); err != nil {
		return Config{}, fmt.Errorf("bleve: config: %w", err)
	}
	if strings.TrimSpace(cfg.Dir) == "" {
		return Config{}, &sdk.FieldError{Field: "dir", Problem: "must name a directory", Err: sdk.ErrInvalid}
	}
	if strings.IndexByte(cfg.Dir, 0) >= 0 {
		return Config{}, &sdk.FieldError{Field: "dir", Problem: "contains a NUL byte", Err: sdk.ErrInvalid}
	}
	return cfg, nil
}

// Provider is the bleve provider plugin. The zero value is not usable; call New.
type Provider struct {
	log *slog.Logger

	// life is held shared by every call and exclusively by Close, so Close
	// never pulls an index out from under a running call.
	life sync.RWMutex
	// mu guards the fields below.
	mu     sync.Mutex
	dir    string
	lock   *os.File
	realms map[string]*realmIndex
	closed bool
}

var (
	_ sdk.Plugin          = (*Provider)(nil)
	_ sdk.Provider        = (*Provider)(nil)
	_ sdk.RecordWriter    = (*Provider)(nil)
	_ sdk.RecordGetter    = (*Provider)(nil)
	_ sdk.RecordForgetter = (*Provider)(nil)
	_ sdk.ManifestLister  = (*Provider)(nil)
	_ sdk.Superseder      = (*Provider)(nil)
	_ sdk.UsageMarker     = (*Provider)(nil)
	_ sdk.UsageCounter    = (*Provider)(nil)
	_ io.Closer           = (*Provider)(nil)
)

// New returns an unconfigured provider that logs to stderr.
func New() *Provider {
	return NewWithLogger(sdk.Logger())
}

// NewWithLogger returns an unconfigured provider that logs to logger.
func NewWithLogger(logger *slog.Logger) *Provider {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Provider{log: logger, realms: map[string]*realmIndex{}}
}

// Info describes the plugin. The ledger capability is not declared: the
// index is no place for an append-only log.
func (p *Provider) Info() sdk.Info {
	return sdk.Info{
		Name:      "bleve",
		Version:   Version,
		Kinds:     []sdk.PluginKind{sdk.KindProvider},
		Protocols: []int{sdk.ProtocolVersion},
		Capabilities: sdk.Capabilities{
			sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest, sdk.CapSupersede, sdk.CapUsage, sdk.CapUsageCounts, sdk.CapArchive, sdk.CapReindex,
			sdk.CapNeighbours,
		},
		ConfigSchema: json.RawMessage(configSchema),
	}
}

// Configure validates the config, locks the directory and opens every
// existing realm index, so a locked, corrupt or foreign index is reported
// now rather than at the first call that touches it.
func (p *Provider) Configure(ctx context.Context, raw json.RawMessage) error {
	cfg, err := ParseConfig(raw)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return fmt.Errorf("bleve: dir %q: %v: %w", cfg.Dir, err, sdk.ErrInvalid)
	}
	p.life.Lock()
	defer p.life.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return fmt.Errorf("bleve: provider is closed: %w", sdk.ErrUnavailable)
	case p.dir != "":
		return fmt.Errorf("bleve: already configured with dir %s: %w", p.dir, sdk.ErrConflict)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("bleve: create dir %s: %w", dir, err)
	}
	lock, err := lockDir(filepath.Join(dir, lockFileName))
	if err != nil {
		return err
	}
	realms, err := openExisting(ctx, dir, p.log)
	if err != nil {
		unlockDir(lock)
		return err
	}
	p.dir, p.lock, p.realms = dir, lock, realms
	p.log.Info("configured", "dir", dir, "realms", len(realms))
	return nil
}

// openExisting opens every <realm>.bleve under dir and removes partial
// indexes left by a crash during creation (no write was acknowledged into
// them: an index is renamed into place before its first batch).
func openExisting(ctx context.Context, dir string, log *slog.Logger) (map[string]*realmIndex, error) {
	if err := recoverRebuilds(dir, log); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("bleve: read dir %s: %w", dir, err)
	}
	realms := map[string]*realmIndex{}
	closeAll := func() {
		for _, ri := range realms {
			ri.close()
		}
	}
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(dir, name)
		switch {
		case strings.HasSuffix(name, partialSuffix):
			log.Warn("removing index left half-created by a crash", "path", path)
			if err := os.RemoveAll(path); err != nil {
				closeAll()
				return nil, fmt.Errorf("bleve: remove partial index %s: %w", path, err)
			}
		case strings.HasSuffix(name, indexSuffix) && e.IsDir():
			realm := strings.TrimSuffix(name, indexSuffix)
			if sdk.ValidateRealm(realm) != nil {
				log.Warn("ignoring index whose name is not a realm", "path", path)
				continue
			}
			if err := ctx.Err(); err != nil {
				closeAll()
				return nil, err
			}
			ri, err := openRealm(path, realm, log)
			if err != nil {
				closeAll()
				return nil, err
			}
			realms[realm] = ri
		}
	}
	return realms, nil
}

// Close closes every index and releases the directory lock. Calls made
// after Close fail with ErrUnavailable.
func (p *Provider) Close() error {
	p.life.Lock()
	defer p.life.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var errs []error
	for name, ri := range p.realms {
		if err := ri.close(); err != nil {
			errs = append(errs, fmt.Errorf("bleve: close realm %s: %w", name, err))
		}
	}
	p.realms = nil
	if p.lock != nil {
		unlockDir(p.lock)
		p.lock = nil
	}
	return errors.Join(errs...)
}

// begin starts a call: it holds the provider open until the returned
// func runs. The SDK's server validated the realm (and every other request
// field) before the call got here.
func (p *Provider) begin(realm string) (func(), error) {
	p.life.RLock()
	p.mu.Lock()
	closed, configured := p.closed, p.dir != ""
	p.mu.Unlock()
	if closed || !configured {
		p.life.RUnlock()
		what := "closed"
		if !closed {
			what = "not configured"
		}
		return nil, fmt.Errorf("bleve: provider is %s: %w", what, sdk.ErrUnavailable)
	}
	return p.life.RUnlock, nil
}

// realm answers the realm's index, or nil when the realm has none yet.
// With create set, a missing index is created.
func (p *Provider) realm(name string, create bool) (*realmIndex, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ri := p.realms[name]; ri != nil || !create {
		return ri, nil
	}
	ri, err := createRealm(p.dir, name, p.log)
	if err != nil {
		return nil, err
	}
	p.log.Info("created realm index", "realm", name, "path", ri.path)
	p.realms[name] = ri
	return ri, nil
}
