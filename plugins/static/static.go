// Package static is memhost's file-backed resolver: one plugin serving both
// the operator resolver and the mob resolver kinds from a JSON bindings
// file. The file is checked on every call and re-read when it changed, so
// an edit takes effect without a restart; a malformed edit is refused with
// a clear error in the plugin's log and the last good bindings stay in use.
package static

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/strictjson"
)

// Version is the plugin's semantic version, reported in Info.
const Version = "0.1.0"

// maxFileBytes bounds the bindings file: it is read on the request path.
const maxFileBytes = 16 << 20

// ErrMalformed marks a bindings file that cannot be used.
var ErrMalformed = errors.New("malformed bindings file")

// Config is the plugin's configuration.
type Config struct {
	// File is the bindings file; a relative path is relative to the
	// plugin's working directory (the host's data_dir).
	File string `json:"file"`
}

const configSchema = `{"type":"object","additionalProperties":false,"required":["file"],` +
	`"properties":{"file":{"type":"string","minLength":1}}}`

// File is the bindings file's shape:
//
//	{"realms": {"default": {
//	    "mobs":      {"alice": ["team-a", "oncall"]},
//	    "operators": {"alice": "carol"}}}}
type File struct {
	Realms map[string]RealmBindings `json:"realms"`
}

// RealmBindings are one realm's identity bindings.
type RealmBindings struct {
	Mobs      map[string][]string `json:"mobs,omitempty"`
	Operators map[string]string   `json:"operators,omitempty"`
}

// Resolver is the static resolver plugin.
type Resolver struct {
	log *slog.Logger

	mu       sync.Mutex
	path     string
	bindings *File
	stamp    fileStamp // of the file bindings came from
	bad      fileStamp // of the last malformed version seen, logged once
	missing  bool      // the file was unreadable at the last check, logged once
}

// fileStamp tells whether the file changed since it was read.
type fileStamp struct {
	mod  time.Time
	size int64
	ino  uint64
}

// New answers an unconfigured resolver.
func New() *Resolver { return &Resolver{log: sdk.Logger()} }

var (
	_ sdk.Plugin           = (*Resolver)(nil)
	_ sdk.OperatorResolver = (*Resolver)(nil)
	_ sdk.MobResolver      = (*Resolver)(nil)
)

func (r *Resolver) Info() sdk.Info {
	return sdk.Info{
		Name: "static", Version: Version,
		Kinds:     []sdk.PluginKind{sdk.KindOperatorResolver, sdk.KindMobResolver},
		Protocols: []int{sdk.ProtocolVersion}, ConfigSchema: json.RawMessage(configSchema),
	}
}

// Configure reads the bindings file once: a deployment that names a
// malformed file fails at start, not at the first turn. A file that does
// not exist yet means no bindings (logged), and is read once it appears,
// so a deployment can start before its bindings are written.
func (r *Resolver) Configure(_ context.Context, raw json.RawMessage) error {
	var cfg Config
	if err := sdk.DecodeConfig(raw, &cfg); err != nil {
		return fmt.Errorf("static: %w", err)
	}
	if cfg.File == "" {
		return fmt.Errorf("static: file: required (the bindings file): %w", sdk.ErrInvalid)
	}
	path, err := filepath.Abs(cfg.File)
	if err != nil {
		return fmt.Errorf("static: file: %w", err)
	}
	b, stamp, err := load(path)
	missing := errors.Is(err, fs.ErrNotExist)
	switch {
	case missing:
		r.log.Warn("bindings file does not exist yet: no bindings until it is written", "file", path)
		b = &File{Realms: map[string]RealmBindings{}}
	case err != nil:
		return fmt.Errorf("static: %w: %w", err, sdk.ErrInvalid)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.path, r.bindings, r.stamp, r.missing = path, b, stamp, missing
	return nil
}

func (r *Resolver) ResolveOperator(ctx context.Context, id sdk.Identity) (string, error) {
	b, err := r.current(ctx, id)
	if err != nil {
		return "", err
	}
	return b.Realms[id.Realm].Operators[id.ID], nil
}

func (r *Resolver) ResolveMobs(ctx context.Context, id sdk.Identity) ([]string, error) {
	b, err := r.current(ctx, id)
	if err != nil {
		return nil, err
	}
	mobs := b.Realms[id.Realm].Mobs[id.ID]
	if mobs == nil {
		return []string{}, nil
	}
	return slices.Clone(mobs), nil
}

// current answers the bindings in force, re-reading the file first when
// it changed since the last read.
func (r *Resolver) current(ctx context.Context, id sdk.Identity) (*File, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("static: %w", err)
	}
	if err := id.Validate(); err != nil {
		return nil, fmt.Errorf("static: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bindings == nil {
		return nil, fmt.Errorf("static: not configured: %w", sdk.ErrUnavailable)
	}
	st, err := stat(r.path)
	if err != nil {
		// A file being replaced may be briefly missing: keep serving.
		if !r.missing {
			r.log.Error("bindings file unreadable; keeping the last good bindings", "file", r.path, "error", err)
			r.missing = true
		}
		return r.bindings, nil
	}
	r.missing = false
	if st == r.stamp || st == r.bad {
		return r.bindings, nil
	}
	b, st, err := load(r.path)
	if err != nil {
		r.log.Error("bindings file refused; keeping the last good bindings", "error", err)
		r.bad = st
		return r.bindings, nil
	}
	r.bindings, r.stamp, r.bad = b, st, fileStamp{}
	r.log.Info("bindings file reloaded", "file", r.path, "realms", len(b.Realms))
	return r.bindings, nil
}

// load reads and checks the bindings file.
func load(path string) (*File, fileStamp, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("bindings file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileStamp{}, fmt.Errorf("bindings file: %w", err)
	}
	st := stampOf(fi)
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, st, fmt.Errorf("bindings file %s: %w", path, err)
	}
	if len(data) > maxFileBytes {
		return nil, st, fmt.Errorf("bindings file %s: larger than %d bytes: %w", path, maxFileBytes, ErrMalformed)
	}
	b, err := Parse(data)
	if err != nil {
		return nil, st, fmt.Errorf("bindings file %s: %w", path, err)
	}
	return b, st, nil
}

func stat(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return stampOf(fi), nil
}

// Parse decodes and checks a bindings file strictly (sdk/strictjson: known
// keys only, each once, nothing after the object) with valid realm,
// identity, mob and operator names, each error naming where it is. Mob
// lists are trimmed of duplicates, in the order written.
func Parse(data []byte) (*File, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%w: the file is empty; write {\"realms\": {}} for no bindings", ErrMalformed)
	}
	var f File
	if err := strictjson.Decode(data, &f); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrMalformed, describe(data, err))
	}
	if f.Realms == nil {
		f.Realms = map[string]RealmBindings{}
	}
	for realm, rb := range f.Realms {
		if err := sdk.ValidateRealm(realm); err != nil {
			return nil, fmt.Errorf("%w: realms.%s: %v", ErrMalformed, realm, err)
		}
		for id, mobs := range rb.Mobs {
			if err := (sdk.Identity{Realm: realm, ID: id}).Validate(); err != nil {
				return nil, fmt.Errorf("%w: realms.%s.mobs.%s: %v", ErrMalformed, realm, id, err)
			}
			var clean []string
			seen := make(map[string]bool, len(mobs)) // a lookup in clean would be quadratic
			for i, m := range mobs {
				if err := sdk.MobScope(m).Validate(); err != nil {
					return nil, fmt.Errorf("%w: realms.%s.mobs.%s[%d]: %q is not a usable mob name", ErrMalformed, realm, id, i, m)
				}
				if !seen[m] {
					seen[m] = true
					clean = append(clean, m)
				}
			}
			rb.Mobs[id] = clean
		}
		for id, op := range rb.Operators {
			if err := (sdk.Identity{Realm: realm, ID: id}).Validate(); err != nil {
				return nil, fmt.Errorf("%w: realms.%s.operators.%s: %v", ErrMalformed, realm, id, err)
			}
			if op == "" {
				continue // explicitly no operator
			}
			if err := sdk.OperatorScope(op).Validate(); err != nil {
				return nil, fmt.Errorf("%w: realms.%s.operators.%s: %q is not a usable operator name", ErrMalformed, realm, id, op)
			}
		}
	}
	return &f, nil
}

// describe words a decoding error with the line it is on.
func describe(data []byte, err error) string {
	var e *strictjson.Error
	if errors.As(err, &e) {
		return fmt.Sprintf("line %d: %v", lineAt(data, e.Offset), e)
	}
	return err.Error()
}

func lineAt(data []byte, offset int64) int {
	offset = min(max(offset, 0), int64(len(data)))
	return 1 + bytes.Count(data[:offset], []byte("\n"))
}
