package journal

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/tokenize"
)

// Lexical weights per query term: a tag outweighs a title, which
// outweighs the body.
const (
	tagWeight   = 5
	titleWeight = 4
	bodyWeight  = 2
)

// Recall scores every recallable record of the asked scopes by the query
// terms it holds and answers the best, newest first among equals. It is a
// linear scan: fine for an example and a few thousand records.
func (p *Provider) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	// sdk.Serve has checked the realm, scopes and limit (0 arrives as
	// sdk.DefaultRecallLimit); a direct call in a test may still pass 0.
	limit := cmp.Or(q.Limit, sdk.DefaultRecallLimit)
	terms := tokenize.Terms(q.Query)
	now := time.Now()

	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.ready(); err != nil {
		return nil, err
	}
	rm := p.realms[q.Realm]
	if rm == nil || len(terms) == 0 {
		return []sdk.Hit{}, nil
	}
	var hits []sdk.Hit
	for _, d := range rm.docs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r := &d.rec
		if !r.Recallable(now) || !inScopes(r.Scope, q.Scopes) || slices.Contains(q.ExcludeIDs, r.ID) {
			continue
		}
		if slices.ContainsFunc(q.Tags, func(t string) bool { return !r.HasTag(t) }) || slices.ContainsFunc(q.ExcludeTags, r.HasTag) {
			continue
		}
		if !q.InWindow(r.When()) {
			continue
		}
		score := 0
		for _, t := range terms {
			if d.tags[t] {
				score += tagWeight
			}
			if d.title[t] {
				score += titleWeight
			}
			if d.body[t] {
				score += bodyWeight
			}
		}
		if score > 0 {
			hits = append(hits, sdk.Hit{Record: cloneRecord(*r), Score: float64(score)})
		}
	}
	slices.SortFunc(hits, func(a, b sdk.Hit) int {
		return cmp.Or(cmp.Compare(b.Score, a.Score), b.Record.UpdatedAt.Compare(a.Record.UpdatedAt), strings.Compare(a.Record.ID, b.Record.ID))
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits, nil
}

func inScopes(s sdk.Scope, scopes []sdk.Scope) bool {
	return len(scopes) == 0 || slices.Contains(scopes, s)
}

// Manifest lists metadata rows of recallable records, newest first. The
// journal keeps no usage, so nothing is ranked and working_set(k) is the
// 2k newest rows.
func (p *Provider) Manifest(_ context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	max := -1
	switch q.Tier {
	case sdk.TierFull:
	case sdk.TierWorkingSet:
		if q.K <= 0 {
			return nil, fmt.Errorf("journal: working set k must be positive, got %d: %w", q.K, sdk.ErrInvalid)
		}
		max = 2 * q.K
	default:
		return nil, fmt.Errorf("journal: unknown manifest tier %d: %w", q.Tier, sdk.ErrInvalid)
	}
	now := time.Now()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.ready(); err != nil {
		return nil, err
	}
	rows := []sdk.ManifestRow{}
	rm := p.realms[q.Realm]
	if rm == nil {
		return rows, nil
	}
	for _, d := range rm.docs {
		r := &d.rec
		if r.Recallable(now) && inScopes(r.Scope, q.Scopes) {
			rows = append(rows, sdk.ManifestRow{ID: r.ID, Scope: r.Scope, Kind: r.Kind, Title: r.Title, Description: r.Description, UpdatedAt: r.UpdatedAt})
		}
	}
	slices.SortFunc(rows, func(a, b sdk.ManifestRow) int {
		return cmp.Or(b.UpdatedAt.Compare(a.UpdatedAt), strings.Compare(a.ID, b.ID))
	})
	if max >= 0 && len(rows) > max {
		rows = rows[:max]
	}
	return rows, nil
}
