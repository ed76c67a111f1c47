package bleve

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	blevesearch "github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	segment "github.com/blevesearch/scorch_segment_api/v2"
	"github.com/memhost/memhost/sdk"
	memindex "github.com/memhost/memhost/sdk/index"
)

// maxRecallLimit caps Limit; larger values are clamped.
const maxRecallLimit = sdk.MaxBatch

// BM25 constants, FTS5's and sdk/index's.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Recall ranks the realm's recallable records against the query with
// BM25F over the weighted terms field (see doc.go): score is sdk/index's
// (FTS5's bm25() negated, higher is better), computed by walking each
// query term's posting list segment by segment, once. Scope, tag and id
// filters become each segment's exclusion bitmap, so a posting outside
// them is never decoded; only the top hits' stored records are read. The
// query is cut by sdk/index.QueryTerms, never parsed, so no query text can
// inject syntax. A query without terms recalls nothing.
func (p *Provider) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	done, err := p.begin(q.Realm)
	if err != nil {
		return nil, err
	}
	defer done()
	terms := memindex.QueryTerms(q.Query)
	if len(terms) == 0 {
		return nil, nil
	}
	ri, err := p.realm(q.Realm, false)
	if err != nil || ri == nil {
		return nil, err
	}
	return ri.recall(ctx, q, terms, recallLimit(q.Limit), time.Now())
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

// ErrRebuilding marks a call refused because the realm's index is being
// rebuilt (see Provider.Reindex); it wraps sdk.ErrUnavailable.
var ErrRebuilding = fmt.Errorf("index rebuild in progress: %w", sdk.ErrUnavailable)

// segScratch is one segment's accumulators during a recall.
type segScratch struct {
	acc     []float64 // by doc number; 0 untouched
	touched []uint32
}

var scratchPool = sync.Pool{New: func() any { return new(segScratch) }}

func getScratch(n int) *segScratch {
	s := scratchPool.Get().(*segScratch)
	if cap(s.acc) < n {
		s.acc = make([]float64, n)
	}
	s.acc = s.acc[:n]
	return s
}

func putScratch(s *segScratch) {
	for _, d := range s.touched {
		s.acc[d] = 0
	}
	s.touched = s.touched[:0]
	scratchPool.Put(s)
}

// candidate is a scored document of one segment; id is read only when
// a tie needs it.
type candidate struct {
	score float64
	seg   int
	doc   uint32
	id    string
}

// ranking orders candidates best first: higher score, then the greater
// record id (ids grow with time, so the newer record), as sdk/index
// orders ties newest first; the id makes the order survive a rebuild,
// which renumbers documents.
type ranking struct {
	segs []*scorch.SegmentSnapshot
	err  error
}

func (rk *ranking) idOf(c *candidate) string {
	if c.id == "" {
		id, err := rk.segs[c.seg].DocID(uint64(c.doc))
		if err != nil && rk.err == nil {
			rk.err = err
		}
		c.id = string(id)
	}
	return c.id
}

func (rk *ranking) better(a, b *candidate) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return rk.idOf(a) > rk.idOf(b)
}

func (ri *realmIndex) recall(ctx context.Context, q sdk.RecallQuery, terms []string, limit int, now time.Time) (hits []sdk.Hit, err error) {
	ri.idxMu.RLock()
	defer ri.idxMu.RUnlock()
	if ri.stale {
		return nil, fmt.Errorf("bleve: recall in realm %s: the index %s was written with another layout and is being rebuilt from its records (%s): %w", ri.realm, ri.path, ri.progress(), ErrRebuilding)
	}
	defer func() {
		if r := recover(); r != nil {
			hits, err = nil, fmt.Errorf("bleve: recall in realm %s: search panicked, the index %s may be corrupt: %v", ri.realm, ri.path, r)
		}
	}()
	st, err := ri.bm25(ctx)
	if err != nil {
		return nil, err
	}
	if st.docs == 0 {
		return nil, nil
	}
	reader, err := ri.reader()
	if err != nil {
		return nil, fmt.Errorf("bleve: recall in realm %s: %w", ri.realm, err)
	}
	defer reader.Close()
	snap, ok := reader.(*scorch.IndexSnapshot)
	if !ok {
		return nil, fmt.Errorf("bleve: recall in realm %s: the index %s is not a scorch index", ri.realm, ri.path)
	}
	segs := snap.Segments()
	per, df, err := termLists(segs, terms)
	if err != nil {
		return nil, fmt.Errorf("bleve: recall in realm %s: %w", ri.realm, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lists, err := ri.filteredLists(segs, per, df, terms, &q)
	if err != nil {
		return nil, fmt.Errorf("bleve: recall in realm %s: %w", ri.realm, err)
	}
	s := scorer{avgdl: float64(st.tokens) / float64(st.docs)}
	if s.avgdl <= 0 {
		s.avgdl = 1
	}
	idfs := make([]float64, len(terms))
	for t := range terms {
		idfs[t] = idf(st.docs, int64(df[t]))
	}
	w := &walker{s: s, idfs: idfs, df: df, lists: lists, segs: segs}
	defer w.release()
	if hits, err = ri.topHits(ctx, w, &q, limit, now); err != nil {
		return nil, fmt.Errorf("bleve: recall in realm %s: %w", ri.realm, err)
	}
	return hits, nil
}

// segLists are one segment's term dictionary and the query terms'
// posting lists in it, deleted documents left out.
type segLists struct {
	dict  segment.TermDictionary
	lists []segment.PostingsList
}

// termLists opens the terms' posting lists in every segment and answers
// them with each term's document frequency over the live documents.
func termLists(segs []*scorch.SegmentSnapshot, terms []string) ([]segLists, []uint64, error) {
	per := make([]segLists, len(segs))
	df := make([]uint64, len(terms))
	for i, ss := range segs {
		dict, err := ss.Segment().Dictionary(fieldTerms)
		if err != nil {
			return nil, nil, err
		}
		per[i].dict = dict
		per[i].lists = make([]segment.PostingsList, len(terms))
		for t, term := range terms {
			pl, err := dict.PostingsList([]byte(term), ss.Deleted(), nil)
			if err != nil {
				return nil, nil, err
			}
			per[i].lists[t] = pl
			df[t] += pl.Count()
		}
	}
	return per, df, nil
}

// filteredLists answers each segment's lists with the query's filters
// applied; nil where no document of the segment passes.
func (ri *realmIndex) filteredLists(segs []*scorch.SegmentSnapshot, per []segLists, df []uint64, terms []string, q *sdk.RecallQuery) ([][]segment.PostingsList, error) {
	lists := make([][]segment.PostingsList, len(segs))
	for i, ss := range segs {
		except, pass, err := ri.filters.recallFilter(ss, q)
		if err != nil {
			return nil, err
		}
		if !pass {
			continue
		}
		lists[i] = per[i].lists
		if except == nil {
			continue
		}
		lists[i] = make([]segment.PostingsList, len(terms))
		for t, term := range terms {
			if df[t] == 0 {
				continue
			}
			if lists[i][t], err = per[i].dict.PostingsList([]byte(term), except, nil); err != nil {
				return nil, err
			}
		}
	}
	return lists, nil
}

// topHits answers the best limit recallable records of q's realm. Expired
// records and records outside q's time window fail only at the fetch (the
// window is judged on the stored record's When), so the candidates asked
// of the walker grow when they crowd the top.
func (ri *realmIndex) topHits(ctx context.Context, w *walker, q *sdk.RecallQuery, limit int, now time.Time) ([]sdk.Hit, error) {
	realm := q.Realm
	want := limit
	if ri.cat.mayHoldExpiring() {
		want = limit + 8
	}
	if !q.Since.IsZero() || !q.Until.IsZero() {
		want = 4 * limit
	}
	var hits []sdk.Hit
	for {
		if err := w.score(ctx, want); err != nil {
			return nil, err
		}
		rk := &ranking{segs: w.segs}
		top := rk.selectTop(w.scratch, want)
		if rk.err != nil {
			return nil, rk.err
		}
		hits = hits[:0]
		for _, c := range top {
			r, err := storedRecordOf(w.segs[c.seg], uint64(c.doc))
			if err != nil {
				return nil, err
			}
			// Expiry is judged here, to the nanosecond; isolation is
			// guarded once more.
			if r.Realm != realm || !r.Recallable(now) || !q.InWindow(r.When()) {
				continue
			}
			hits = append(hits, sdk.Hit{Record: r, Score: c.score})
			if len(hits) == limit {
				return hits, nil
			}
		}
		if len(top) < want {
			return hits, nil
		}
		want *= 4
	}
}

// pruning lets score skip lists that cannot change the best documents;
// a variable so a test can compare against the exhaustive walk.
var pruning = true

// walker scores one query's posting lists into per-segment accumulators.
type walker struct {
	s       scorer
	idfs    []float64
	df      []uint64
	lists   [][]segment.PostingsList // by segment, then term
	segs    []*scorch.SegmentSnapshot
	scratch []*segScratch
	it      segment.PostingsIterator
}

func (w *walker) release() {
	for _, sc := range w.scratch {
		if sc != nil {
			putScratch(sc)
		}
	}
	w.scratch = nil
}

// score fills the accumulators so that the best n documents and their
// scores are exact (MaxScore): the lists are walked by descending score
// bound, and once the bounds of the lists left cannot lift a document
// past the n-th best partial score, those lists are only probed for the
// documents still in reach. Documents out of reach keep partial scores
// below every one of the best n.
func (w *walker) score(ctx context.Context, n int) error {
	w.release()
	w.scratch = make([]*segScratch, len(w.segs))
	for i, ss := range w.segs {
		if w.lists[i] != nil {
			w.scratch[i] = getScratch(int(ss.Segment().Count()))
		}
	}
	var order []int
	for t := range w.idfs {
		if w.df[t] > 0 {
			order = append(order, t)
		}
	}
	// A share never reaches idf*(k1+1).
	ub := func(t int) float64 { return w.idfs[t] * (bm25K1 + 1) }
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case ub(a) > ub(b):
			return -1
		case ub(a) < ub(b):
			return 1
		}
		return 0
	})
	rem := make([]float64, len(order)+1)
	for j := len(order) - 1; j >= 0; j-- {
		rem[j] = rem[j+1] + ub(order[j])
	}
	theta := 0.0
	j := 0
	for ; j < len(order); j++ {
		if pruning && theta > 0 && rem[j] < theta*(1-1e-9) {
			break
		}
		if err := w.walk(order[j]); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if j+1 < len(order) {
			theta = w.kth(n)
		}
	}
	if j == len(order) {
		return nil
	}
	// Documents still in reach, by segment; each list probed lifts the
	// bar and drops those that fall out of reach.
	cands := make([][]uint32, len(w.scratch))
	for i, sc := range w.scratch {
		if sc == nil {
			continue
		}
		for _, d := range sc.touched {
			if sc.acc[d]+rem[j] >= theta*(1-1e-9) {
				cands[i] = append(cands[i], d)
			}
		}
		slices.Sort(cands[i])
	}
	for ; j < len(order); j++ {
		for i := range cands {
			if len(cands[i]) > 0 {
				if err := w.probe(i, order[j], cands[i]); err != nil {
					return err
				}
			}
		}
		theta = max(theta, w.kthOf(cands, n))
		for i, cs := range cands {
			kept := cs[:0]
			for _, d := range cs {
				if w.scratch[i].acc[d]+rem[j+1] >= theta*(1-1e-9) {
					kept = append(kept, d)
				}
			}
			cands[i] = kept
		}
	}
	return ctx.Err()
}

// walk adds term t's shares to every document of its lists.
func (w *walker) walk(t int) error {
	for i, sc := range w.scratch {
		if sc == nil {
			continue
		}
		w.it = w.lists[i][t].Iterator(true, true, false, w.it)
		for {
			p, err := w.it.Next()
			if err != nil {
				return err
			}
			if p == nil {
				break
			}
			d := uint32(p.Number())
			if sc.acc[d] == 0 {
				sc.touched = append(sc.touched, d)
			}
			sc.acc[d] += w.s.share(w.idfs[t], float64(p.Frequency())/weightScale, p.Norm())
		}
	}
	return nil
}

// probe adds term t's shares to the documents cands (ascending) of
// segment i.
func (w *walker) probe(i, t int, cands []uint32) error {
	sc := w.scratch[i]
	w.it = w.lists[i][t].Iterator(true, true, false, w.it)
	// The posting an Advance lands on is consumed; it may be the next
	// candidate's, so it is kept.
	have := false
	var at uint64
	var f, norm float64
	for _, d := range cands {
		if !have || at < uint64(d) {
			p, err := w.it.Advance(uint64(d))
			if err != nil {
				return err
			}
			if p == nil {
				return nil
			}
			have, at, f, norm = true, p.Number(), float64(p.Frequency())/weightScale, p.Norm()
		}
		if at == uint64(d) {
			sc.acc[d] += w.s.share(w.idfs[t], f, norm)
		}
	}
	return nil
}

// kth answers the n-th best accumulated score, 0 when fewer documents
// have one.
func (w *walker) kth(n int) float64 {
	docs := make([][]uint32, len(w.scratch))
	for i, sc := range w.scratch {
		if sc != nil {
			docs[i] = sc.touched
		}
	}
	return w.kthOf(docs, n)
}

// kthOf is kth over the documents docs of each segment.
func (w *walker) kthOf(docs [][]uint32, n int) float64 {
	h := make([]float64, 0, n) // min-heap
	for i, ds := range docs {
		if len(ds) == 0 {
			continue
		}
		acc := w.scratch[i].acc
		for _, d := range ds {
			v := acc[d]
			if len(h) < n {
				h = append(h, v)
				for i := len(h) - 1; i > 0; {
					parent := (i - 1) / 2
					if h[i] >= h[parent] {
						break
					}
					h[i], h[parent] = h[parent], h[i]
					i = parent
				}
				continue
			}
			if v <= h[0] {
				continue
			}
			h[0] = v
			for i := 0; ; {
				l, r, m := 2*i+1, 2*i+2, i
				if l < len(h) && h[l] < h[m] {
					m = l
				}
				if r < len(h) && h[r] < h[m] {
					m = r
				}
				if m == i {
					break
				}
				h[i], h[m] = h[m], h[i]
				i = m
			}
		}
	}
	if len(h) < n {
		return 0
	}
	return h[0]
}

// selectTop answers the best n candidates, best first.
func (rk *ranking) selectTop(scratch []*segScratch, n int) []candidate {
	h := make([]candidate, 0, n) // min-heap on better: h[0] is the worst kept
	less := func(i, j int) bool { return rk.better(&h[j], &h[i]) }
	down := func(i int) {
		for {
			l, r, m := 2*i+1, 2*i+2, i
			if l < len(h) && less(l, m) {
				m = l
			}
			if r < len(h) && less(r, m) {
				m = r
			}
			if m == i {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for seg, sc := range scratch {
		if sc == nil {
			continue
		}
		for _, d := range sc.touched {
			c := candidate{score: sc.acc[d], seg: seg, doc: d}
			if len(h) < n {
				h = append(h, c)
				for i := len(h) - 1; i > 0; {
					parent := (i - 1) / 2
					if !less(i, parent) {
						break
					}
					h[i], h[parent] = h[parent], h[i]
					i = parent
				}
				continue
			}
			if rk.better(&c, &h[0]) {
				h[0] = c
				down(0)
			}
		}
	}
	out := make([]candidate, len(h))
	for i := len(h) - 1; i >= 0; i-- {
		out[i] = h[0]
		h[0] = h[len(h)-1]
		h = h[:len(h)-1]
		down(0)
	}
	return out
}

// filterCache keeps, per segment and scope and tag filter, the documents
// the filter excludes: segments never change but for their deletions,
// which are applied per query, and the same scopes are asked for on
// every turn of a session.
type filterCache struct {
	mu      sync.Mutex
	entries map[filterKey]*roaring.Bitmap // nil: nothing of the segment passes
}

type filterKey struct {
	seg    uint64
	filter string
}

// maxFilterEntries bounds the cache; it is emptied when full.
const maxFilterEntries = 1024

// recallFilter answers the documents of a segment a recall must not see
// (deleted, out of scope, missing a required tag, carrying an excluded
// tag or id) as an exclusion bitmap, nil when that is only the deleted
// ones, and false when no document passes.
func (fc *filterCache) recallFilter(ss *scorch.SegmentSnapshot, q *sdk.RecallQuery) (*roaring.Bitmap, bool, error) {
	if len(q.Scopes) == 0 && len(q.Tags) == 0 && len(q.ExcludeTags) == 0 && len(q.ExcludeIDs) == 0 {
		return nil, true, nil
	}
	seg := ss.Segment()
	var excluded *roaring.Bitmap // outside the scopes or without a tag
	if len(q.Scopes) > 0 || len(q.Tags) > 0 {
		var b strings.Builder
		for _, sc := range q.Scopes {
			b.WriteString(string(sc))
			b.WriteByte(0)
		}
		b.WriteByte(1)
		for _, tag := range q.Tags {
			b.WriteString(foldTag(tag))
			b.WriteByte(0)
		}
		key := filterKey{ss.Id(), b.String()}
		fc.mu.Lock()
		cached, ok := fc.entries[key]
		fc.mu.Unlock()
		if !ok {
			var err error
			if cached, err = excludedBy(seg, q); err != nil {
				return nil, false, err
			}
			fc.mu.Lock()
			if fc.entries == nil || len(fc.entries) >= maxFilterEntries {
				fc.entries = map[filterKey]*roaring.Bitmap{}
			}
			fc.entries[key] = cached
			fc.mu.Unlock()
		}
		if cached == nil {
			return nil, false, nil
		}
		excluded = cached
	}
	d := ss.Deleted()
	if excluded != nil && (d == nil || d.IsEmpty()) && len(q.ExcludeTags) == 0 && len(q.ExcludeIDs) == 0 {
		return excluded, true, nil // shared: zap only reads it
	}
	except := roaring.New()
	if excluded != nil {
		except.Or(excluded)
	}
	if d != nil {
		except.Or(d)
	}
	for _, tag := range q.ExcludeTags {
		bm, err := termBitmap(seg, fieldTag, foldTag(tag))
		if err != nil {
			return nil, false, err
		}
		except.Or(bm)
	}
	if len(q.ExcludeIDs) > 0 {
		bm, err := seg.DocNumbers(q.ExcludeIDs)
		if err != nil {
			return nil, false, err
		}
		except.Or(bm)
	}
	return except, true, nil
}

// excludedBy answers the documents of seg outside q's scopes or missing
// one of its tags, nil when that is every document.
func excludedBy(seg segment.Segment, q *sdk.RecallQuery) (*roaring.Bitmap, error) {
	var allowed *roaring.Bitmap // nil: every document
	if len(q.Scopes) > 0 {
		allowed = roaring.New()
		for _, sc := range q.Scopes {
			bm, err := termBitmap(seg, fieldScope, string(sc))
			if err != nil {
				return nil, err
			}
			allowed.Or(bm)
		}
	}
	for _, tag := range q.Tags {
		bm, err := termBitmap(seg, fieldTag, foldTag(tag))
		if err != nil {
			return nil, err
		}
		if allowed == nil {
			allowed = bm.Clone()
		} else {
			allowed.And(bm)
		}
	}
	if allowed.IsEmpty() {
		return nil, nil
	}
	// Not run-optimized: AndNot of a posting list's array container with a
	// run container converts the runs on every call.
	return roaring.Flip(allowed, 0, seg.Count()), nil
}

// termBitmap answers the documents of seg holding term in field, deleted
// ones included. The caller must not change it.
func termBitmap(seg segment.Segment, field, term string) (*roaring.Bitmap, error) {
	dict, err := seg.Dictionary(field)
	if err != nil {
		return nil, err
	}
	pl, err := dict.PostingsList([]byte(term), nil, nil)
	if err != nil {
		return nil, err
	}
	it := pl.Iterator(false, false, false, nil)
	if opt, ok := it.(segment.OptimizablePostingsIterator); ok {
		if bm := opt.ActualBitmap(); bm != nil {
			return bm, nil
		}
	}
	bm := roaring.New()
	if one, ok := it.(interface{ DocNum1Hit() (uint64, bool) }); ok {
		if d, ok := one.DocNum1Hit(); ok {
			bm.Add(uint32(d))
			return bm, nil
		}
	}
	for {
		p, err := it.Next()
		if err != nil {
			return nil, err
		}
		if p == nil {
			return bm, nil
		}
		bm.Add(uint32(p.Number()))
	}
}

// scorer is sdk/index's BM25 share: idf * f*(k1+1) / (f + k1*(1-b+b*dl/avgdl)).
type scorer struct{ avgdl float64 }

// share is one term's part of a document's score, for weighted frequency
// f and the posting's norm (1/sqrt of the length, as scorch stores it).
func (s *scorer) share(idf, f, norm float64) float64 {
	dl := math.Round(1 / (norm * norm))
	return idf * (f * (bm25K1 + 1)) / (f + bm25K1*(1-bm25B+bm25B*dl/s.avgdl))
}

// idf is sdk/index's (FTS5's) inverse document frequency,
// log((N-n+0.5)/(n+0.5)), never below 1e-6, so bleve ranks as the other
// providers do (TestRankingMatchesIndex). The realm's record count comes
// from the catalog, which may trail by a batch the snapshot already
// holds, so a term's count is capped by it: the logarithm stays finite.
func idf(docs, hits int64) float64 {
	hits = min(hits, docs)
	v := math.Log((float64(docs-hits) + 0.5) / (float64(hits) + 0.5))
	if v <= 0 {
		v = 1e-6
	}
	return v
}

// storedRecordOf decodes the stored record of document doc of ss.
func storedRecordOf(ss *scorch.SegmentSnapshot, doc uint64) (sdk.Record, error) {
	var raw []byte
	err := ss.VisitDocument(doc, func(name string, _ byte, val []byte, _ []uint64) bool {
		if name == fieldRecord {
			raw = slices.Clone(val) // val is the segment's buffer, reused once we return
			return false
		}
		return true
	})
	if err != nil {
		return sdk.Record{}, err
	}
	return decodeRecord(raw, fmt.Sprintf("document %d of segment %d", doc, ss.Id()))
}

func decodeRecord(raw []byte, what string) (sdk.Record, error) {
	var r sdk.Record
	if raw == nil {
		return r, fmt.Errorf("bleve: %s has no stored record", what)
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("bleve: %s: stored record: %w", what, err)
	}
	return r, nil
}

func storedRecord(h *search.DocumentMatch) (sdk.Record, error) {
	raw, ok := h.Fields[fieldRecord].(string)
	if !ok {
		return sdk.Record{}, fmt.Errorf("bleve: document %s has no stored record", h.ID)
	}
	return decodeRecord([]byte(raw), "document "+h.ID)
}

func termQuery(field, term string) *query.TermQuery {
	q := query.NewTermQuery(term)
	q.SetField(field)
	return q
}

// run executes a search. A failure keeps a caller's deadline or
// cancellation recognisable, and a panic (a segment corrupted after it was
// opened) becomes an error instead of killing the plugin.
func (ri *realmIndex) run(ctx context.Context, op string, req *blevesearch.SearchRequest) (res *blevesearch.SearchResult, err error) {
	ri.idxMu.RLock()
	defer ri.idxMu.RUnlock()
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("bleve: %s in realm %s: search panicked, the index %s may be corrupt: %v", op, ri.realm, ri.path, r)
		}
	}()
	if ri.closed {
		return nil, fmt.Errorf("bleve: %s in realm %s: %w", op, ri.realm, ri.closedError())
	}
	res, err = ri.idx.SearchInContext(ctx, req)
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			err = ctxErr
		}
		return nil, fmt.Errorf("bleve: %s in realm %s: %w", op, ri.realm, err)
	}
	return res, nil
}
