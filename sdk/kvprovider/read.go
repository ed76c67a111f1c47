package kvprovider

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
	"github.com/memhost/memhost/sdk/usage"
)

// maxWorkingSetK caps k so 2k stays a sane number of rows.
const maxWorkingSetK = 50_000

func validateScopes(scopes []sdk.Scope) error {
	for _, s := range scopes {
		if err := s.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Recall answers the best recallable records by BM25 over tags, title,
// description and body (weights 5, 4, 2, 1), exactly as the sqlite
// provider ranks them; equal scores answer the latest updated first.
func (p *Provider) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	if err := sdk.ValidateRealm(q.Realm); err != nil {
		return nil, err
	}
	if err := validateScopes(q.Scopes); err != nil {
		return nil, err
	}
	limit := q.Limit
	switch {
	case limit < 0:
		return nil, p.errorf("limit %d is negative: %w", limit, sdk.ErrInvalid)
	case limit == 0:
		limit = sdk.DefaultRecallLimit
	case limit > sdk.MaxBatch:
		limit = sdk.MaxBatch
	}
	scopes := make([]string, len(q.Scopes))
	for i, s := range q.Scopes {
		scopes[i] = string(s)
	}
	iq := index.Query{
		Realm: q.Realm, Terms: index.QueryTerms(q.Query), Scopes: scopes, ExcludeIDs: q.ExcludeIDs,
		Tags: q.Tags, ExcludeTags: q.ExcludeTags, NowMs: time.Now().UnixMilli(), Limit: limit,
	}
	iq.SinceMs, iq.UntilMs = q.WindowMillis()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.ready(ctx); err != nil {
		return nil, err
	}
	found, err := p.ix.Search(iq)
	if err != nil {
		return nil, p.errorf("recall: %w", err)
	}
	rm := p.realms[q.Realm]
	hits := make([]sdk.Hit, 0, len(found))
	for _, h := range found {
		if r := rm.recs[h.ID]; r != nil {
			hits = append(hits, sdk.Hit{Record: cloneRecord(r), Score: h.Score})
		}
	}
	return hits, nil
}

// Get answers the records found, of any status, in the order asked.
func (p *Provider) Get(ctx context.Context, realmName string, ids []string) ([]sdk.Record, error) {
	if err := sdk.ValidateRealm(realmName); err != nil {
		return nil, err
	}
	if err := p.checkIDs(ids); err != nil {
		return nil, err
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.ready(ctx); err != nil {
		return nil, err
	}
	return p.records(realmName, ids), nil
}

// ReadThread answers the records at places of realm's threads, found
// through the index's thread context. The index holds active records
// only; the others are no neighbours anyway. Unlike Get's ids, places are
// not held to sdk.MaxBatch: a full recall asks up to four per hit.
func (p *Provider) ReadThread(ctx context.Context, realmName string, places []sdk.ThreadPlace) ([]sdk.Record, error) {
	if err := sdk.ValidateRealm(realmName); err != nil {
		return nil, err
	}
	at := make([]index.Place, len(places))
	for i, pl := range places {
		at[i] = index.Place{Scope: string(pl.Scope), Thread: pl.Thread, Seq: pl.Seq}
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.ready(ctx); err != nil {
		return nil, err
	}
	return p.records(realmName, p.ix.AtPlaces(realmName, at)), nil
}

// records answers copies of realm's records with ids, those found, in
// order. Callers hold mu.
func (p *Provider) records(realmName string, ids []string) []sdk.Record {
	out := []sdk.Record{}
	if rm := p.realms[realmName]; rm != nil {
		for _, id := range ids {
			if r := rm.recs[id]; r != nil {
				out = append(out, cloneRecord(r))
			}
		}
	}
	return out
}

// Manifest lists metadata rows of recallable records. Full lists them
// all, newest first. Working set(k) lists the k used records of highest
// usage rank, then the newest never-used ones up to 2k rows, as the sqlite
// provider does. The rank takes every use at the last use time (the Store
// keeps a count and a time, not each use), decayed by usage.HalfLife.
func (p *Provider) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	if err := sdk.ValidateRealm(q.Realm); err != nil {
		return nil, err
	}
	if err := validateScopes(q.Scopes); err != nil {
		return nil, err
	}
	switch q.Tier {
	case sdk.TierFull:
	case sdk.TierWorkingSet:
		if q.K <= 0 {
			return nil, p.errorf("working set k is %d, must be positive: %w", q.K, sdk.ErrInvalid)
		}
	default:
		return nil, p.errorf("unknown manifest tier %d: %w", q.Tier, sdk.ErrInvalid)
	}
	now := time.Now()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.ready(ctx); err != nil {
		return nil, err
	}
	var used, unused []sdk.ManifestRow
	if rm := p.realms[q.Realm]; rm != nil {
		for _, r := range rm.recs {
			if !r.Recallable(now) || (len(q.Scopes) > 0 && !slices.Contains(q.Scopes, r.Scope)) {
				continue
			}
			row := sdk.ManifestRow{ID: r.ID, Scope: r.Scope, Kind: r.Kind, Title: r.Title, Description: r.Description, UpdatedAt: r.UpdatedAt}
			if r.UseCount > 0 {
				row.Rank = usageRank(r, now)
				used = append(used, row)
			} else {
				unused = append(unused, row)
			}
		}
	}
	newest := func(a, b sdk.ManifestRow) int {
		return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), strings.Compare(a.ID, b.ID))
	}
	if q.Tier == sdk.TierFull {
		rows := append(used, unused...)
		slices.SortFunc(rows, newest)
		return rows, nil
	}
	k := min(q.K, maxWorkingSetK)
	slices.SortFunc(used, func(a, b sdk.ManifestRow) int { return cmp.Or(cmp.Compare(b.Rank, a.Rank), newest(a, b)) })
	slices.SortFunc(unused, newest)
	rows := append([]sdk.ManifestRow{}, used[:min(len(used), k)]...)
	return append(rows, unused[:min(len(unused), 2*k-len(rows))]...), nil
}

// usageRank is the decayed use count of r at now, taking its uses all at
// its last use: the key usage.Key would reach after UseCount uses at
// that instant.
func usageRank(r *sdk.Record, now time.Time) float64 {
	at := float64(r.LastUsedAt.UnixMilli()) / float64(usage.HalfLife.Milliseconds())
	return usage.Rank(at+math.Log2(float64(r.UseCount)), now)
}
