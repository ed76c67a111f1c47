// Package coordinatortest holds in-memory doubles of memhost plugins for
// tests and benchmarks of the coordinator, the guide and the host: a
// provider that is also a servable plugin (so it can run behind real gRPC
// with host.ServeInProcess), and function adapters for selectors and scope
// resolvers. Everything here is safe for concurrent use.
package coordinatortest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
	"github.com/memhost/memhost/sdk/tokenize"
)

// Provider is an in-memory provider. It implements every capability
// interface; Info declares only the capabilities it was built with, so
// the host (host.ProviderOf) sees exactly those.
type Provider struct {
	caps sdk.Capabilities
	now  func() time.Time

	mu      sync.Mutex
	records map[string][]*stored // by realm, in insertion order
	calls   map[string]int
	hooks   map[string]Hook
	queries []sdk.RecallQuery
	lists   []sdk.ManifestQuery
	ledger  []sdk.LedgerEntry
	used    map[string]int64
}

type stored struct {
	rec   sdk.Record
	terms map[string]struct{}
	vec   *sdk.RecordVector // nil until PutVectors
}

// Method names for Calls and SetHook.
const (
	MethodRecall      = "Recall"
	MethodRemember    = "Remember"
	MethodGet         = "Get"
	MethodForget      = "Forget"
	MethodManifest    = "Manifest"
	MethodMarkUsed    = "MarkUsed"
	MethodCountUses   = "CountUses"
	MethodWriteLedger = "WriteLedger"
	MethodSupersede   = "Supersede"
	MethodExport      = "Export"
	MethodImport      = "Import"
	MethodReindex     = "Reindex"
	MethodPutVectors  = "PutVectors"
	MethodMissing     = "MissingVectors"
	MethodReadThread  = "ReadThread"
)

// AllCapabilities is every provider capability the SDK knows; Provider
// implements them all (TestProviderImplementsEveryCapability).
var AllCapabilities = sdk.AllCapabilities()

// NewProvider builds a provider declaring caps (write is always declared,
// so tests can seed it).
func NewProvider(caps ...sdk.Capability) *Provider {
	if !slices.Contains(caps, sdk.CapWrite) {
		caps = append(caps, sdk.CapWrite)
	}
	return &Provider{
		caps: caps, now: time.Now,
		records: map[string][]*stored{}, calls: map[string]int{},
		hooks: map[string]Hook{}, used: map[string]int64{},
	}
}

// SetNow replaces the clock used for timestamps and expiry.
func (p *Provider) SetNow(now func() time.Time) {
	p.mu.Lock()
	p.now = now
	p.mu.Unlock()
}

// Hook sees a call before it runs: req is the call's request (a
// sdk.RecallQuery, a sdk.ManifestQuery, the []string ids of Get, Forget and
// MarkUsed, the []sdk.LedgerEntry of WriteLedger, the []sdk.Record of
// Remember and Import, the after cursor of Export, the realm of Reindex,
// the []sdk.RecordVector of PutVectors, the model of MissingVectors).
// An error is the call's answer. A hook may block (until ctx ends) to hold
// a call.
type Hook func(ctx context.Context, req any) error

// SetHook installs fn for method (nil removes it).
func (p *Provider) SetHook(method string, fn Hook) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fn == nil {
		delete(p.hooks, method)
		return
	}
	p.hooks[method] = fn
}

// Calls answers how many times method was called.
func (p *Provider) Calls(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[method]
}

// ResetCalls zeroes every call counter.
func (p *Provider) ResetCalls() {
	p.mu.Lock()
	clear(p.calls)
	p.queries, p.lists = nil, nil
	p.mu.Unlock()
}

// Ledger answers the ledger rows written so far.
func (p *Provider) Ledger() []sdk.LedgerEntry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.ledger)
}

// UseCount answers how often id was marked used.
func (p *Provider) UseCount(id string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used[id]
}

// RecallQueries answers every Recall request so far, in order.
func (p *Provider) RecallQueries() []sdk.RecallQuery {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.queries)
}

// ManifestQueries answers every Manifest request so far, in order.
func (p *Provider) ManifestQueries() []sdk.ManifestQuery {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.lists)
}

func (p *Provider) enter(ctx context.Context, method string, req any) error {
	p.mu.Lock()
	p.calls[method]++
	switch q := req.(type) {
	case sdk.RecallQuery:
		p.queries = append(p.queries, q)
	case sdk.ManifestQuery:
		p.lists = append(p.lists, q)
	}
	hook := p.hooks[method]
	p.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, req); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// Info implements sdk.Plugin.
func (p *Provider) Info() sdk.Info {
	return sdk.Info{Name: "memtest", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{sdk.ProtocolVersion}, Capabilities: slices.Clone(p.caps)}
}

// Configure implements sdk.Plugin; it takes only an empty object.
func (p *Provider) Configure(_ context.Context, raw json.RawMessage) error {
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil || len(cfg) > 0 {
		return fmt.Errorf("memtest takes no configuration: %w", sdk.ErrInvalid)
	}
	return nil
}

// Close implements io.Closer.
func (p *Provider) Close() error { return nil }

// MustAdd stores records in realm and answers their ids; it panics on a bad
// record (test setup).
func (p *Provider) MustAdd(realm string, recs ...sdk.Record) []string {
	ids, err := p.add(realm, recs)
	if err != nil {
		panic(err)
	}
	return ids
}

func (p *Provider) add(realm string, recs []sdk.Record) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prepared := make([]sdk.Record, len(recs))
	for i, r := range recs {
		created, updated := r.CreatedAt, r.UpdatedAt
		if err := r.Prepare(realm, p.now()); err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		if !created.IsZero() {
			r.CreatedAt = created
		}
		if !updated.IsZero() {
			r.UpdatedAt = updated // tests set ages
		}
		prepared[i] = r
	}
	// A record whose content its scope holds already answers the first
	// such record's id: one look-up table for the call rather than a scan
	// of the realm for each record (a test writing many thousands in one
	// call waited seconds on the scans).
	type content struct {
		scope sdk.Scope
		hash  string
	}
	held := make(map[content]*stored, len(p.records[realm])+len(prepared))
	for _, s := range p.records[realm] {
		if k := (content{s.rec.Scope, s.rec.ContentHash}); held[k] == nil {
			held[k] = s
		}
	}
	ids := make([]string, len(prepared))
	for i, r := range prepared {
		k := content{r.Scope, r.ContentHash}
		if dup := held[k]; dup != nil {
			ids[i] = dup.rec.ID
			continue
		}
		s := indexed(r)
		p.records[realm] = append(p.records[realm], s)
		held[k] = s
		ids[i] = r.ID
	}
	return ids, nil
}

// indexed answers r with the terms Recall matches.
func indexed(r sdk.Record) *stored {
	terms := map[string]struct{}{}
	for _, t := range tokenize.Tokens(r.Title + " " + r.Description + " " + r.Body) {
		terms[t] = struct{}{}
	}
	for _, t := range tokenize.Tokens(index.TagText(r.Tags)) {
		terms[t] = struct{}{}
	}
	return &stored{rec: r, terms: terms}
}

// Remember implements sdk.RecordWriter.
func (p *Provider) Remember(ctx context.Context, realm string, recs []sdk.Record) ([]string, error) {
	if err := p.enter(ctx, MethodRemember, recs); err != nil {
		return nil, err
	}
	return p.add(realm, recs)
}

// Recall implements sdk.Provider: a record scores the number of distinct
// query terms among its title, description, body and tag terms; records
// scoring nothing are left out. An empty query answers every record,
// newest first.
func (p *Provider) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	if err := p.enter(ctx, MethodRecall, q); err != nil {
		return nil, err
	}
	// Neighbours are attached by host.Provider, as Serve would.
	return p.rank(q), nil
}

// ReadThread implements sdk.ThreadReader.
func (p *Provider) ReadThread(ctx context.Context, realm string, places []sdk.ThreadPlace) ([]sdk.Record, error) {
	if err := p.enter(ctx, MethodReadThread, places); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	byPlace := map[sdk.ThreadPlace][]sdk.Record{}
	for _, s := range p.records[realm] {
		r := s.rec
		if r.Thread == nil || r.Status != sdk.StatusActive {
			continue
		}
		if at := (sdk.ThreadPlace{Scope: r.Scope, Thread: r.Thread.ID, Seq: r.Thread.Seq}); slices.Contains(places, at) {
			byPlace[at] = append(byPlace[at], r)
		}
	}
	var out []sdk.Record
	for _, at := range byPlace {
		slices.SortFunc(at, func(a, b sdk.Record) int { return strings.Compare(a.ID, b.ID) })
		out = append(out, at[:min(len(at), sdk.MaxPlaceReads)]...)
	}
	return out, nil
}

// rank answers q's hits, best first.
func (p *Provider) rank(q sdk.RecallQuery) []sdk.Hit {
	terms := tokenize.Terms(q.Query)
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	type match struct {
		s     *stored
		score int
	}
	var found []match
	for _, s := range p.records[q.Realm] {
		r := &s.rec
		if !r.Recallable(now) || (len(q.Scopes) > 0 && !slices.Contains(q.Scopes, r.Scope)) || slices.Contains(q.ExcludeIDs, r.ID) {
			continue
		}
		if !hasAll(r, q.Tags) || hasAny(r, q.ExcludeTags) || !q.InWindow(r.When()) {
			continue
		}
		score := 0
		for _, t := range terms {
			if _, ok := s.terms[t]; ok {
				score++
			}
		}
		if len(terms) > 0 && score == 0 {
			continue
		}
		found = append(found, match{s, score})
	}
	slices.SortStableFunc(found, func(a, b match) int {
		if a.score != b.score {
			return b.score - a.score
		}
		return b.s.rec.UpdatedAt.Compare(a.s.rec.UpdatedAt)
	})
	limit := q.Limit
	if limit <= 0 {
		limit = sdk.DefaultRecallLimit
	}
	hits := make([]sdk.Hit, 0, min(limit, len(found)))
	for _, m := range found[:min(limit, len(found))] {
		hits = append(hits, sdk.Hit{Record: m.s.rec, Score: float64(m.score)})
	}
	return hits
}

func hasAll(r *sdk.Record, tags []string) bool {
	for _, t := range tags {
		if !r.HasTag(t) {
			return false
		}
	}
	return true
}

func hasAny(r *sdk.Record, tags []string) bool {
	for _, t := range tags {
		if r.HasTag(t) {
			return true
		}
	}
	return false
}

// Get implements sdk.RecordGetter.
func (p *Provider) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	if err := p.enter(ctx, MethodGet, ids); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []sdk.Record
	for _, id := range ids {
		for _, s := range p.records[realm] {
			if s.rec.ID == id {
				out = append(out, s.rec)
				break
			}
		}
	}
	return out, nil
}

// Forget implements sdk.RecordForgetter.
func (p *Provider) Forget(ctx context.Context, realm string, ids []string) (int, error) {
	if err := p.enter(ctx, MethodForget, ids); err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	before := len(p.records[realm])
	p.records[realm] = slices.DeleteFunc(p.records[realm], func(s *stored) bool { return slices.Contains(ids, s.rec.ID) })
	return before - len(p.records[realm]), nil
}

// Manifest implements sdk.ManifestLister: the working set is the newest K
// rows, the full tier every recallable row.
func (p *Provider) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	if err := p.enter(ctx, MethodManifest, q); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	var rows []sdk.ManifestRow
	for _, s := range p.records[q.Realm] {
		r := &s.rec
		if !r.Recallable(now) || (len(q.Scopes) > 0 && !slices.Contains(q.Scopes, r.Scope)) {
			continue
		}
		rows = append(rows, sdk.ManifestRow{ID: r.ID, Scope: r.Scope, Kind: r.Kind, Title: r.Title, Description: r.Description, UpdatedAt: r.UpdatedAt})
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].UpdatedAt.After(rows[j].UpdatedAt) })
	if q.Tier == sdk.TierWorkingSet && q.K > 0 && len(rows) > q.K {
		rows = rows[:q.K]
	}
	return rows, nil
}

// Supersede implements sdk.Superseder.
func (p *Provider) Supersede(ctx context.Context, realm, oldID string, replacement sdk.Record) (string, error) {
	if err := p.enter(ctx, MethodSupersede, replacement); err != nil {
		return "", err
	}
	ids, err := p.add(realm, []sdk.Record{replacement})
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.records[realm] {
		if s.rec.ID == oldID {
			s.rec.Status = sdk.StatusSuperseded
		}
	}
	return ids[0], nil
}

// MarkUsed implements sdk.UsageMarker.
func (p *Provider) MarkUsed(ctx context.Context, realm string, ids []string, at time.Time) error {
	if err := p.enter(ctx, MethodMarkUsed, ids); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range sdk.OneUseEach(ids) {
		p.used[u.ID]++
	}
	return nil
}

// CountUses implements sdk.UsageCounter.
func (p *Provider) CountUses(ctx context.Context, realm string, uses []sdk.Use, at time.Time) error {
	if err := p.enter(ctx, MethodCountUses, uses); err != nil {
		return err
	}
	if err := sdk.ValidateUses("uses", uses); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range uses {
		p.used[u.ID] += u.Count
	}
	return nil
}

// WriteLedger implements sdk.LedgerWriter.
func (p *Provider) WriteLedger(ctx context.Context, entries []sdk.LedgerEntry) error {
	if err := p.enter(ctx, MethodWriteLedger, entries); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledger = append(p.ledger, entries...)
	return nil
}

// Export implements sdk.Archiver: records of every status, in id order.
func (p *Provider) Export(ctx context.Context, realm, after string, limit int) (sdk.ExportPage, error) {
	if err := p.enter(ctx, MethodExport, after); err != nil {
		return sdk.ExportPage{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	// Sorted as pointers, the page's records copied out after: a realm of
	// many thousands is exported a page at a time.
	var later []*stored
	for _, s := range p.records[realm] {
		if s.rec.ID > after {
			later = append(later, s)
		}
	}
	slices.SortFunc(later, func(a, b *stored) int { return strings.Compare(a.rec.ID, b.rec.ID) })
	var page sdk.ExportPage
	if len(later) > limit {
		later = later[:limit]
		page.Next = later[limit-1].rec.ID
	}
	for _, s := range later {
		page.Records = append(page.Records, s.rec)
	}
	return page, nil
}

// Import implements sdk.Archiver: records are stored as given; one whose
// id is stored, or a recallable one whose content its scope holds in a
// recallable record, is skipped, but a stored record an imported one
// retires (sdk.ImportRetires) takes its status.
func (p *Provider) Import(ctx context.Context, realm string, recs []sdk.Record) (sdk.ImportResult, error) {
	if err := p.enter(ctx, MethodImport, recs); err != nil {
		return sdk.ImportResult{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var res sdk.ImportResult
	now := p.now()
	for _, r := range recs {
		// Stored in the realm imported into, as a store keeps it: its
		// fetches and exports are held to that realm (sdk/host).
		r.Realm = realm
		if i := slices.IndexFunc(p.records[realm], func(s *stored) bool { return s.rec.ID == r.ID }); i >= 0 {
			s := p.records[realm][i]
			held := s.rec
			held.ContentHash = sdk.ContentHash(held.Title, held.Body)
			if sdk.ImportRetires(&held, &r) {
				s.rec.Status = r.Status
				if r.UpdatedAt.After(s.rec.UpdatedAt) {
					s.rec.UpdatedAt = r.UpdatedAt
				}
				res.Imported++
				continue
			}
		}
		dup := slices.ContainsFunc(p.records[realm], func(s *stored) bool {
			return s.rec.ID == r.ID || (r.Recallable(now) && s.rec.Recallable(now) && s.rec.Scope == r.Scope && s.rec.ContentHash == r.ContentHash)
		})
		if dup {
			res.Skipped++
			continue
		}
		p.records[realm] = append(p.records[realm], indexed(r))
		res.Imported++
	}
	return res, nil
}

// Reindex implements sdk.Reindexer; the index is always current, so it
// only counts the realm's records ("" counts every realm's).
func (p *Provider) Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	if err := p.enter(ctx, MethodReindex, realm); err != nil {
		return 0, err
	}
	p.mu.Lock()
	n := len(p.records[realm])
	if realm == "" {
		n = 0
		for _, rs := range p.records {
			n += len(rs)
		}
	}
	p.mu.Unlock()
	if progress != nil {
		progress(n, n)
	}
	return n, nil
}

// PutVectors implements sdk.VectorStore: a vector is kept on its record
// (so forgetting the record drops it); an unknown id is skipped. Recall
// does not use them: the double ranks by shared terms only.
func (p *Provider) PutVectors(ctx context.Context, realm string, vecs []sdk.RecordVector) error {
	if err := p.enter(ctx, MethodPutVectors, vecs); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, v := range vecs {
		for _, s := range p.records[realm] {
			// A vector made from text the record no longer holds is
			// skipped, as the VectorStore contract asks.
			if s.rec.ID == v.ID && (v.ContentHash == "" || v.ContentHash == sdk.ContentHash(s.rec.Title, s.rec.Body)) {
				s.vec = &sdk.RecordVector{ID: v.ID, Model: v.Model, Vector: slices.Clone(v.Vector), ContentHash: v.ContentHash}
			}
		}
	}
	return nil
}

// MissingVectors implements sdk.VectorStore: recallable records with no
// vector of model, in id order after after.
func (p *Provider) MissingVectors(ctx context.Context, realm, model, after string, limit int) ([]string, error) {
	if err := p.enter(ctx, MethodMissing, model); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	var ids []string
	for _, s := range p.records[realm] {
		if s.rec.ID > after && s.rec.Recallable(now) && (s.vec == nil || s.vec.Model != model) {
			ids = append(ids, s.rec.ID)
		}
	}
	slices.Sort(ids)
	return ids[:min(len(ids), limit)], nil
}

// Vector answers the vector stored for a record of realm, if any.
func (p *Provider) Vector(realm, id string) (sdk.RecordVector, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.records[realm] {
		if s.rec.ID == id && s.vec != nil {
			return *s.vec, true
		}
	}
	return sdk.RecordVector{}, false
}
