package bleve

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	blevesearch "github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/tokenize"
)

// maxQueryTerms bounds the distinct terms a recall searches for, so a
// pasted novel costs a bounded disjunction; the first terms are kept.
const maxQueryTerms = 128

// maxRecallLimit caps Limit; larger values are clamped.
const maxRecallLimit = sdk.MaxBatch

// Recall ranks the realm's recallable records against the query with BM25
// over the tag, title, description and body terms (boosted 4, 3, 2, 1).
// The query is built term by term from sdk/tokenize output, never parsed,
// so no query text can inject syntax. A query without terms recalls
// nothing.
func (p *Provider) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	done, err := p.begin(q.Realm)
	if err != nil {
		return nil, err
	}
	defer done()
	limit := recallLimit(q.Limit)
	now := time.Now()
	var filters []query.Query
	if len(q.Scopes) > 0 {
		inScope := make([]query.Query, len(q.Scopes))
		for i, s := range q.Scopes {
			inScope[i] = termQuery(fieldScope, string(s))
		}
		filters = append(filters, query.NewDisjunctionQuery(inScope))
	}
	terms := tokenize.Terms(q.Query)
	if len(terms) == 0 {
		return nil, nil
	}
	ri, err := p.realm(q.Realm, false)
	if err != nil || ri == nil {
		return nil, err
	}
	if len(terms) > maxQueryTerms {
		terms = terms[:maxQueryTerms]
	}
	text := make([]query.Query, 0, len(terms)*len(textFields))
	for _, t := range terms {
		for _, f := range textFields {
			tq := query.NewTermQuery(t)
			tq.SetField(f.name)
			tq.SetBoost(f.boost)
			text = append(text, tq)
		}
	}
	for _, tag := range q.Tags {
		filters = append(filters, termQuery(fieldTag, foldTag(tag)))
	}
	// Only active records carry text, so the text selects by status too.
	// Filters and exclusions select without scoring; only the text scores.
	bq := query.NewBooleanQuery(nil, nil, nil)
	bq.Must = query.NewDisjunctionQuery(text)
	if len(filters) > 0 {
		bq.AddFilter(query.NewConjunctionQuery(filters))
	}
	if ri.cat.mayHoldExpiring() {
		bq.AddMustNot(expiredAt(now))
	}
	if len(q.ExcludeIDs) > 0 {
		bq.AddMustNot(query.NewDocIDQuery(q.ExcludeIDs))
	}
	for _, tag := range q.ExcludeTags {
		bq.AddMustNot(termQuery(fieldTag, foldTag(tag)))
	}
	req := blevesearch.NewSearchRequestOptions(bq, limit, 0, false)
	req.Fields = []string{fieldRecord}
	res, err := ri.run(ctx, "recall", req)
	if err != nil {
		return nil, err
	}
	hits := make([]sdk.Hit, 0, len(res.Hits))
	for _, h := range res.Hits {
		r, err := storedRecord(h)
		if err != nil {
			return nil, err
		}
		// The index filters expiry to the millisecond; this settles the
		// last one exactly, and guards isolation once more.
		if r.Realm != q.Realm || !r.Recallable(now) {
			continue
		}
		hits = append(hits, sdk.Hit{Record: r, Score: h.Score})
	}
	return hits, nil
}

// recallLimit defaults and caps a limit the SDK's server has already
// checked (a direct call may still pass 0).
func recallLimit(limit int) int {
	switch {
	case limit <= 0:
		return sdk.DefaultRecallLimit
	case limit > maxRecallLimit:
		return maxRecallLimit
	}
	return limit
}

// expiredAt matches the records whose expiry is at or before now.
func expiredAt(now time.Time) query.Query {
	nowMS := float64(now.UnixMilli())
	inclusive := true
	q := query.NewNumericRangeInclusiveQuery(nil, &nowMS, nil, &inclusive)
	q.SetField(fieldExpires)
	return q
}

func termQuery(field, term string) *query.TermQuery {
	q := query.NewTermQuery(term)
	q.SetField(field)
	return q
}

func storedRecord(h *search.DocumentMatch) (sdk.Record, error) {
	var r sdk.Record
	raw, ok := h.Fields[fieldRecord].(string)
	if !ok {
		return r, fmt.Errorf("bleve: document %s has no stored record", h.ID)
	}
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return r, fmt.Errorf("bleve: document %s: stored record: %w", h.ID, err)
	}
	return r, nil
}

// run executes a search. A failure keeps a caller's deadline or
// cancellation recognisable, and a panic (a segment corrupted after it was
// opened) becomes an error instead of killing the plugin.
func (ri *realmIndex) run(ctx context.Context, op string, req *blevesearch.SearchRequest) (res *blevesearch.SearchResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("bleve: %s in realm %s: search panicked, the index %s may be corrupt: %v", op, ri.realm, ri.path, r)
		}
	}()
	res, err = ri.idx.SearchInContext(ctx, req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		return nil, fmt.Errorf("bleve: %s in realm %s: %w", op, ri.realm, err)
	}
	return res, nil
}
