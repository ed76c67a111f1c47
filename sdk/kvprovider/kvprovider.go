// Package kvprovider is a complete memhost provider for a backend that can
// only store and load records. The author implements Store (load every
// record, put, delete) and an Open function for the configuration; this
// package does the rest: validation, dedup by content hash, all-or-nothing
// batches, supersede, usage counts, the record manifest, and exact BM25
// recall from an in-memory sdk/index, ranking as the sqlite provider does,
// with each hit's thread neighbours when asked.
//
// Every record lives in memory (the index and the records both), so it
// suits stores of up to some hundred thousand records. The Store stays the
// durable truth: memory changes only after the Store acknowledged a write,
// and Configure rebuilds it from Store.Load.
//
//	p := kvprovider.New(kvprovider.Options{
//		Info: sdk.Info{Name: "mykv", Version: "0.1.0"},
//		Open: func(ctx context.Context, config json.RawMessage) (kvprovider.Store, error) { … },
//	})
//	sdk.Serve(p)
package kvprovider

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
)

// Key names one stored record.
type Key struct {
	Realm string `json:"realm"`
	ID    string `json:"id"`
}

// Store is the storage an author implements. Calls are serialised: the
// provider never runs two of them at once.
type Store interface {
	// Load answers every stored record, of every realm and status, as
	// last put. It runs once, in Configure.
	Load(ctx context.Context) ([]sdk.Record, error)
	// Put stores records durably before it returns, all or nothing,
	// replacing any stored record of the same realm and id.
	Put(ctx context.Context, records []sdk.Record) error
	// Delete removes records durably, all or nothing; a key that is not
	// stored is not an error.
	Delete(ctx context.Context, keys []Key) error
}

// LedgerStore is implemented by a Store that also keeps the injection
// ledger; only then does the provider declare sdk.CapLedger.
type LedgerStore interface {
	AppendLedger(ctx context.Context, entries []sdk.LedgerEntry) error
}

// Options describe the provider.
type Options struct {
	// Info names the plugin (Name, Version, ConfigSchema). Kinds,
	// Protocols and Capabilities are filled in by New.
	Info sdk.Info
	// Open opens the Store for the instance configuration, a JSON object
	// ("{}" when the deployment gives none). It should decode it with
	// sdk.DecodeConfig, which refuses unknown keys with sdk.ErrInvalid.
	// A Store that implements io.Closer is closed with the provider.
	Open func(ctx context.Context, config json.RawMessage) (Store, error)
	// Ledger says the Store implements LedgerStore, so the provider
	// declares sdk.CapLedger. Info must not depend on configuration, so
	// this is declared up front rather than discovered from the Store.
	Ledger bool
}

// Provider is the complete provider. It is safe for concurrent use.
type Provider struct {
	opts Options

	mu     sync.RWMutex
	store  Store // nil until configured and after Close
	closed bool
	realms map[string]*realm
	ix     *index.Index
	// reindexing admits one Reindex at a time (reindex.go).
	reindexing chan struct{}
}

// realm is one realm's records in memory.
type realm struct {
	recs map[string]*sdk.Record
	// content lists the ids holding a scope's content hash, for dedup.
	content map[string][]string
}

func contentKey(scope sdk.Scope, hash string) string { return string(scope) + "\x00" + hash }

// Field weights of the sqlite provider's bm25(records_fts, 5, 4, 2, 1):
// tags, title, description, body.
var fieldWeights = []float64{5, 4, 2, 1}

// indexOptions rank each realm by its own statistics, so one realm's
// writes never move another's scores.
var indexOptions = index.Options{Weights: fieldWeights, ContextWeight: index.ContextWeight, Stats: index.StatsRealm}

// New answers an unconfigured provider.
func New(opts Options) *Provider {
	caps := sdk.Capabilities{sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest, sdk.CapSupersede, sdk.CapUsage, sdk.CapUsageCounts, sdk.CapArchive, sdk.CapReindex, sdk.CapNeighbours}
	if opts.Ledger {
		caps = append(caps, sdk.CapLedger)
	}
	opts.Info.Kinds = []sdk.PluginKind{sdk.KindProvider}
	opts.Info.Protocols = []int{sdk.ProtocolVersion}
	opts.Info.Capabilities = caps
	return &Provider{opts: opts, reindexing: make(chan struct{}, 1)}
}

// Info describes the plugin.
func (p *Provider) Info() sdk.Info { return p.opts.Info }

func (p *Provider) errorf(format string, args ...any) error {
	return fmt.Errorf(p.opts.Info.Name+": "+format, args...)
}

// Configure opens the Store and loads every record into memory.
func (p *Provider) Configure(ctx context.Context, config json.RawMessage) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.store != nil || p.closed {
		return p.errorf("already configured: %w", sdk.ErrConflict)
	}
	if p.opts.Open == nil {
		return p.errorf("no Open function: %w", sdk.ErrUnavailable)
	}
	store, err := p.opts.Open(ctx, config)
	if err != nil {
		return p.errorf("open: %w", err)
	}
	ix, err := index.New(indexOptions)
	if err != nil {
		return err
	}
	realms, err := load(ctx, store, ix)
	if err != nil {
		closeStore(store)
		return p.errorf("load: %w", err)
	}
	// In scope order, so a query of one scope passes over the others'
	// postings. Records written later stay in arrival order until a
	// Reindex or the next start: renumbering them under load would stall
	// recall, which holds mu while it searches.
	ix.Cluster(0)
	p.store, p.realms, p.ix = store, realms, ix
	return nil
}

// load reads every stored record into memory and the index.
func load(ctx context.Context, store Store, ix *index.Index) (map[string]*realm, error) {
	recs, err := store.Load(ctx)
	if err != nil {
		return nil, err
	}
	realms := map[string]*realm{}
	for i := range recs {
		// A copy: the Store may keep the slice it answered and change it in
		// place later (a delete that shifts its elements).
		c := cloneRecord(&recs[i])
		r := &c
		if err := checkLoaded(r); err != nil {
			return nil, fmt.Errorf("stored record %s/%s: %w", r.Realm, r.ID, err)
		}
		rm := realms[r.Realm]
		if rm == nil {
			rm = &realm{recs: map[string]*sdk.Record{}, content: map[string][]string{}}
			realms[r.Realm] = rm
		}
		if _, dup := rm.recs[r.ID]; dup {
			return nil, fmt.Errorf("stored record %s/%s is loaded twice", r.Realm, r.ID)
		}
		doc := docOf(r)
		if err := apply(ix, rm, r, &doc); err != nil {
			return nil, err
		}
	}
	return realms, nil
}

// checkLoaded checks a record read back from the Store, which a person or
// an older build may have written.
func checkLoaded(r *sdk.Record) error {
	if err := r.Validate(); err != nil {
		return err
	}
	switch {
	case r.ID == "" || r.Realm == "":
		return errors.New("it lacks an id or a realm")
	case r.Status == "":
		return errors.New("it has no status")
	case r.ContentHash != sdk.ContentHash(r.Title, r.Body):
		return errors.New("its content hash does not match its title and body")
	}
	return nil
}

// Close closes the Store; later calls fail with sdk.ErrUnavailable.
func (p *Provider) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	store := p.store
	p.store, p.realms, p.ix = nil, nil, nil
	return closeStore(store)
}

func closeStore(s Store) error {
	if c, ok := s.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// ready fails unless the provider is configured and open. Callers hold mu.
func (p *Provider) ready(ctx context.Context) error {
	if err := sdk.ContextErr(ctx); err != nil {
		return err
	}
	if p.store == nil {
		return p.errorf("not configured or closed: %w", sdk.ErrUnavailable)
	}
	return nil
}

// apply puts a stored record into memory: the record, its content key and,
// when it is active, the index as doc. A usage-only change (doc nil)
// keeps the record's index entry as it is.
func apply(ix *index.Index, rm *realm, r *sdk.Record, doc *index.Doc) error {
	if old := rm.recs[r.ID]; old != nil {
		forgetContent(rm, old)
	}
	rm.recs[r.ID] = r
	k := contentKey(r.Scope, r.ContentHash)
	rm.content[k] = append(rm.content[k], r.ID)
	switch {
	case r.Status != sdk.StatusActive:
		ix.Delete(r.Realm, r.ID)
		return nil
	case doc == nil && ix.Has(r.Realm, r.ID):
		return nil
	case doc == nil:
		d := docOf(r)
		doc = &d
	}
	return ix.Put(*doc)
}

// unapply removes a record from memory.
func unapply(ix *index.Index, rm *realm, id string) {
	if old := rm.recs[id]; old != nil {
		forgetContent(rm, old)
		delete(rm.recs, id)
		ix.Delete(old.Realm, id)
	}
}

func forgetContent(rm *realm, r *sdk.Record) {
	k := contentKey(r.Scope, r.ContentHash)
	ids := rm.content[k]
	for i, id := range ids {
		if id == r.ID {
			ids = append(ids[:i], ids[i+1:]...)
			break
		}
	}
	if len(ids) == 0 {
		delete(rm.content, k)
	} else {
		rm.content[k] = ids
	}
}

// findContent answers a recallable record of scope holding hash, or "".
func (rm *realm) findContent(scope sdk.Scope, hash string, now time.Time) string {
	for _, id := range rm.content[contentKey(scope, hash)] {
		if rm.recs[id].Recallable(now) {
			return id
		}
	}
	return ""
}

// docsOf answers docOf of each record.
func docsOf(recs []sdk.Record) []index.Doc {
	docs := make([]index.Doc, len(recs))
	for i := range recs {
		docs[i] = docOf(&recs[i])
	}
	return docs
}

func docOf(r *sdk.Record) index.Doc {
	var exp int64
	if !r.ExpiresAt.IsZero() {
		exp = r.ExpiresAt.UnixMilli()
	}
	d := index.Doc{
		ID: r.ID, Realm: r.Realm, Scope: string(r.Scope), Tags: r.Tags, ExpiresMs: exp, WhenMs: r.When().UnixMilli(),
		// Equal scores answer the latest updated first, the same way after
		// every reload. The sqlite provider orders them by when they were
		// stored, which differs for records imported with older times.
		Seq: uint64(max(r.UpdatedAt.UnixNano(), 1)),
		Fields: [][]string{
			index.FieldTerms(index.TagText(r.Tags)), index.FieldTerms(r.Title),
			index.FieldTerms(r.Description), index.FieldTerms(r.Body),
		},
	}
	if r.Thread != nil {
		d.Thread, d.ThreadSeq = r.Thread.ID, r.Thread.Seq
	}
	return d
}

// cloneRecord copies r so callers never share the stored tag slice.
func cloneRecord(r *sdk.Record) sdk.Record {
	c := *r
	c.Tags = append([]string(nil), r.Tags...)
	return c
}

// Decoded builds an Options.Open from a typed configuration: the payload
// is decoded strictly (sdk.DecodeConfig) over a copy of defaults, then
// handed to open.
func Decoded[C any](defaults C, open func(context.Context, C) (Store, error)) func(context.Context, json.RawMessage) (Store, error) {
	return func(ctx context.Context, raw json.RawMessage) (Store, error) {
		cfg := defaults
		if err := sdk.DecodeConfig(raw, &cfg); err != nil {
			return nil, err
		}
		return open(ctx, cfg)
	}
}
