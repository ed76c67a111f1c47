package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/sdk"
)

// Recall ranks with BM25 in one SQL statement over the provider's own
// inverted index, with FTS5's formula and the sqlite provider's field
// weights, so the two providers score alike. For a query's distinct terms
// t, a record d of the realm scores
//
//	score(d) = Σ_t idf(t) · tf(t,d)·(k1+1) / (tf(t,d) + k1·(1 − b + b·dl(d)/avgdl))
//	idf(t)   = max(ln((N − n(t) + 0.5) / (n(t) + 0.5)), 1e-6)
//
// with k1 = 1.2, b = 0.75; tf(t,d) is the field-weighted count of t in d
// (tags 5, title 4, description 2, body 1), dl(d) the record's term count,
// n(t) the active records of the realm holding t, N the realm's active
// records and avgdl their mean length. Statistics are per realm, so one
// realm's writes never move another's scores.
//
// Cost: one covering-index scan per query term (postings' primary key
// holds term, record, tf, length, scope and expiry), summed and sorted by
// PostgreSQL; the scope and expiry filters and excluded ids apply during
// the scan. Only the best `limit` records are joined to read their
// columns, unless a tag filter asks for more (tags live on records).

const maxRecallLimit = sdk.MaxBatch

// BM25 constants, as FTS5's bm25() uses them.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// recallSQL: $1 realm, $2 terms, $3 now (ms), $4 scopes (NULL: any), $5
// excluded ids, $6 scored window (NULL: all), $7 required tag keys
// (NULL: none), $8 excluded tag keys, $9 limit.
//
// Each term's idf and the length-normalisation constants are computed once
// per term (in q), so the per-posting work is a few float8 operations.
var recallSQL = fmt.Sprintf(`
WITH tot AS (
	SELECT sum(docs)::float8 AS n, coalesce(sum(tokens)::float8 / nullif(sum(docs), 0)::float8, 1::float8) AS avgdl
	FROM index_totals WHERE realm = $1
), q AS (
	SELECT t.term_id,
		greatest(ln((greatest(tot.n - t.df::float8, 0::float8) + 0.5::float8) / (t.df::float8 + 0.5::float8)), 1e-6::float8) AS idf,
		(%[2]g * (1 - %[3]g))::float8 AS c0,
		(%[2]g * %[3]g)::float8 / tot.avgdl AS c1
	FROM terms AS t CROSS JOIN tot
	WHERE t.realm = $1 AND t.term = ANY($2::text[]) AND t.df > 0
), ex AS (
	SELECT coalesce(array_agg(seq), '{}') AS seqs FROM records WHERE realm = $1 AND id = ANY($5::text[])
), scored AS (
	SELECT p.seq, sum(q.idf * p.tf::float8 * %[1]g::float8 / (p.tf::float8 + q.c0 + q.c1 * p.dl::float8)) AS score
	FROM q JOIN postings AS p ON p.term_id = q.term_id CROSS JOIN ex
	WHERE (p.expires_ms = 0 OR p.expires_ms > $3)
		AND ($4::text[] IS NULL OR p.scope = ANY($4::text[]))
		AND p.seq <> ALL (ex.seqs)
	GROUP BY p.seq
	ORDER BY score DESC, p.seq DESC
	LIMIT $6
)
SELECT %[4]s, s.score
FROM scored AS s JOIN records AS r ON r.seq = s.seq
WHERE ($7::text[] IS NULL OR r.tag_keys @> $7::text[])
	AND ($8::text[] IS NULL OR NOT (r.tag_keys && $8::text[]))
ORDER BY s.score DESC, s.seq DESC
LIMIT $9`, bm25K1+1, bm25K1, bm25B, recordColumns)

func recall(ctx context.Context, db *pgxpool.Pool, q sdk.RecallQuery, now time.Time) ([]sdk.Hit, error) {
	if err := sdk.ValidateRealm(q.Realm); err != nil {
		return nil, fmt.Errorf("postgres: recall: %w", err)
	}
	for i, s := range q.Scopes {
		if err := s.Validate(); err != nil {
			return nil, fmt.Errorf("postgres: recall: scopes[%d]: %w", i, err)
		}
	}
	limit := q.Limit
	switch {
	case limit < 0:
		return nil, fmt.Errorf("postgres: recall: limit %d is negative: %w", limit, sdk.ErrInvalid)
	case limit == 0:
		limit = sdk.DefaultRecallLimit
	case limit > maxRecallLimit:
		limit = maxRecallLimit
	}
	terms := queryTerms(q.Query)
	if len(terms) == 0 {
		return []sdk.Hit{}, nil
	}
	var window any = limit
	var tags, excludeTags []string
	if len(q.Tags) > 0 {
		tags, window = foldTags(q.Tags), nil
	}
	if len(q.ExcludeTags) > 0 {
		excludeTags, window = foldTags(q.ExcludeTags), nil
	}
	exclude := q.ExcludeIDs
	if exclude == nil {
		exclude = []string{}
	}
	rows, err := db.Query(ctx, recallSQL, q.Realm, terms, now.UnixMilli(), scopeList(q.Scopes),
		exclude, window, tags, excludeTags, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: recall: %w", classify(err))
	}
	defer rows.Close()
	hits := []sdk.Hit{}
	for rows.Next() {
		var h sdk.Hit
		if err := scanRecord(rows, &h.Record, &h.Score); err != nil {
			return nil, fmt.Errorf("postgres: recall: %w", classify(err))
		}
		hits = append(hits, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: recall: %w", classify(err))
	}
	return hits, nil
}
