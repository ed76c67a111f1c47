package bleve

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	blevesearch "github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/memhost/memhost/sdk"
)

// maxWorkingSetK caps k so 2k stays a sane row count (as sqlite does).
const maxWorkingSetK = 50_000

// Manifest lists metadata rows (no bodies) of the recallable records of
// the query's scopes (every scope when none are given).
//
// TierWorkingSet(k) lists the top k ranked rows, highest rank first, then
// fills with the newest unranked rows until there are 2k rows. A row is
// ranked once its record was used (MarkUsed); its rank is the use count
// with each use decayed by its age, halving every 30 days (see usage.Key),
// so both how often and how lately count. Unranked rows (never used) come
// newest first by update time. Used records below the top k are left out:
// they had their chance, while unranked ones are new and have not.
//
// TierFull lists every such row, newest first, each with its rank.
//
// Both rules are the sqlite provider's, so a deployment can move a realm
// between the two without its manifests changing meaning.
func (p *Provider) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	done, err := p.begin(q.Realm)
	if err != nil {
		return nil, err
	}
	defer done()
	k := q.K
	switch q.Tier {
	case sdk.TierFull:
	case sdk.TierWorkingSet:
		if k <= 0 {
			return nil, &sdk.FieldError{Field: "k", Problem: fmt.Sprintf("working set k is %d, must be positive", k), Err: sdk.ErrInvalid}
		}
		k = min(k, maxWorkingSetK)
	default:
		return nil, &sdk.FieldError{Field: "tier", Problem: fmt.Sprintf("unknown tier %d (want working_set or full)", q.Tier), Err: sdk.ErrInvalid}
	}
	ri, err := p.realm(q.Realm, false)
	if err != nil || ri == nil {
		return []sdk.ManifestRow{}, err
	}
	if err := ri.waitCatalog(ctx, "manifest"); err != nil {
		return nil, err
	}
	now := time.Now()
	var picks []pick
	if q.Tier == sdk.TierFull {
		picks = ri.cat.full(q.Scopes, now)
	} else {
		picks = ri.cat.workingSet(q.Scopes, k, now)
	}
	return ri.rows(ctx, picks, now)
}

// manifestView is the part of a stored record a manifest row needs;
// decoding into it skips allocating the body.
type manifestView struct {
	ID          string         `json:"id"`
	Scope       sdk.Scope      `json:"scope"`
	Kind        sdk.RecordKind `json:"kind"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Status      sdk.Status     `json:"status"`
	UpdatedAt   time.Time      `json:"updated_at"`
	ExpiresAt   time.Time      `json:"expires_at"`
}

// rowsPerFetch bounds the ids of one fetch of manifest rows.
const rowsPerFetch = 1000

// rows fetches the rows of picks from the index, in order. A record
// forgotten or retired since the catalog was read is left out.
func (ri *realmIndex) rows(ctx context.Context, picks []pick, now time.Time) ([]sdk.ManifestRow, error) {
	out := make([]sdk.ManifestRow, 0, len(picks))
	for start := 0; start < len(picks); start += rowsPerFetch {
		chunk := picks[start:min(start+rowsPerFetch, len(picks))]
		ids := make([]string, len(chunk))
		for i, p := range chunk {
			ids[i] = p.id
		}
		req := blevesearch.NewSearchRequestOptions(query.NewDocIDQuery(ids), len(ids), 0, false)
		req.Fields = []string{fieldRecord}
		req.Score = "none"
		res, err := ri.run(ctx, "manifest", req)
		if err != nil {
			return nil, err
		}
		views := make(map[string]manifestView, len(res.Hits))
		for _, h := range res.Hits {
			raw, ok := h.Fields[fieldRecord].(string)
			if !ok {
				return nil, fmt.Errorf("bleve: document %s has no stored record", h.ID)
			}
			var v manifestView
			if err := json.Unmarshal([]byte(raw), &v); err != nil {
				return nil, fmt.Errorf("bleve: document %s: stored record: %w", h.ID, err)
			}
			views[v.ID] = v
		}
		for _, p := range chunk {
			v, ok := views[p.id]
			if !ok || v.Status != sdk.StatusActive || (!v.ExpiresAt.IsZero() && !now.Before(v.ExpiresAt)) {
				continue
			}
			out = append(out, sdk.ManifestRow{
				ID: v.ID, Scope: v.Scope, Kind: v.Kind, Title: v.Title, Description: v.Description,
				UpdatedAt: v.UpdatedAt, Rank: p.rank,
			})
		}
	}
	return out, nil
}
