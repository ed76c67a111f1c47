// Package kv is an example memhost provider on sdk/kvprovider: every change
// is a JSON line appended to a log and fsynced, and the log replays at start.
package kv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/kvprovider"
)

// Config is the instance configuration: the log, relative to the data directory.
type Config struct {
	File string `json:"file"`
}

// New answers an unconfigured provider.
func New() *kvprovider.Provider {
	open := kvprovider.Decoded(Config{File: "kv.log"}, open)
	return kvprovider.New(kvprovider.Options{Info: sdk.Info{Name: "kv", Version: "0.1.0"}, Open: open, Ledger: true})
}

func open(_ context.Context, cfg Config) (kvprovider.Store, error) {
	if cfg.File == "" {
		return nil, fmt.Errorf("file must not be empty: %w", sdk.ErrInvalid)
	}
	f, err := os.OpenFile(cfg.File, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	return &store{f: f}, err
}

// change is one log line, applied whole.
type change struct {
	Put    []sdk.Record      `json:"put,omitempty"`
	Delete []kvprovider.Key  `json:"delete,omitempty"`
	Ledger []sdk.LedgerEntry `json:"ledger,omitempty"`
}

type store struct {
	f    *os.File
	size int64 // bytes of acknowledged changes
}

// Load replays the log, cutting off a last line the plugin died writing.
func (s *store) Load(context.Context) ([]sdk.Record, error) {
	recs := map[kvprovider.Key]sdk.Record{}
	for dec := json.NewDecoder(s.f); ; s.size = dec.InputOffset() {
		var c change
		if err := dec.Decode(&c); err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s at byte %d: %w", s.f.Name(), s.size, err)
		}
		for _, r := range c.Put {
			recs[kvprovider.Key{Realm: r.Realm, ID: r.ID}] = r
		}
		for _, k := range c.Delete {
			delete(recs, k)
		}
	}
	return slices.Collect(maps.Values(recs)), s.f.Truncate(s.size)
}

func (s *store) Put(_ context.Context, r []sdk.Record) error        { return s.add(change{Put: r}) }
func (s *store) Delete(_ context.Context, k []kvprovider.Key) error { return s.add(change{Delete: k}) }
func (s *store) AppendLedger(_ context.Context, e []sdk.LedgerEntry) error {
	return s.add(change{Ledger: e})
}
func (s *store) Close() error { return s.f.Close() }

// add appends one line and fsyncs it; a failed line is cut off again.
func (s *store) add(c change) error {
	line, err := json.Marshal(c)
	if err == nil {
		if _, err = s.f.Write(append(line, '\n')); err == nil {
			err = s.f.Sync()
		}
	}
	if err != nil {
		return errors.Join(err, s.f.Truncate(s.size))
	}
	s.size += int64(len(line)) + 1
	return nil
}
