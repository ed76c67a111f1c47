package postgres

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/sdk"
	sdkindex "github.com/memhost/memhost/sdk/index"
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
// n(t) the active records holding t, N the active records and avgdl their
// mean length. These statistics are taken over the query's realm alone by
// default, as the sqlite provider's engine takes them (so the two rank
// alike), or over every realm of the schema with statistics = "store".
//
// Plan. Scoring every record that holds any query term costs one
// covering-index scan per term (postings' primary key holds term, record,
// tf, length, scope and expiry), summed and sorted by PostgreSQL: cheap
// for rare terms, but a common term brings thousands of postings that
// rarely decide the top k. So recall prunes as MaxScore does, exactly:
//
//  1. A term can add at most ub(t) = idf(t)·(k1+1) to a score (tf/(tf+K)
//     stays below 1).
//  2. The rarest terms (summed postings within defaultSeed) give
//     candidates, each scored over every query term from its own postings
//     (one covering-index read per candidate); the
//     k-th best score θ is a lower bound of the true k-th best.
//  3. The terms of smallest ub whose ub sum stays below θ cannot lift a
//     record holding only them into the top k: candidates come from the
//     other terms' postings, scored over all terms by probes.
//
// The answer is the exact BM25 top k either way; when nothing can be
// pruned (few postings, fewer than k candidates, a tag filter, or θ too
// low) every posting is scored. All statements of one recall read one
// snapshot. Only the best `limit` records are joined to read their
// columns, unless a tag filter asks for more (tags live on records).

const maxRecallLimit = sdk.MaxBatch

// BM25 constants, as FTS5's bm25() uses them.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

const (
	// defaultPruneMin: a query whose terms hold fewer postings than this
	// is scored whole; planning would cost more than it saves.
	defaultPruneMin = 4000
	// defaultSeed bounds the postings of the rarest terms that seed the
	// threshold θ.
	defaultSeed = 400
	// defaultProbeCost is what scoring one candidate by probes costs, in postings
	// scanned: pruning pays only while candidates × probeCost stays under
	// the postings a whole scan reads.
	defaultProbeCost = 8
)

// realmStatsSQL answers the query terms present in the realm with their
// document frequencies, and the realm's totals on every row; storeStatsSQL
// takes the frequencies and totals over every realm (terms_by_term finds
// a term's rows in the other realms).
const (
	realmStatsSQL = `
SELECT t.term_id, t.df, tot.n, tot.toks
FROM terms AS t, (SELECT sum(docs)::float8 AS n, sum(tokens)::float8 AS toks FROM index_totals WHERE realm = $1) AS tot
WHERE t.realm = $1 AND t.term = ANY($2::text[]) AND t.df > 0`
	storeStatsSQL = `
SELECT t.term_id, (SELECT sum(o.df)::bigint FROM terms AS o WHERE o.term = t.term), tot.n, tot.toks
FROM terms AS t, (SELECT sum(docs)::float8 AS n, sum(tokens)::float8 AS toks FROM index_totals) AS tot
WHERE t.realm = $1 AND t.term = ANY($2::text[]) AND t.df > 0`
)

// The scoring statements share their parameters: $1 realm, $2 now (ms),
// $3 scopes (NULL: any), $4 excluded ids, $5 the query's term ids, $6
// their idfs, $7 and $8 the length constants c0 = k1·(1−b) and
// c1 = k1·b/avgdl, $9 the scored window (NULL: all), $10 required tag keys
// (NULL: none), $11 excluded tag keys, $12 the limit, $13 and $14 the time
// window's since and until in ms (NULL: open); the probe form adds $15,
// the term ids whose postings give candidates.
const (
	exSQL = `ex AS (
	SELECT coalesce(array_agg(seq), '{}') AS seqs FROM records WHERE realm = $1 AND id = ANY($4::text[])
)`
	postingFilter = `(p.expires_ms = 0 OR p.expires_ms > $2)
		AND ($3::text[] IS NULL OR p.scope = ANY($3::text[]))
		AND p.seq <> ALL (ex.seqs)`
	termScore = `q.idf * p.tf::float8 * %[1]g::float8 / (p.tf::float8 + $7::float8 + $8::float8 * p.dl::float8)`
	readBest  = `
SELECT %[2]s, s.score
FROM scored AS s JOIN records AS r ON r.seq = s.seq
WHERE ($10::text[] IS NULL OR r.tag_keys @> $10::text[])
	AND ($11::text[] IS NULL OR NOT (r.tag_keys && $11::text[]))
	AND ($13::bigint IS NULL OR coalesce(nullif(r.occurred_ms, 0), r.created_ms) >= $13::bigint)
	AND ($14::bigint IS NULL OR coalesce(nullif(r.occurred_ms, 0), r.created_ms) < $14::bigint)
ORDER BY s.score DESC, s.seq DESC
LIMIT $12`
)

// roundedScore is raw, a record's summed score, rounded to 12 significant
// digits. PostgreSQL sums a record's term scores in an order of its own, so
// two records that sdk/index (the sqlite provider, the replica) scores
// exactly alike can differ here in the last bit and order otherwise than
// there; rounded, they tie and fall to the same tie-break (the later
// record first), and the score moves by at most 5e-12 of itself, far
// inside the 1e-9 the providers' scores agree to.
const roundedScore = `CASE WHEN raw > 0 THEN round(raw * power(10::float8, 11 - floor(log(raw)))) / power(10::float8, 11 - floor(log(raw))) ELSE raw END`

// scanSQL scores every posting of the query's terms.
var scanSQL = fmt.Sprintf(`
WITH `+exSQL+`, scored AS (
	SELECT seq, `+roundedScore+` AS score FROM (
		SELECT p.seq, sum(`+termScore+`) AS raw
		FROM unnest($5::bigint[], $6::float8[]) AS q(term_id, idf)
		JOIN postings AS p ON p.term_id = q.term_id CROSS JOIN ex
		WHERE `+postingFilter+`
		GROUP BY p.seq
	) AS g
	ORDER BY score DESC, seq DESC
	LIMIT $9
)`+readBest, bm25K1+1, recordColumns)

// probeSQL takes candidates from the postings of the terms $15 and scores
// each over every query term with one primary-key probe per term (the
// correlated subquery reads each candidate's postings from postings_by_seq,
// which covers what scoring needs).
var probeSQL = fmt.Sprintf(`
WITH `+exSQL+`, cand AS (
	SELECT DISTINCT p.seq FROM postings AS p CROSS JOIN ex
	WHERE p.term_id = ANY($15::bigint[]) AND `+postingFilter+`
), scored AS (
	SELECT seq, `+roundedScore+` AS score FROM (
		SELECT c.seq, (
			SELECT sum(`+termScore+`)
			FROM unnest($5::bigint[], $6::float8[]) AS q(term_id, idf)
			JOIN postings AS p ON p.term_id = q.term_id AND p.seq = c.seq
		) AS raw
		FROM cand AS c
	) AS g
	ORDER BY score DESC, seq DESC
	LIMIT $9
)`+readBest, bm25K1+1, recordColumns)

// recallOptions are tunables tests adjust.
type recallOptions struct {
	realmStats bool // statistics = "realm" (set by Configure)
	noPrune    bool // score every posting (the reference for pruning tests)
	// pruneMin, seed and probeCost replace their defaults when set.
	pruneMin, seed, probeCost int64
	// plan, when set, hears how each recall was answered: "replica"
	// (replica.go), or in SQL "scan", "seeded" (the seed answer was final)
	// or "pruned".
	plan func(string)
}

func (o recallOptions) note(plan string) {
	if o.plan != nil {
		o.plan(plan)
	}
}

// recallArgs validates q and answers its limit (the default for 0, the
// most allowed past it) and its distinct terms.
func recallArgs(q sdk.RecallQuery) (int, []string, error) {
	if err := sdk.ValidateRealm(q.Realm); err != nil {
		return 0, nil, fmt.Errorf("postgres: recall: %w", err)
	}
	for i, s := range q.Scopes {
		if err := s.Validate(); err != nil {
			return 0, nil, fmt.Errorf("postgres: recall: scopes[%d]: %w", i, err)
		}
	}
	limit := q.Limit
	switch {
	case limit < 0:
		return 0, nil, fmt.Errorf("postgres: recall: limit %d is negative: %w", limit, sdk.ErrInvalid)
	case limit == 0:
		limit = sdk.DefaultRecallLimit
	case limit > maxRecallLimit:
		limit = maxRecallLimit
	}
	return limit, sdkindex.QueryTerms(q.Query), nil
}

// recall answers q from SQL.
func recall(ctx context.Context, db *pgdb, q sdk.RecallQuery, limit int, terms []string, now time.Time, opts recallOptions) ([]sdk.Hit, error) {
	var hits []sdk.Hit
	err := pgx.BeginTxFunc(ctx, db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) (err error) {
		hits, err = search(ctx, tx, q, terms, limit, now, opts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: recall: %w", classify(err))
	}
	return hits, nil
}

// queryTerm is one query term present in the realm.
type queryTerm struct {
	id       int64
	df       int64
	idf, ub  float64
	selected bool
}

func search(ctx context.Context, tx pgx.Tx, q sdk.RecallQuery, terms []string, limit int, now time.Time, opts recallOptions) ([]sdk.Hit, error) {
	statsSQL := storeStatsSQL
	if opts.realmStats {
		statsSQL = realmStatsSQL
	}
	rows, err := tx.Query(ctx, statsSQL, q.Realm, terms)
	if err != nil {
		return nil, err
	}
	var qts []queryTerm
	var n, toks float64
	var postings int64
	for rows.Next() {
		var t queryTerm
		if err := rows.Scan(&t.id, &t.df, &n, &toks); err != nil {
			rows.Close()
			return nil, err
		}
		postings += t.df
		qts = append(qts, t)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(qts) == 0 || n <= 0 {
		return []sdk.Hit{}, nil
	}
	avgdl := toks / n
	if avgdl <= 0 {
		avgdl = 1
	}
	ids, idfs := make([]int64, len(qts)), make([]float64, len(qts))
	for i := range qts {
		t := &qts[i]
		t.idf = max(math.Log((max(n-float64(t.df), 0)+0.5)/(float64(t.df)+0.5)), 1e-6)
		t.ub = t.idf * (bm25K1 + 1)
		ids[i], idfs[i] = t.id, t.idf
	}
	var window any = limit
	var tags, excludeTags []string
	if len(q.Tags) > 0 {
		tags, window = foldTags(q.Tags), nil
	}
	if len(q.ExcludeTags) > 0 {
		excludeTags, window = foldTags(q.ExcludeTags), nil
	}
	// The time window, like tags, lives on records: every posting is
	// scored and the filter applied before the limit.
	var since, until any
	if s, u := q.WindowMillis(); s != 0 || u != 0 {
		window = nil
		if s != 0 {
			since = s
		}
		if u != 0 {
			until = u
		}
	}
	exclude := q.ExcludeIDs
	if exclude == nil {
		exclude = []string{}
	}
	args := []any{q.Realm, now.UnixMilli(), scopeList(q.Scopes), exclude, ids, idfs,
		bm25K1 * (1 - bm25B), bm25K1 * bm25B / avgdl, window, tags, excludeTags, limit, since, until}
	score := func(sel []int64) ([]sdk.Hit, error) {
		if sel == nil {
			opts.note("scan")
			return readHits(ctx, tx, scanSQL, args...)
		}
		return readHits(ctx, tx, probeSQL, append(args, sel)...)
	}
	pruneMin, seedMax := cmp.Or(opts.pruneMin, defaultPruneMin), cmp.Or(opts.seed, defaultSeed)
	probeCost := cmp.Or(opts.probeCost, defaultProbeCost)
	if opts.noPrune || window == nil || postings < pruneMin {
		return score(nil)
	}
	// Seed θ with the rarest terms.
	slices.SortFunc(qts, func(a, b queryTerm) int { return cmp.Compare(a.df, b.df) })
	var seed []int64
	var seedDF int64
	seedMax = min(seedMax, postings/probeCost/2)
	for i := range qts {
		if seedDF+qts[i].df > seedMax {
			break
		}
		seedDF += qts[i].df
		qts[i].selected = true
		seed = append(seed, qts[i].id)
	}
	if len(seed) == 0 || len(seed) == len(qts) {
		return score(nil)
	}
	first, err := score(seed)
	if err != nil || len(first) < limit {
		if err != nil {
			return nil, err
		}
		return score(nil)
	}
	// The terms of least ub whose ub sum stays below θ (with a margin for
	// rounding) cannot place a record holding only them.
	theta := first[limit-1].Score * (1 - 1e-9)
	slices.SortFunc(qts, func(a, b queryTerm) int { return cmp.Compare(a.ub, b.ub) })
	var sum float64
	k := 0
	for k < len(qts) && sum+qts[k].ub < theta {
		sum += qts[k].ub
		k++
	}
	if k == 0 {
		return score(nil)
	}
	var essential []int64
	var essentialDF int64
	covered := true // every essential term seeded: the first answer is final
	for _, t := range qts[k:] {
		essential = append(essential, t.id)
		essentialDF += t.df
		covered = covered && t.selected
	}
	if !covered && essentialDF*probeCost > postings {
		return score(nil)
	}
	if covered {
		opts.note("seeded")
		return first, nil
	}
	opts.note("pruned")
	return score(essential)
}

func readHits(ctx context.Context, tx pgx.Tx, sql string, args ...any) ([]sdk.Hit, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	hits := []sdk.Hit{}
	for rows.Next() {
		var h sdk.Hit
		if err := scanRecord(rows, &h.Record, &h.Score); err != nil {
			return nil, err
		}
		hits = append(hits, h)
	}
	return hits, rows.Err()
}
