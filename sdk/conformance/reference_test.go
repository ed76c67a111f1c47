package conformance_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/tokenize"
)

// refProvider is the smallest provider that passes the whole kit: every
// record in memory, the lot rewritten to one JSON file (fsynced, renamed
// into place) after each change. Its bugs switch on one deliberate defect
// each, to prove the kit catches it.
type refProvider struct {
	bugs    bugs
	caps    sdk.Capabilities
	version string

	mu     sync.Mutex
	path   string
	recs   map[string]map[string]*sdk.Record // realm -> id -> record
	terms  map[string][2][]string            // content hash -> title and body terms
	ledger []sdk.LedgerEntry
}

type bugs struct {
	leakRealms, ignoreScopes, duplicateWrites, partialBatch, recallSuperseded, recallExpired,
	forgetMissingFails, noPersist, truncateTitles, looseConfig, unboundedWorkingSet, ignoreTags,
	worstFirst, dropExplicitID, ignoreWindow, epochOpen, noNeighbours, ignoreDeadline, expiryAtWrite bool
}

var allCaps = sdk.Capabilities{sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest, sdk.CapSupersede, sdk.CapUsage, sdk.CapLedger, sdk.CapNeighbours}

func newRef() *refProvider { return &refProvider{caps: allCaps, version: "0.1.0"} }

func (p *refProvider) Info() sdk.Info {
	return sdk.Info{
		Name: "ref", Version: p.version, Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{sdk.ProtocolVersion},
		Capabilities: p.caps,
		ConfigSchema: json.RawMessage(`{"type":"object","properties":{"dir":{"type":"string"}},"required":["dir"],"additionalProperties":false}`),
	}
}

func (p *refProvider) Configure(_ context.Context, raw json.RawMessage) error {
	var cfg struct {
		Dir string `json:"dir"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if !p.bugs.looseConfig {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(&cfg); err != nil {
		return fmt.Errorf("ref: config: %v: %w", err, sdk.ErrInvalid)
	}
	if cfg.Dir == "" {
		return fmt.Errorf("ref: config: dir is required: %w", sdk.ErrInvalid)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.path = filepath.Join(cfg.Dir, "ref.json")
	p.recs = map[string]map[string]*sdk.Record{}
	data, err := os.ReadFile(p.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ref: %w", err)
	}
	return json.Unmarshal(data, &p.recs)
}

func (p *refProvider) Close() error { return nil }

// save rewrites the store; callers hold mu.
func (p *refProvider) save() error { return p.saveBy(context.Background()) }

// saveBy saves unless ctx ends first: its deadline is checked after the
// slow part (encoding, writing, syncing) and before the rename commits,
// so a write whose caller was answered deadline_exceeded is not stored.
func (p *refProvider) saveBy(ctx context.Context) error {
	if p.bugs.noPersist {
		return ctx.Err()
	}
	data, err := json.Marshal(p.recs)
	if err != nil {
		return err
	}
	tmp := p.path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := sdk.ContextErr(ctx); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, p.path)
}

func checkScopes(scopes []sdk.Scope) error {
	for _, s := range scopes {
		if err := s.Validate(); err != nil {
			return err
		}
	}
	return nil
}

func (p *refProvider) realm(realm string) map[string]*sdk.Record {
	m := p.recs[realm]
	if m == nil {
		m = map[string]*sdk.Record{}
		p.recs[realm] = m
	}
	return m
}

func (p *refProvider) inScopes(r *sdk.Record, scopes []sdk.Scope) bool {
	return p.bugs.ignoreScopes || len(scopes) == 0 || slices.Contains(scopes, r.Scope)
}

// recallable is r.Recallable(now), or with the expiryAtWrite bug whether
// r was unexpired when it was written.
func (p *refProvider) recallable(r *sdk.Record, now time.Time) bool {
	if p.bugs.expiryAtWrite {
		now = r.UpdatedAt
	}
	return r.Recallable(now)
}

func (p *refProvider) Recall(_ context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	if err := sdk.ValidateRealm(q.Realm); err != nil {
		return nil, err
	}
	if err := checkScopes(q.Scopes); err != nil {
		return nil, err
	}
	if q.Limit < 0 {
		return nil, fmt.Errorf("ref: limit %d: %w", q.Limit, sdk.ErrInvalid)
	}
	limit := cmp.Or(q.Limit, sdk.DefaultRecallLimit)
	terms := tokenize.Terms(q.Query)
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	var hits []sdk.Hit
	for realm, recs := range p.recs {
		if realm != q.Realm && !p.bugs.leakRealms {
			continue
		}
		for _, r := range recs {
			recallable := p.recallable(r, now) ||
				p.bugs.recallSuperseded && r.Status == sdk.StatusSuperseded ||
				p.bugs.recallExpired && r.Status == sdk.StatusActive
			if !recallable || !p.inScopes(r, q.Scopes) || slices.Contains(q.ExcludeIDs, r.ID) {
				continue
			}
			if !p.bugs.ignoreTags && (slices.ContainsFunc(q.Tags, func(t string) bool { return !r.HasTag(t) }) || slices.ContainsFunc(q.ExcludeTags, r.HasTag)) {
				continue
			}
			if p.bugs.epochOpen {
				// Reads an end at the epoch (sent as the millisecond
				// before it) as open, as a store keeping 0 for open did.
				for _, end := range []*time.Time{&q.Since, &q.Until} {
					if ms := end.UnixMilli(); ms == 0 || ms == -1 {
						*end = time.Time{}
					}
				}
			}
			if !p.bugs.ignoreWindow && !q.InWindow(r.When()) {
				continue
			}
			title, body := p.termsOf(r)
			score := 0.0
			for _, t := range terms {
				if slices.Contains(title, t) {
					score += 4
				}
				if slices.Contains(body, t) {
					score += 2
				}
			}
			if score > 0 {
				hits = append(hits, sdk.Hit{Record: *r, Score: score})
			}
		}
	}
	slices.SortFunc(hits, func(a, b sdk.Hit) int {
		c := cmp.Or(cmp.Compare(b.Score, a.Score), b.Record.UpdatedAt.Compare(a.Record.UpdatedAt), strings.Compare(a.Record.ID, b.Record.ID))
		if p.bugs.worstFirst {
			return -c
		}
		return c
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, nil
}

// termsOf cuts a record's title and body into terms once; callers hold mu.
func (p *refProvider) termsOf(r *sdk.Record) (title, body []string) {
	t, ok := p.terms[r.ContentHash]
	if !ok {
		if p.terms == nil {
			p.terms = map[string][2][]string{}
		}
		t = [2][]string{tokenize.Terms(r.Title), tokenize.Terms(r.Body)}
		p.terms[r.ContentHash] = t
	}
	return t[0], t[1]
}

func (p *refProvider) Remember(ctx context.Context, realm string, in []sdk.Record) ([]string, error) {
	if err := sdk.ValidateRealm(realm); err != nil {
		return nil, err
	}
	if len(in) > sdk.MaxBatch {
		return nil, fmt.Errorf("ref: %d records, the limit is %d: %w", len(in), sdk.MaxBatch, sdk.ErrTooLarge)
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	recs := p.realm(realm)
	ids := make([]string, len(in))
	var added []string
	for i := range in {
		r := in[i]
		if p.bugs.dropExplicitID {
			r.ID = ""
		}
		if p.bugs.truncateTitles && len(r.Title) > sdk.MaxTitleBytes {
			r.Title = r.Title[:sdk.MaxTitleBytes]
		}
		if err := r.Prepare(realm, now); err != nil {
			if !p.bugs.partialBatch {
				for _, id := range added {
					delete(recs, id)
				}
			} else {
				p.save()
			}
			return nil, err
		}
		if dup := p.findHash(recs, r.Scope, r.ContentHash); dup != "" && !p.bugs.duplicateWrites {
			ids[i] = dup
			if held := recs[dup]; !held.ExpiresAt.IsZero() && !held.ExpiresAt.After(now) {
				held.ExpiresAt, held.UpdatedAt = r.ExpiresAt, now
			}
			continue
		}
		recs[r.ID] = &r
		added = append(added, r.ID)
		ids[i] = r.ID
	}
	if p.bugs.ignoreDeadline {
		// Slow as well, so that the kit's deadline (a tenth of a timed
		// write, so at least 50ms) leaves a write time to reach the plugin
		// on a loaded machine and passes while the plugin works: the kit
		// must catch the commit, not the timing. One that dies in transit
		// does not count for the plugin either way.
		time.Sleep(500 * time.Millisecond)
		ctx = context.Background()
	}
	if err := p.saveBy(ctx); err != nil {
		// Not committed: the caller is told it failed, so nothing stays.
		for _, id := range added {
			delete(recs, id)
		}
		return nil, err
	}
	return ids, nil
}

// findHash answers the live record of scope holding hash, if any.
func (p *refProvider) findHash(recs map[string]*sdk.Record, scope sdk.Scope, hash string) string {
	for id, r := range recs {
		if r.Scope == scope && r.ContentHash == hash && (r.Status == sdk.StatusActive || r.Status == sdk.StatusQuarantined) {
			return id
		}
	}
	return ""
}

func checkIDs(ids []string) error {
	if len(ids) > sdk.MaxBatch {
		return fmt.Errorf("ref: %d ids, the limit is %d: %w", len(ids), sdk.MaxBatch, sdk.ErrTooLarge)
	}
	for _, id := range ids {
		if err := sdk.ValidateID(id); err != nil {
			return err
		}
	}
	return nil
}

func (p *refProvider) Get(_ context.Context, realm string, ids []string) ([]sdk.Record, error) {
	if err := sdk.ValidateRealm(realm); err != nil {
		return nil, err
	}
	if err := checkIDs(ids); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []sdk.Record
	for _, id := range ids {
		if r, ok := p.recs[realm][id]; ok {
			out = append(out, *r)
		}
	}
	return out, nil
}

// ReadThread answers every record of realm at the places asked, of any
// status and however many, against the ThreadReader contract on purpose:
// the SDK's server holds a provider to sdk.MaxPlaceReads active records a
// place and keeps the ones a recall may show, so the kit's checks pass
// only if it does.
func (p *refProvider) ReadThread(_ context.Context, realm string, places []sdk.ThreadPlace) ([]sdk.Record, error) {
	if err := sdk.ValidateRealm(realm); err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []sdk.Record
	for _, r := range p.recs[realm] {
		if r.Thread != nil && !p.bugs.noNeighbours && slices.Contains(places, sdk.ThreadPlace{Scope: r.Scope, Thread: r.Thread.ID, Seq: r.Thread.Seq}) {
			out = append(out, *r)
		}
	}
	return out, nil
}

func (p *refProvider) Forget(_ context.Context, realm string, ids []string) (int, error) {
	if err := sdk.ValidateRealm(realm); err != nil {
		return 0, err
	}
	if err := checkIDs(ids); err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, id := range ids {
		if _, ok := p.recs[realm][id]; ok {
			delete(p.recs[realm], id)
			n++
		} else if p.bugs.forgetMissingFails {
			return n, fmt.Errorf("ref: %s: %w", id, sdk.ErrNotFound)
		}
	}
	return n, p.save()
}

func (p *refProvider) Manifest(_ context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	if err := sdk.ValidateRealm(q.Realm); err != nil {
		return nil, err
	}
	if err := checkScopes(q.Scopes); err != nil {
		return nil, err
	}
	if q.Tier != sdk.TierFull && q.Tier != sdk.TierWorkingSet {
		return nil, fmt.Errorf("ref: unknown manifest tier %d: %w", q.Tier, sdk.ErrInvalid)
	}
	if q.Tier == sdk.TierWorkingSet && q.K <= 0 {
		return nil, fmt.Errorf("ref: working set k must be positive, got %d: %w", q.K, sdk.ErrInvalid)
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	var recs []*sdk.Record
	for _, r := range p.recs[q.Realm] {
		if p.recallable(r, now) && p.inScopes(r, q.Scopes) {
			recs = append(recs, r)
		}
	}
	// Newest first; in the working set the most used come first, ranked.
	slices.SortFunc(recs, func(a, b *sdk.Record) int { return b.UpdatedAt.Compare(a.UpdatedAt) })
	var rows []sdk.ManifestRow
	if q.Tier == sdk.TierWorkingSet && !p.bugs.unboundedWorkingSet {
		used := slices.Clone(recs)
		slices.SortStableFunc(used, func(a, b *sdk.Record) int { return cmp.Compare(b.UseCount, a.UseCount) })
		var pick []*sdk.Record
		for _, r := range used[:min(q.K, len(used))] {
			if r.UseCount > 0 {
				pick = append(pick, r)
			}
		}
		for _, r := range recs {
			if len(pick) < 2*q.K && !slices.Contains(pick, r) {
				pick = append(pick, r)
			}
		}
		recs = pick
	}
	for _, r := range recs {
		rows = append(rows, sdk.ManifestRow{ID: r.ID, Scope: r.Scope, Kind: r.Kind, Title: r.Title, Description: r.Description, UpdatedAt: r.UpdatedAt, Rank: float64(r.UseCount)})
	}
	return rows, nil
}

func (p *refProvider) Supersede(_ context.Context, realm, oldID string, repl sdk.Record) (string, error) {
	if err := sdk.ValidateRealm(realm); err != nil {
		return "", err
	}
	if err := sdk.ValidateID(oldID); err != nil {
		return "", err
	}
	repl.Supersedes = oldID
	if err := repl.Prepare(realm, time.Now()); err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	old, ok := p.recs[realm][oldID]
	if !ok {
		return "", fmt.Errorf("ref: %s: %w", oldID, sdk.ErrNotFound)
	}
	old.Status = sdk.StatusSuperseded
	p.recs[realm][repl.ID] = &repl
	return repl.ID, p.save()
}

func (p *refProvider) MarkUsed(_ context.Context, realm string, ids []string, at time.Time) error {
	if err := sdk.ValidateRealm(realm); err != nil {
		return err
	}
	if err := checkIDs(ids); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, u := range sdk.OneUseEach(ids) {
		if r, ok := p.recs[realm][u.ID]; ok {
			r.UseCount++
			r.LastUsedAt = at.UTC()
		}
	}
	return p.save()
}

func (p *refProvider) WriteLedger(_ context.Context, entries []sdk.LedgerEntry) error {
	for _, e := range entries {
		if err := sdk.ValidateRealm(e.Realm); err != nil {
			return err
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ledger = append(p.ledger, entries...)
	return nil
}
