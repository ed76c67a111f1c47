package sqlite

import (
	"context"
	"fmt"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
)

// Recall ranks with sdk/index (memindex.go): BM25F over tags, title,
// description and body weighted 5, 4, 2 and 1, exactly as FTS5's
// bm25(5,4,2,1) ranked them when this provider used FTS5, with realm,
// scopes, expiry, excluded ids and tags checked inside the posting walk.
// Equal scores put the newer record (higher seq) first.

// maxRecallLimit caps a query's limit.
const maxRecallLimit = sdk.MaxBatch

func (d *database) recall(ctx context.Context, q sdk.RecallQuery, now time.Time) ([]sdk.Hit, error) {
	// The SDK's server validated the realm, scopes and limit; a direct
	// call may still leave the limit 0.
	limit := q.Limit
	switch {
	case limit <= 0:
		limit = sdk.DefaultRecallLimit
	case limit > maxRecallLimit:
		limit = maxRecallLimit
	}
	terms := index.QueryTerms(q.Query)
	if len(terms) == 0 && q.QueryVector == nil {
		return []sdk.Hit{}, nil
	}
	hits, err := d.recallFromIndex(ctx, q, terms, now.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: recall: %w", err)
	}
	return hits, nil
}
