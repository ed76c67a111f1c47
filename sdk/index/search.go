package index

import (
	"fmt"
	"math"
	"slices"
)

// Search answers the best q.Limit documents of q.Realm that hold any query
// term and pass the filters, best first.
//
// It walks term at a time. A query with little posting work walks every
// list in query order and its sums are the scores. Otherwise the lists are
// walked by descending score bound (MaxScore): once the bounds of the
// lists left cannot lift an unseen document past the k-th best partial
// score, those lists are only probed for the documents still in reach, and
// the survivors are rescored in query order so their scores stay bit-exact.
//
// A query with a Vector is answered by hybrid ranking (vector.go).
func (ix *Index) Search(q Query) ([]Hit, error) {
	if q.Limit <= 0 {
		return nil, fmt.Errorf("%w: limit %d must be positive", ErrInvalid, q.Limit)
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
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
		qts = append(qts, qterm{list: l, idf: idf(nDocs, ix.docFreq(rm, t, l))})
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
	return hitsOf(rm, ix.lexical(rm, &q, sc)), nil
}

// lexical answers the best q.Limit documents of rm for q's terms, best
// first, scored as Search scores them, in sc (valid until sc is put back).
func (ix *Index) lexical(rm *realm, q *Query, sc *scratch) []entry {
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
			walk(rm, &f, &s, &qts[i], sc, 0, len(qts[i].list.blocks), 0)
		}
		es = best(rm, sc, sc.touched, nil, q.Limit)
	} else {
		es = ix.maxScore(rm, &f, &s, qts, sc, q.Limit)
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

// walkChunk is how many blocks a pruned walk takes between looks at the
// k-th best score so far.
const walkChunk = 16

// maxScore walks the lists by descending bound, and within a list passes
// over the blocks whose bound cannot lift a document past the k-th best
// partial score (block-max). A document the walk has already met may
// then miss a share it holds in such a block: missing bounds that, and
// every candidate is rescored in full at the end.
func (ix *Index) maxScore(rm *realm, f *filter, s *scorer, qts []qterm, sc *scratch, k int) []entry {
	for i := range qts {
		qts[i].ub = qts[i].list.bound(s, qts[i].idf)
	}
	order := make([]int, len(qts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case qts[a].ub > qts[b].ub:
			return -1
		case qts[a].ub < qts[b].ub:
			return 1
		}
		return 0
	})
	// rem[j] bounds what the lists order[j:] can add to any document.
	rem := make([]float64, len(order)+1)
	left := make([]int, len(order)+1) // postings in order[j:]
	for j := len(order) - 1; j >= 0; j-- {
		rem[j] = rem[j+1] + qts[order[j]].ub
		left[j] = left[j+1] + int(qts[order[j]].list.n)
	}
	theta, missing := 0.0, 0.0
	seen := 0 // len(sc.touched) when theta was last taken
	j := 0
	for ; j < len(order); j++ {
		// A document no list walked so far has met cannot reach theta
		// (one in a block passed over could not either).
		if theta > 0 && rem[j] < theta*(1-slack) {
			break
		}
		qt := &qts[order[j]]
		nb := len(qt.list.blocks)
		skipped := 0.0
		for from := 0; from < nb; from += walkChunk {
			// A document first met in this list can reach its share and
			// rem[j+1] at most: a block whose bound leaves that short of
			// theta is passed over.
			skip := 0.0
			if theta > 0 {
				skip = theta*(1-slack) - rem[j+1]
			}
			skipped = max(skipped, walk(rm, f, s, qt, sc, from, min(from+walkChunk, nb), skip))
			// The k-th best costs a pass over the touched documents; take
			// it again once they have doubled, and only while the postings
			// left would cost more.
			if n := len(sc.touched); n >= 2*seen+k && n < left[j]-(from+walkChunk)*blockSize {
				theta, seen = max(theta, kth(sc, sc.touched, k)), n
			}
		}
		if j > 0 {
			// The first list met each of its documents first; later ones
			// may have passed over a block holding a document met before.
			missing += skipped
		}
		if j+1 < len(order) && len(sc.touched) < left[j+1] {
			theta, seen = max(theta, kth(sc, sc.touched, k)), len(sc.touched)
		}
	}
	cands := sc.cands[:0]
	theta = max(theta, kth(sc, sc.touched, k))
	for _, d := range sc.touched {
		if a := sc.acc[d]; a > 0 && a+rem[j]+missing >= theta*(1-slack) {
			cands = append(cands, d)
		}
	}
	slices.Sort(cands)
	p := &sc.probe
	for ; j < len(order); j++ {
		qt := &qts[order[j]]
		p.reset(qt.list)
		for _, d := range cands {
			if fr := p.find(d); fr > 0 {
				sc.acc[d] += s.share(qt.idf, fr, rm.dl[d])
			}
		}
		theta = max(theta, kth(sc, cands, k))
		kept := cands[:0]
		for _, d := range cands {
			if sc.acc[d]+rem[j+1]+missing >= theta*(1-slack) {
				kept = append(kept, d)
			}
		}
		cands = kept
	}
	// Rescore in query order, so each sum is the one FTS5 takes.
	exact := sc.exact[:0]
	for range cands {
		exact = append(exact, 0)
	}
	for i := range qts {
		qt := &qts[i]
		p.reset(qt.list)
		for c, d := range cands {
			if fr := p.find(d); fr > 0 {
				exact[c] += s.share(qt.idf, fr, rm.dl[d])
			}
		}
	}
	sc.cands, sc.exact = cands, exact
	return best(rm, sc, cands, exact, k)
}

// walk adds the shares of one list's blocks [from, to) to the
// accumulators of the documents in them that pass the filter; a document
// failing it is marked -1 once. It passes over a block no document of
// which is in the query's scopes, and one whose bound is below skip,
// answering the highest bound it passed over that way.
func walk(rm *realm, f *filter, s *scorer, qt *qterm, sc *scratch, from, to int, skip float64) (skipped float64) {
	acc, dl, l := sc.acc, rm.dl, qt.list
	for bi := from; bi < to; bi++ {
		b := &l.blocks[bi]
		if b.scopes&f.scopes == 0 {
			continue // as if each failed the filter, but never scored anyway
		}
		if skip > 0 {
			if ub := s.share(qt.idf, b.maxF, b.minDL); ub < skip {
				skipped = max(skipped, ub)
				sc.skipped++
				continue
			}
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
	return skipped
}

type qterm struct {
	list *plist
	idf  float64
	ub   float64
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
	heap    []float64
	best    []entry
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

// kth answers the k-th largest positive accumulator among docs, or 0 when
// fewer than k are positive.
func kth(sc *scratch, docs []uint32, k int) float64 {
	h := sc.heap[:0]
	for _, d := range docs {
		a := sc.acc[d]
		if a <= 0 {
			continue
		}
		if len(h) < k {
			h = append(h, a)
			siftUpF(h, len(h)-1)
		} else if a > h[0] {
			h[0] = a
			siftDownF(h, 0)
		}
	}
	sc.heap = h
	if len(h) < k {
		return 0
	}
	return h[0]
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
