package index

import (
	"fmt"
	"math"
	"runtime"
	"slices"
)

// Search answers the best q.Limit documents of q.Realm that hold any query
// term and pass the filters, best first.
//
// A query with little posting work walks every list term at a time, in
// query order, and its sums are the scores. Otherwise it walks document at
// a time (MaxScore, maxscore.go): lists that cannot lift a document past
// the k-th best score so far are only probed, blocks that cannot are
// passed over, and the survivors are rescored in query order so their
// scores stay bit-exact.
//
// A query with a Vector is answered by hybrid ranking (vector.go).
func (ix *Index) Search(q Query) ([]Hit, error) {
	if q.Limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d must be positive", ErrInvalid, q.Limit)
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	ix.searching.Add(1)
	defer ix.searching.Add(-1)
	if q.Vector != nil {
		return ix.hybrid(q)
	}
	return ix.search(q)
}

// prepare answers the scorer of realm rm and its lists of terms, in query
// order, leaving out the terms no document holds.
func (ix *Index) prepare(rm *realm, terms []string) (scorer, []qterm) {
	nDocs, nTokens := int64(ix.docs), ix.tokens
	if ix.opts.Stats == StatsRealm {
		nDocs, nTokens = int64(rm.live), rm.tokens
	}
	s := scorer{k1: ix.opts.K1, b: ix.opts.B, avgdl: float64(nTokens) / float64(nDocs)}
	qts := make([]qterm, 0, len(terms))
	for _, t := range terms {
		tid, ok := rm.termIDs[t]
		if !ok || rm.lists[tid].df == 0 {
			continue // adds nothing to any score here
		}
		l := &rm.lists[tid]
		qts = append(qts, qterm{list: l, idf: idf(nDocs, ix.docFreq(rm, t, l)), pos: len(qts)})
	}
	return s, qts
}

// search is the lexical Search; the caller holds the read lock.
func (ix *Index) search(q Query) ([]Hit, error) {
	rm := ix.realms[q.Realm]
	if rm == nil {
		return []Hit{}, nil
	}
	sc := ix.getScratch(len(rm.ids))
	defer ix.putScratch(sc)
	// A core is spare when this is the only search and Go may use two.
	spare := ix.searching.Load() == 1 && runtime.GOMAXPROCS(0) > 1
	return hitsOf(rm, ix.lexical(rm, &q, sc, spare)), nil
}

// lexical answers the best q.Limit documents of rm for q's terms, best
// first, scored as Search scores them, in sc (valid until sc is put back).
func (ix *Index) lexical(rm *realm, q *Query, sc *scratch, spare bool) []entry {
	if rm.live == 0 || len(q.Terms) == 0 {
		return nil
	}
	s, qts := ix.prepare(rm, q.Terms)
	work := 0
	for i := range qts {
		work += int(qts[i].list.n)
	}
	f, ok := newFilter(rm, q)
	if len(qts) == 0 || !ok {
		return nil
	}
	for _, id := range q.ExcludeIDs {
		if no, ok := rm.byID[id]; ok && sc.acc[no] == 0 {
			sc.acc[no] = -1 // never scored: the walk skips it for free
			sc.touched = append(sc.touched, no)
		}
	}
	var es []entry
	if work <= exhaustiveWork {
		for i := range qts {
			walk(rm, &f, &s, &qts[i], sc, 0, len(qts[i].list.blocks))
		}
		es = best(rm, sc, sc.touched, nil, q.Limit)
	} else {
		es = ix.maxScore(rm, &f, &s, qts, sc, q.Limit, len(q.ExcludeIDs) > 0, spare)
	}
	if onSearch != nil {
		onSearch(sc.skipped)
	}
	return es
}

// exhaustiveWork is the posting count under which pruning cannot pay. A
// variable so tests can force either path.
var exhaustiveWork = 4096

// onSearch, when set (by tests), is told how many blocks each lexical
// search passed over by their bound.
var onSearch func(skippedBlocks int)

// slack keeps pruning safe from the rounding of sums taken in another
// order: a bound must fall this far below the threshold to prune.
const slack = 1e-9

// walk adds the shares of one list's blocks [from, to) to the
// accumulators of the documents in them that pass the filter; a document
// failing it is marked -1 once. It passes over a block no document of
// which is in the query's scopes.
func walk(rm *realm, f *filter, s *scorer, qt *qterm, sc *scratch, from, to int) {
	acc, dl, l := sc.acc, rm.dl, qt.list
	for bi := from; bi < to; bi++ {
		b := &l.blocks[bi]
		if b.scopes&f.scopes == 0 {
			continue // as if each failed the filter, but never scored anyway
		}
		n := l.decode(bi, &sc.docs, &sc.fs)
		for i, doc := range sc.docs[:n] {
			a := acc[doc]
			if a < 0 {
				continue
			}
			if a == 0 {
				sc.touched = append(sc.touched, doc)
				if !f.pass(doc) {
					acc[doc] = -1
					continue
				}
			}
			acc[doc] = a + s.share(qt.idf, sc.fs[i], dl[doc])
		}
	}
}

type qterm struct {
	list *plist
	idf  float64
	ub   float64
	pos  int // in query order
}

// docFreq is the number of documents holding t, over the statistics'
// documents.
func (ix *Index) docFreq(rm *realm, t string, l *plist) int64 {
	if ix.opts.Stats == StatsRealm || len(ix.realms) == 1 {
		return int64(l.df)
	}
	n := int64(0)
	for _, other := range ix.realms {
		if tid, ok := other.termIDs[t]; ok {
			n += int64(other.lists[tid].df)
		}
	}
	return n
}

// idf is FTS5's inverse document frequency, never below 1e-6.
func idf(docs, hits int64) float64 {
	v := math.Log((float64(docs-hits) + 0.5) / (float64(hits) + 0.5))
	if v <= 0 {
		v = 1e-6
	}
	return v
}

type scorer struct{ k1, b, avgdl float64 }

// share is one term's part of FTS5's bm25 for a document of length dl
// holding it with weighted frequency f. The conversions round each step
// as C does and forbid fused multiply-adds.
func (s *scorer) share(idf float64, f float32, dl uint32) float64 {
	ff := float64(f)
	norm := float64(s.k1 * float64(1-s.b+float64(s.b*float64(dl))/s.avgdl))
	return float64(idf * (float64(ff*(s.k1+1)) / (ff + norm)))
}

// bound is the most one list can add to any document's score.
func (l *plist) bound(s *scorer, idf float64) float64 {
	ub := 0.0
	for _, p := range l.peaks {
		ub = max(ub, s.share(idf, p.f, p.dl))
	}
	return ub
}

// filter is a query's filters resolved to the realm's ids.
type filter struct {
	rm            *realm
	scopeOK       []bool
	scopes        uint32 // scopeBit of every scope in scopeOK
	now           int64
	since, until  int64
	tags, notTags []uint32
	// which of the per-document checks can fail; one that cannot is not
	// read (each is a memory access per document met)
	checkTags, checkExpiry, checkWhen bool
}

// newFilter resolves q's filters; ok is false when nothing can pass.
func newFilter(rm *realm, q *Query) (filter, bool) {
	f := filter{rm: rm, now: q.NowMs, since: q.SinceMs, until: q.UntilMs, scopeOK: make([]bool, len(rm.scopeNames))}
	if len(q.Scopes) == 0 {
		for i := 1; i < len(f.scopeOK); i++ {
			f.scopeOK[i] = true
		}
	} else {
		any := false
		for _, s := range q.Scopes {
			if id, ok := rm.scopeIDs[s]; ok {
				f.scopeOK[id], any = true, true
			}
		}
		if !any {
			return f, false
		}
	}
	for _, t := range q.Tags {
		id, ok := rm.tagIDs[FoldTag(t)]
		if !ok {
			return f, false // no document carries it
		}
		f.tags = append(f.tags, id)
	}
	for _, t := range q.ExcludeTags {
		if id, ok := rm.tagIDs[FoldTag(t)]; ok {
			f.notTags = append(f.notTags, id)
		}
	}
	f.checkTags = len(f.tags)+len(f.notTags) > 0
	f.checkExpiry = rm.anyExpiry
	f.checkWhen = f.since != 0 || f.until != 0
	for id, ok := range f.scopeOK {
		if ok {
			f.scopes |= scopeBit(uint32(id))
		}
	}
	return f, true
}

func (f *filter) pass(d uint32) bool {
	rm := f.rm
	if !f.scopeOK[rm.scope[d]] {
		return false
	}
	if f.checkExpiry {
		if e := rm.expires[d]; e != 0 && e <= f.now {
			return false
		}
	}
	if f.checkWhen {
		if w := rm.when[d]; f.since != 0 && w < f.since || f.until != 0 && w >= f.until {
			return false
		}
	}
	if f.checkTags {
		have := rm.tags.at(d)
		for _, t := range f.tags {
			if !containsU32(have, t) {
				return false
			}
		}
		for _, t := range f.notTags {
			if containsU32(have, t) {
				return false
			}
		}
	}
	return true
}

// scratch is one search's working memory. acc is indexed by docno and is
// all zero between searches: 0 untouched, -1 filtered out, else a sum.
type scratch struct {
	acc     []float64
	touched []uint32
	cands   []uint32
	exact   []float64
	best    []entry
	ms, ms2 maxScorer // a search's, and a split search's other half
	// a block decoded by walk, and a probe's
	docs    [blockSize]uint32
	fs      [blockSize]float32
	probe   probe
	skipped int // blocks passed over by their bound
	fusion  fusion
	order   []int
}

func (ix *Index) getScratch(n int) *scratch {
	sc, _ := ix.scratch.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	if len(sc.acc) < n {
		sc.acc = make([]float64, n+n/4)
	}
	return sc
}

func (ix *Index) putScratch(sc *scratch) {
	for _, d := range sc.touched {
		sc.acc[d] = 0
	}
	sc.touched, sc.skipped = sc.touched[:0], 0
	ix.scratch.Put(sc)
}

func siftUpF(h []float64, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p] <= h[i] {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func siftDownF(h []float64, i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		if r := l + 1; r < len(h) && h[r] < h[l] {
			l = r
		}
		if h[i] <= h[l] {
			return
		}
		h[i], h[l] = h[l], h[i]
		i = l
	}
}

// entry is a scored document in the top-k heap.
type entry struct {
	score float64
	seq   uint64
	doc   uint32
}

// better orders hits: higher score, then higher seq, then lower id.
func better(rm *realm, a, b entry) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	if a.seq != b.seq {
		return a.seq > b.seq
	}
	return rm.ids[a.doc] < rm.ids[b.doc]
}

// top answers the best k of docs, scored by scores (parallel to docs) or,
// when scores is nil, by their accumulators.
func top(rm *realm, sc *scratch, docs []uint32, scores []float64, k int) []Hit {
	return hitsOf(rm, best(rm, sc, docs, scores, k))
}

// best is top's entries, best first, in sc.best.
func best(rm *realm, sc *scratch, docs []uint32, scores []float64, k int) []entry {
	h := bestUnordered(rm, sc, docs, scores, k)
	slices.SortFunc(h, func(a, b entry) int {
		if better(rm, a, b) {
			return -1
		}
		return 1
	})
	return h
}

// bestUnordered is best's entries in no particular order.
func bestUnordered(rm *realm, sc *scratch, docs []uint32, scores []float64, k int) []entry {
	h := sc.best[:0]
	for i, d := range docs {
		var e entry
		if scores != nil {
			e = entry{score: scores[i], seq: rm.seq[d], doc: d}
		} else {
			a := sc.acc[d]
			if a <= 0 {
				continue
			}
			e = entry{score: a, seq: rm.seq[d], doc: d}
		}
		if len(h) < k {
			h = append(h, e)
			for c := len(h) - 1; c > 0; {
				p := (c - 1) / 2
				if !better(rm, h[p], h[c]) {
					break
				}
				h[p], h[c] = h[c], h[p]
				c = p
			}
			continue
		}
		if !better(rm, e, h[0]) {
			continue
		}
		h[0] = e
		for i := 0; ; {
			l := 2*i + 1
			if l >= len(h) {
				break
			}
			// The root is the worst: sift toward the worse child.
			if r := l + 1; r < len(h) && better(rm, h[l], h[r]) {
				l = r
			}
			if !better(rm, h[i], h[l]) {
				break
			}
			h[i], h[l] = h[l], h[i]
			i = l
		}
	}
	sc.best = h
	return h
}

// hitsOf answers es as hits.
func hitsOf(rm *realm, es []entry) []Hit {
	out := make([]Hit, len(es))
	for i, e := range es {
		out[i] = Hit{ID: rm.ids[e.doc], Score: e.score, Seq: rm.seq[e.doc]}
	}
	return out
}
