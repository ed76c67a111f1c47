// Package journal is an example third-party memhost provider: every change
// is one JSON line appended to a journal file and fsynced before it is
// acknowledged, and the whole memory lives in memory, rebuilt from the
// journal at start. It is small on purpose (a linear scan per recall, a
// journal that only grows) and shows everything a real provider needs:
// strict config, validation with the SDK's sentinels, all-or-nothing
// batches, idempotent writes, realm isolation, durability across kill -9,
// and the conformance kit.
package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/memhost/memhost/sdk"
)

// Name and Version are what Info reports and the plugin manifest repeats.
const (
	Name    = "journal"
	Version = "0.1.0"
)

// DefaultFile is the journal path used when the config names none. It is
// relative, so it resolves in the plugin's working directory: the
// deployment's data directory.
const DefaultFile = "journal.jsonl"

const configSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "memhost journal provider (example)",
  "type": "object",
  "properties": {
    "file": {
      "type": "string",
      "description": "Journal file. A relative path resolves in the plugin's working directory (the deployment's data directory).",
      "default": "journal.jsonl"
    }
  },
  "additionalProperties": false
}`

// Config is the instance configuration.
type Config struct {
	File string `json:"file"`
}

// Provider is the journal provider. It is safe for concurrent use.
type Provider struct {
	logger *slog.Logger

	mu     sync.RWMutex
	j      *journal // nil until configured and after Close
	closed bool
	realms map[string]*realm
}

// New answers an unconfigured provider; Configure opens its journal.
func New() *Provider {
	return &Provider{logger: sdk.Logger(), realms: map[string]*realm{}}
}

// Info describes the plugin. It never depends on configuration.
func (p *Provider) Info() sdk.Info {
	return sdk.Info{
		Name:         Name,
		Version:      Version,
		Kinds:        []sdk.PluginKind{sdk.KindProvider},
		Protocols:    []int{sdk.ProtocolVersion},
		Capabilities: sdk.Capabilities{sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest, sdk.CapSupersede},
		ConfigSchema: json.RawMessage(configSchema),
	}
}

// ParseConfig decodes a config object strictly: unknown keys, trailing
// data and anything but a JSON object are errors wrapping sdk.ErrInvalid.
func ParseConfig(raw json.RawMessage) (Config, error) {
	cfg := Config{File: DefaultFile}
	if len(bytes.TrimSpace(raw)) == 0 {
		return cfg, fmt.Errorf("journal: config must be a JSON object, got nothing: %w", sdk.ErrInvalid)
	}
	if err := sdk.DecodeConfig(raw, &cfg); err != nil {
		return cfg, fmt.Errorf("journal: config: %w", err)
	}
	if cfg.File == "" {
		return cfg, fmt.Errorf("journal: config: file must not be empty: %w", sdk.ErrInvalid)
	}
	return cfg, nil
}

// Configure opens the journal and replays it into memory.
func (p *Provider) Configure(_ context.Context, raw json.RawMessage) error {
	cfg, err := ParseConfig(raw)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.j != nil || p.closed {
		return fmt.Errorf("journal: already configured: %w", sdk.ErrConflict)
	}
	path, err := filepath.Abs(cfg.File)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j, realms, err := openJournal(path, p.logger)
	if err != nil {
		return err
	}
	p.j, p.realms = j, realms
	p.logger.Debug("journal opened", "path", path, "realms", len(realms))
	return nil
}

// Close closes the journal; later calls fail with sdk.ErrUnavailable.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.j == nil {
		return nil
	}
	err := p.j.close()
	p.j = nil
	return err
}

// ready answers an error unless the provider is configured and open.
// Callers hold mu.
func (p *Provider) ready() error {
	if p.j == nil {
		return fmt.Errorf("journal: not configured or closed: %w", sdk.ErrUnavailable)
	}
	return nil
}
