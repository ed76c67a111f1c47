package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
)

// Recall scores records with FTS5's bm25 over every query term, with the
// field weights of fieldWeights, and answers Score = -bm25 (higher is
// better). That is exact, and it costs FTS5 about a microsecond for every
// record holding any query term (it reads each one's length row by row): a
// query whose terms are in 8% of 100k records takes about 8 ms.
//
// A posting budget (Config.PostingBudget > 0) bounds that cost, planning
// each query from its terms' document frequencies like a "common terms"
// query:
//
//   - Terms are taken rarest first into the FTS5 MATCH while their summed
//     document frequencies stay within the budget (the rarest term always
//     goes in). FTS5 ranks the records matching those terms.
//   - The remaining, common terms do not select records; their BM25 share is
//     added in Go to the best few times the limit of those candidates, with
//     FTS5's formula, inputs and totals, so a candidate's score is still
//     exactly its bm25 over all the terms.
//   - If fewer hits than the limit come back, the budget grows to take the
//     next terms in, until every term selects: a short answer is complete.
//
// The cost is then bounded by the budget, not by the corpus. What it gives
// up: a record holding only common terms is found only when the rare terms
// find too few records, and one ranked below the candidate window by its
// rare terms cannot climb into the answer on common ones; on the benchmark
// corpus about half of the exact top 10 changes at 100k records.
//
// Filters (realm, scopes, status, expiry, excluded ids and tags) are applied
// one of two ways. When the query's scopes hold most of the index, FTS5
// ranks first and the best rows are read and filtered in Go, reading a few
// more rows than needed; when they hold little of it, or a tag is required,
// SQL filters every matching row before FTS5 ranks it. The first falls back
// to the second when it comes up short. Both answer the same hits.

const (
	// candidateFactor sets the candidate window when common terms are
	// scored in Go: that many times the limit.
	candidateFactor = 3
	// minRankFirstShare is the least share of the index the query's scopes
	// must hold for ranking before filtering.
	minRankFirstShare = 0.2
	// maxRecallLimit caps a query's limit.
	maxRecallLimit = sdk.MaxBatch
)

// BM25 constants, as FTS5's bm25() uses them.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// filterThenRankSQL ranks the records matching ?1 that pass the filters,
// best first, and reads the best ?8 of them. FTS5 drives the join (CROSS
// JOIN fixes the order) and bm25 runs only on rows that pass the filters;
// the record columns are read only for the rows answered.
const filterThenRankSQL = `
SELECT ` + recordColumns + `, r.ntok, r.tag_keys, c.score
FROM (
	SELECT records_fts.rowid AS seq, ` + bm25Call + ` AS score
	FROM records_fts CROSS JOIN records AS r ON r.seq = records_fts.rowid
	WHERE records_fts MATCH ?1
		AND r.realm = ?2 AND r.status = 'active' AND (r.expires_ms = 0 OR r.expires_ms > ?3)
		AND (?4 IS NULL OR r.scope IN (SELECT value FROM json_each(?4)))
		AND (?5 IS NULL OR r.id NOT IN (SELECT value FROM json_each(?5)))
		AND (?6 IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(?6) AS t WHERE instr(r.tag_keys, t.value) = 0))
		AND (?7 IS NULL OR NOT EXISTS (SELECT 1 FROM json_each(?7) AS t WHERE instr(r.tag_keys, t.value) > 0))
	ORDER BY score, records_fts.rowid DESC
	LIMIT ?8
) AS c CROSS JOIN records AS r ON r.seq = c.seq
ORDER BY c.score, c.seq DESC`

// rankThenFilterSQL reads the best ?2 records matching ?1, unfiltered.
const rankThenFilterSQL = `
SELECT ` + recordColumns + `, r.ntok, r.tag_keys, c.score
FROM (
	SELECT rowid AS seq, ` + bm25Call + ` AS score
	FROM records_fts WHERE records_fts MATCH ?1
	ORDER BY score, rowid DESC
	LIMIT ?2
) AS c CROSS JOIN records AS r ON r.seq = c.seq
ORDER BY c.score, c.seq DESC`

// recallFilter is a query's filters, as Go values and as the JSON
// parameters of filterThenRankSQL (nil when absent).
type recallFilter struct {
	realm                     string
	nowMs                     int64
	scopes                    []sdk.Scope
	exclude                   []string
	tags, excludeTags         []string // tagNeedles
	share                     float64  // of the index in the scopes
	jsonScopes, jsonExclude   any
	jsonTags, jsonExcludeTags any
}

func newRecallFilter(q sdk.RecallQuery, now time.Time, share float64) recallFilter {
	f := recallFilter{
		realm: q.Realm, nowMs: now.UnixMilli(), scopes: q.Scopes, exclude: q.ExcludeIDs,
		tags: tagNeedles(q.Tags), excludeTags: tagNeedles(q.ExcludeTags), share: share,
	}
	f.jsonScopes, f.jsonExclude = jsonScopes(q.Scopes), jsonList(f.exclude)
	f.jsonTags, f.jsonExcludeTags = jsonList(f.tags), jsonList(f.excludeTags)
	return f
}

func jsonScopes(scopes []sdk.Scope) any {
	list := make([]string, len(scopes))
	for i, s := range scopes {
		list[i] = string(s)
	}
	return jsonList(list)
}

func jsonList(list []string) any {
	if len(list) == 0 {
		return nil
	}
	b, _ := json.Marshal(list) // []string always marshals
	return string(b)
}

// pass reports whether a record read unfiltered passes the filters.
func (f *recallFilter) pass(r *sdk.Record, tagKeys string) bool {
	switch {
	case r.Realm != f.realm, r.Status != sdk.StatusActive:
		return false
	case !r.ExpiresAt.IsZero() && r.ExpiresAt.UnixMilli() <= f.nowMs:
		return false
	case len(f.scopes) > 0 && !slices.Contains(f.scopes, r.Scope):
		return false
	case slices.Contains(f.exclude, r.ID):
		return false
	}
	for _, t := range f.tags {
		if !strings.Contains(tagKeys, t) {
			return false
		}
	}
	for _, t := range f.excludeTags {
		if strings.Contains(tagKeys, t) {
			return false
		}
	}
	return true
}

// candidate is one scored record, with its length for rescoring.
type candidate struct {
	hit  sdk.Hit
	ntok int64
}

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
	terms := queryTerms(q.Query)
	if len(terms) == 0 {
		return []sdk.Hit{}, nil
	}
	hits, err := d.recallFromIndex(ctx, q, terms, now.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: recall: %w", err)
	}
	return hits, nil
}

// search answers the best hits: exact, or by the query plan described at
// the top of this file when a posting budget is set.
func (d *database) search(ctx context.Context, terms []string, f *recallFilter, limit int) ([]sdk.Hit, error) {
	budget := int64(d.opts.postingBudget)
	var dfs []int64
	var cached []bool
	var gen uint64
	if budget > 0 {
		dfs, cached = make([]int64, len(terms)), make([]bool, len(terms))
		// The generation is read before the snapshot starts (see dfCache).
		gen = d.df.lookup(terms, dfs, cached)
	}
	release, err := d.acquireRead(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	tx, err := d.r.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	if budget <= 0 {
		cands, err := candidates(ctx, tx, matchExpr(terms), f, limit)
		return hitsOf(cands, limit), err
	}
	var totalDocs, totalTokens int64
	if err := tx.QueryRowContext(ctx, "SELECT docs, tokens FROM fts_totals").Scan(&totalDocs, &totalTokens); err != nil {
		return nil, err
	}
	if totalDocs <= 0 {
		return []sdk.Hit{}, nil
	}
	if err := d.fillDocFreqs(ctx, tx, gen, terms, dfs, cached); err != nil {
		return nil, err
	}
	// Rarest first; ties keep query order.
	order := make([]int, len(terms))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(dfs[a], dfs[b]) })
	for {
		nsel, postings := 1, dfs[order[0]]
		for nsel < len(order) && postings+dfs[order[nsel]] <= budget {
			postings += dfs[order[nsel]]
			nsel++
		}
		selected := make([]string, nsel)
		for i, j := range order[:nsel] {
			selected[i] = terms[j]
		}
		common := order[nsel:]
		window := limit
		if len(common) > 0 {
			window = min(limit*candidateFactor, maxRecallLimit)
		}
		cands, err := candidates(ctx, tx, matchExpr(selected), f, window)
		if err != nil {
			return nil, err
		}
		if len(common) == 0 {
			return hitsOf(cands, limit), nil
		}
		commonTerms := make([]string, len(common))
		commonDFs := make([]int64, len(common))
		for i, j := range common {
			commonTerms[i], commonDFs[i] = terms[j], dfs[j]
		}
		addCommonScores(cands, commonTerms, commonDFs, totalDocs, totalTokens)
		if len(cands) >= limit {
			return hitsOf(cands, limit), nil
		}
		// Too few: widen to take at least the next term in.
		budget = max(budget*8, postings+dfs[common[0]])
	}
}

func hitsOf(cands []candidate, limit int) []sdk.Hit {
	hits := make([]sdk.Hit, min(len(cands), limit))
	for i := range hits {
		hits[i] = cands[i].hit
	}
	return hits
}

// fillDocFreqs reads the document frequencies the cache lacks, in the
// transaction's snapshot, and offers them to the cache.
func (d *database) fillDocFreqs(ctx context.Context, tx *sql.Tx, gen uint64, terms []string, dfs []int64, cached []bool) error {
	var missTerms []string
	var missDFs []int64
	for i, t := range terms {
		if cached[i] {
			continue
		}
		err := tx.QueryRowContext(ctx, "SELECT doc FROM records_vocab WHERE term = ?", t).Scan(&dfs[i])
		if errors.Is(err, sql.ErrNoRows) {
			dfs[i], err = 0, nil
		}
		if err != nil {
			return fmt.Errorf("read document frequency: %w", err)
		}
		missTerms = append(missTerms, t)
		missDFs = append(missDFs, dfs[i])
	}
	if len(missTerms) > 0 {
		d.df.fill(gen, missTerms, missDFs)
	}
	return nil
}

// candidates answers the best window records matching match that pass the
// filters, best first.
func candidates(ctx context.Context, tx *sql.Tx, match string, f *recallFilter, window int) ([]candidate, error) {
	if len(f.tags) == 0 && f.share >= minRankFirstShare {
		// Read enough rows that, at the scopes' share of the index (and
		// some slack), window of them pass the filters.
		read := min(int(float64(window+len(f.exclude))/f.share*1.25)+8, 4*maxRecallLimit)
		cands, complete, err := rankThenFilter(ctx, tx, match, f, read)
		if err != nil {
			return nil, err
		}
		if complete || len(cands) >= window {
			return cands[:min(len(cands), window)], nil
		}
	}
	return filterThenRank(ctx, tx, match, f, window)
}

// rankThenFilter reads the best read records matching match and keeps
// those passing the filters; complete reports that no match was left out.
func rankThenFilter(ctx context.Context, tx *sql.Tx, match string, f *recallFilter, read int) (cands []candidate, complete bool, err error) {
	rows, err := tx.QueryContext(ctx, rankThenFilterSQL, match, read)
	if err != nil {
		return nil, false, err
	}
	cands, n, err := scanCandidates(rows, f)
	return cands, n < read, err
}

// filterThenRank ranks only the matching records that pass the filters.
func filterThenRank(ctx context.Context, tx *sql.Tx, match string, f *recallFilter, window int) ([]candidate, error) {
	rows, err := tx.QueryContext(ctx, filterThenRankSQL, match, f.realm, f.nowMs,
		f.jsonScopes, f.jsonExclude, f.jsonTags, f.jsonExcludeTags, window)
	if err != nil {
		return nil, err
	}
	cands, _, err := scanCandidates(rows, nil)
	return cands, err
}

// scanCandidates reads candidates, keeping those that pass f (all of them
// when f is nil), and counts the rows read.
func scanCandidates(rows *sql.Rows, f *recallFilter) ([]candidate, int, error) {
	defer rows.Close()
	var out []candidate
	n := 0
	for rows.Next() {
		n++
		var c candidate
		var tagKeys string
		var bm25 float64
		if err := scanRecord(rows, &c.hit.Record, &c.ntok, &tagKeys, &bm25); err != nil {
			return nil, 0, err
		}
		if f != nil && !f.pass(&c.hit.Record, tagKeys) {
			continue
		}
		c.hit.Score = -bm25
		out = append(out, c)
	}
	return out, n, rows.Err()
}

// addCommonScores adds to each candidate the BM25 share of the common
// terms, computed as FTS5's bm25() computes it, and re-sorts best first.
func addCommonScores(cands []candidate, terms []string, dfs []int64, totalDocs, totalTokens int64) {
	idf := make([]float64, len(terms))
	for i, n := range dfs {
		idf[i] = bm25IDF(totalDocs, n)
	}
	avgdl := float64(totalTokens) / float64(totalDocs)
	freq := make([]float64, len(terms))
	for k := range cands {
		c := &cands[k]
		clear(freq)
		r := &c.hit.Record
		for col, text := range [4]string{strings.Join(r.Tags, " "), r.Title, r.Description, r.Body} {
			countTerms(text, terms, fieldWeights[col], freq)
		}
		for i := range terms {
			c.hit.Score += bm25Share(idf[i], freq[i], float64(c.ntok), avgdl)
		}
	}
	// Stable: equal scores keep FTS5's order (newest first).
	slices.SortStableFunc(cands, func(a, b candidate) int { return cmp.Compare(b.hit.Score, a.hit.Score) })
}

// countTerms adds weight to freq[i] for each occurrence of terms[i] among
// the terms of text. Every term of a text is a substring of its lower-case
// form, so a text holding none of them as substrings is not tokenized:
// most candidates hold few of the common terms.
func countTerms(text string, terms []string, weight float64, freq []float64) {
	lower := strings.ToLower(text)
	if !slices.ContainsFunc(terms, func(t string) bool { return strings.Contains(lower, t) }) {
		return
	}
	for _, tok := range tokenTerms(nil, text) {
		if i := slices.Index(terms, tok); i >= 0 {
			freq[i] += weight
		}
	}
}

// bm25IDF is FTS5's inverse document frequency: never below 1e-6.
func bm25IDF(docs, hits int64) float64 {
	idf := math.Log((float64(docs-hits) + 0.5) / (float64(hits) + 0.5))
	if idf <= 0 {
		idf = 1e-6
	}
	return idf
}

// bm25Share is one term's part of FTS5's bm25 for a record of length
// dl holding the term with weighted frequency freq.
func bm25Share(idf, freq, dl, avgdl float64) float64 {
	return idf * (freq * (bm25K1 + 1)) / (freq + bm25K1*(1-bm25B+bm25B*dl/avgdl))
}
