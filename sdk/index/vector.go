package index

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Vectors: a document may carry one embedding, with the id of the model
// that made it (PutVector). A query with Query.Vector ranks by a convex
// combination of its lexical (BM25F) and semantic (cosine) scores, each
// min-max normalised over the candidates: the lexical top FusionDepth
// and the vector top FusionDepth, both under the query's filters. Vectors
// are kept as float32 at unit length, so a cosine is one dot product.
// The vector top is exact (brute force's top, found through the int8
// copies of the query's scopes, vecscan.go) while those scopes list fewer
// than annThreshold vectors of the model, and approximate above (an HNSW
// graph, hnsw.go), falling back to exact when the graph finds fewer than
// FusionDepth passing documents within half a scan's cosines. Either way
// every candidate's cosine is computed exactly, so the fusion is the same
// given the same candidates.
//
// A document keeps its vector when it is put again under its id (a
// record's text does not change under its id; the thread-context refresh
// re-puts neighbours too) and loses it when deleted.

// FusionDepth is how many candidates each half contributes at least; a
// query's Limit raises it. The two halves' top FusionDepth are also the
// pool whose least and greatest scores normalise every candidate's,
// whatever the limit: normalised over a deeper pool, the same records ranked
// differently at limit 100 than at 10 (LongMemEval turn recall@10 0.839
// against 0.846). The lexical top FusionDepth is most of a hybrid
// search's cost: at 20 rather than 50 (100 before that) hybrid recall at
// 100k records took a sixth less time, and LoCoMo and LongMemEval ranked
// as well (docs/benchmarks.md).
const FusionDepth = 20

// Default fusion weights. Lexical ranking carries most of the weight: on
// the benchmarks the issue measured (LongMemEval-S, LoCoMo) BM25F is the
// stronger signal and a static word-vector signal helped only as a
// minority term; a query sharing no word with any record is still ranked
// by the vectors alone, because then every lexical score is 0. Of 0.2 to
// 0.5, 0.25 gave the best turn recall on both development splits
// (LongMemEval-S; LoCoMo samples 0-4, tied there with 0.27), see
// docs/benchmarks.md.
const (
	DefaultLexicalWeight  = 0.75
	DefaultSemanticWeight = 0.25
)

// docVec is one document's embedding: slot of set, whose chunk v lies in.
type docVec struct {
	model string
	v     []float32 // unit length
	set   *vecSet
	slot  uint32
}

// normalize answers v scaled to unit length, computed in float64 and
// rounded to float32 once per component; ok is false for a vector that
// is empty, all zero or not finite.
func normalize(v []float32) ([]float32, bool) {
	sum := 0.0
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	norm := math.Sqrt(sum)
	if len(v) == 0 || !(norm > 0) || math.IsInf(norm, 0) {
		return nil, false
	}
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(float64(x) / norm)
	}
	return out, true
}

// dotGo is the cosine of two unit vectors of one length: float32
// products in eight running sums (the order is fixed, so a score is
// reproducible bit for bit; the conversions keep a compiler from fusing a
// product and its sum), added pairwise at the end. Eight sums rather than
// four measured a fifth faster at 100 dimensions (docs/benchmarks.md).
// dot is this computation, in assembly where there is one
// (dot_amd64.s: the same sums, two SSE registers of four).
func dotGo(a, b []float32) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3, s4, s5, s6, s7 float32
	i := 0
	for ; i+8 <= len(a); i += 8 {
		x, y := a[i:i+8:i+8], b[i:i+8:i+8]
		s0 += float32(x[0] * y[0])
		s1 += float32(x[1] * y[1])
		s2 += float32(x[2] * y[2])
		s3 += float32(x[3] * y[3])
		s4 += float32(x[4] * y[4])
		s5 += float32(x[5] * y[5])
		s6 += float32(x[6] * y[6])
		s7 += float32(x[7] * y[7])
	}
	for ; i < len(a); i++ {
		s0 += float32(a[i] * b[i])
	}
	return float64(((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)))
}

// PutVector gives the document id of realm the embedding v made by model,
// replacing its previous one; found is false (and nothing changes) when
// the realm holds no such document. A vector of a model whose other
// vectors in the realm have another length is refused with ErrInvalid.
func (ix *Index) PutVector(realm, id, model string, v []float32) (found bool, err error) {
	if model == "" {
		return false, fmt.Errorf("%w: a vector needs its model", ErrInvalid)
	}
	unit, ok := normalize(v)
	if !ok {
		return false, fmt.Errorf("%w: the vector of %q is empty, zero or not finite", ErrInvalid, id)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	rm, no, ok := ix.lookup(realm, id)
	if !ok {
		return false, nil
	}
	if err := rm.fits(no, model, len(v)); err != nil {
		return false, err
	}
	rm.dropVector(no)
	rm.setVector(no, rm.vecSet(model, len(unit)).add(model, unit))
	rm.tidyVectors()
	return true, nil
}

// DeleteVector drops the vector of the document id of realm; it reports
// whether there was one.
func (ix *Index) DeleteVector(realm, id string) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	rm, no, ok := ix.lookup(realm, id)
	if !ok || rm.dropVector(no) == nil {
		return false
	}
	rm.tidyVectors()
	return true
}

// VectorFits answers the ErrInvalid PutVector would answer for a vector
// of dims dimensions by model for the document id of realm, nil when it
// would be stored or skipped.
func (ix *Index) VectorFits(realm, id, model string, dims int) error {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if rm, no, ok := ix.lookup(realm, id); ok {
		return rm.fits(no, model, dims)
	}
	return nil
}

// fits checks that docno no may take a vector of dims dimensions by
// model: the model's other vectors in the realm, if any, have as many
// (replacing the model's only vector may change them).
func (rm *realm) fits(no uint32, model string, dims int) error {
	ms := rm.models[model]
	if ms == nil || ms.dims == dims {
		return nil
	}
	if old := rm.vec[no]; ms.n == 1 && old != nil && old.model == model {
		return nil
	}
	return fmt.Errorf("%w: model %q makes %d dimensions here, this vector has %d", ErrInvalid, model, ms.dims, dims)
}

// HasVector reports whether the document id of realm has a vector made by
// model.
func (ix *Index) HasVector(realm, id, model string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	rm, no, ok := ix.lookup(realm, id)
	return ok && rm.vec[no] != nil && rm.vec[no].model == model
}

// Vectors answers how many documents of realm have a vector.
func (ix *Index) Vectors(realm string) int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	n := 0
	if rm := ix.realms[realm]; rm != nil {
		for _, ms := range rm.models {
			n += ms.n
		}
	}
	return n
}

// MissingVectors answers up to limit ids of realm's documents, not
// expired at nowMs, with no vector made by model, in id order after
// after: a backlog a caller pages through stably.
func (ix *Index) MissingVectors(realm, model, after string, nowMs int64, limit int) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	rm := ix.realms[realm]
	if rm == nil || limit <= 0 {
		return []string{}
	}
	// The limit smallest ids, kept in a max-heap: sorting every missing id
	// cost each page O(n log n) under the lock, which every realm's
	// writes and recalls wait on, and a drain of n records n/limit pages.
	ids := make([]string, 0, min(limit, rm.live))
	for no, id := range rm.ids {
		if rm.scope[no] == deadScope || id <= after {
			continue
		}
		if len(ids) == limit && id >= ids[0] {
			continue // the commonest case once the heap is full: one compare
		}
		if e := rm.expires[no]; e != 0 && e <= nowMs {
			continue
		}
		if dv := rm.vec[no]; dv != nil && dv.model == model {
			continue
		}
		if len(ids) < limit {
			ids = append(ids, id)
			siftUp(ids, len(ids)-1)
		} else {
			ids[0] = id
			siftDown(ids, 0)
		}
	}
	slices.Sort(ids)
	return ids
}

// siftUp restores the max-heap h after h[i] was set.
func siftUp(h []string, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p] >= h[i] {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

// siftDown restores the max-heap h after h[i] was lowered.
func siftDown(h []string, i int) {
	for {
		big, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && h[l] > h[big] {
			big = l
		}
		if r < len(h) && h[r] > h[big] {
			big = r
		}
		if big == i {
			return
		}
		h[i], h[big] = h[big], h[i]
		i = big
	}
}

// vecSet answers the realm's set of model's vectors, made for dims
// dimensions when there is none.
func (rm *realm) vecSet(model string, dims int) *vecSet {
	if rm.models == nil {
		rm.models = map[string]*vecSet{}
	}
	ms := rm.models[model]
	if ms == nil {
		ms = &vecSet{dims: dims}
		rm.models[strings.Clone(model)] = ms
	}
	return ms
}

// setVector attaches dv (nil: none) to docno no. A vector detached by
// dropVector comes back to its set, or is copied into the model's set
// made since.
func (rm *realm) setVector(no uint32, dv *docVec) {
	rm.gen++
	rm.vec[no] = nil
	if dv == nil {
		return
	}
	ms := rm.vecSet(dv.model, len(dv.v))
	if ms != dv.set {
		dv.set.detach(dv.slot)
		dv = ms.add(dv.model, dv.v)
	}
	rm.vec[no] = dv
	ms.attach(dv.slot, no, rm.scope[no])
}

// dropVector detaches docno no's vector, answering it: the caller puts it
// back with setVector (a document moving to another docno) or drops it.
func (rm *realm) dropVector(no uint32) *docVec {
	rm.gen++
	dv := rm.vec[no]
	if dv == nil {
		return nil
	}
	rm.vec[no] = nil
	dv.set.detach(dv.slot)
	if dv.set.n == 0 && rm.models[dv.model] == dv.set {
		delete(rm.models, dv.model)
	}
	return dv
}

// fusionWeights answers q's weights scaled to sum to 1, the defaults for
// the zero value.
func fusionWeights(q *Query) (lex, sem float64, err error) {
	lex, sem = q.LexicalWeight, q.SemanticWeight
	for _, w := range []float64{lex, sem} {
		if math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
			return 0, 0, fmt.Errorf("%w: fusion weight %v, want a finite number at least 0", ErrInvalid, w)
		}
	}
	if lex == 0 && sem == 0 {
		lex, sem = DefaultLexicalWeight, DefaultSemanticWeight
	}
	return lex / (lex + sem), sem / (lex + sem), nil
}

// hybrid answers a query with a vector; the caller holds the read lock.
func (ix *Index) hybrid(q Query) ([]Hit, error) {
	wl, ws, err := fusionWeights(&q)
	if err != nil {
		return nil, err
	}
	qv, ok := normalize(q.Vector)
	if !ok || q.Model == "" {
		return nil, fmt.Errorf("%w: a query vector must be finite, not zero, and name its model", ErrInvalid)
	}
	rm := ix.realms[q.Realm]
	if rm == nil || rm.live == 0 {
		return []Hit{}, nil
	}
	ms := rm.models[q.Model]
	switch {
	case ms == nil && len(rm.models) > 0:
		return nil, fmt.Errorf("%w: realm %q holds vectors of %s, not of model %q", ErrInvalid, q.Realm, modelNames(rm), q.Model)
	case ms == nil:
		// No vector to compare with: the answer is the lexical one.
		return ix.search(q)
	case ms.dims != len(qv):
		return nil, fmt.Errorf("%w: model %q makes %d dimensions in realm %q, the query vector has %d", ErrInvalid, q.Model, ms.dims, q.Realm, len(qv))
	}
	depth := max(q.Limit, FusionDepth)
	f, ok := newFilter(rm, &q)
	if !ok {
		return []Hit{}, nil
	}
	// Each half has a scratch of its own: the lexical top's entries live
	// in lsc, the vector top's in sc.
	lsc := ix.getScratch(len(rm.ids))
	defer ix.putScratch(lsc)
	sc := ix.getScratch(len(rm.ids))
	defer ix.putScratch(sc)
	var excluded map[string]bool
	if len(q.ExcludeIDs) > 0 {
		excluded = make(map[string]bool, len(q.ExcludeIDs))
		for _, id := range q.ExcludeIDs {
			excluded[id] = true
		}
	}
	// The halves run in turn: finding the vector top on a goroutine of
	// its own while the lexical top is found took longer, not less, once
	// the scan was as fast as the lexical half (docs/benchmarks.md).
	lq := q
	lq.Limit = depth
	lex := ix.lexical(rm, &lq, lsc, false)
	docs, cos, _ := semanticTop(rm, ms, qv, &f, excluded, sc, depth)
	sc.cands, sc.exact = docs, cos
	vtop := bestUnordered(rm, sc, docs, cos, depth)
	// Candidates: the lexical top, then the vector top's others. sc.acc
	// (zero: the vector half does not use it) marks each candidate with
	// its place plus one.
	fu := &sc.fusion
	fu.reset()
	for _, e := range lex {
		fu.add(e.doc, e.score)
		sc.acc[e.doc] = float64(len(fu.docs))
		sc.touched = append(sc.touched, e.doc)
	}
	more := len(fu.docs)
	// The pool that normalises the scores is the two halves' top
	// FusionDepth whatever the limit, so a hit's fused score does not
	// depend on how many hits were asked for (exactly below the graph's
	// threshold; the graph's approximate top may differ with its breadth).
	// A higher limit may still gather a candidate a lower one does not:
	// one in neither top FusionDepth that scores well in both halves.
	for i := range fu.docs {
		fu.pool[i] = i < FusionDepth
	}
	if len(vtop) > FusionDepth {
		slices.SortFunc(vtop, func(a, b entry) int {
			if better(rm, a, b) {
				return -1
			}
			return 1
		})
	}
	for i, e := range vtop {
		at := int(sc.acc[e.doc]) - 1
		if at < 0 {
			fu.add(e.doc, 0)
			at = len(fu.docs) - 1
		}
		fu.sem[at], fu.hasVec[at] = e.score, true
		fu.pool[at] = fu.pool[at] || i < FusionDepth
	}
	// The lexical top's scores are Search's; the others' are computed,
	// unless the lexical top holds fewer than depth: then it holds every
	// document passing the filters with a lexical score above 0, and the
	// others score 0.
	if len(lex) == depth && len(fu.docs) > more {
		ix.lexicalScores(rm, q.Terms, fu.docs[more:], fu.lex[more:], sc)
	}
	// The lexical top's cosines not in the vector top are computed, their
	// vectors touched first (as the scan's are).
	for i, no := range fu.docs[:more] {
		if dv := rm.vec[no]; !fu.hasVec[i] && dv != nil && dv.set == ms {
			fu.sink += touch(dv.v)
		}
	}
	for i, no := range fu.docs[:more] {
		if dv := rm.vec[no]; !fu.hasVec[i] && dv != nil && dv.set == ms {
			fu.sem[i], fu.hasVec[i] = dot(qv, dv.v), true
		}
	}
	fu.fuse(wl, ws)
	return top(rm, sc, fu.docs, fu.fused, q.Limit), nil
}

// semanticTop answers documents of set ms passing f and not excluded
// and their cosines with qv: depth of the nearest from the graph
// (approx), or, below the threshold or when the graph finds too few
// within a brute force's cost, every one that may be among the depth
// nearest (scan), so their top is that of brute force.
func semanticTop(rm *realm, ms *vecSet, qv []float32, f *filter, excluded map[string]bool, sc *scratch, depth int) (docs []uint32, cos []float64, approx bool) {
	docs, cos = sc.cands[:0], sc.exact[:0]
	// An exact scan scores the vectors of the scopes f reads; the graph
	// answers only when they are as many as the threshold, where brute
	// force over a whole set starts to cost more than the graph does
	// unfiltered (a filtered graph search costs more than an unfiltered
	// one: it walks past the nodes the filter rejects).
	listed := ms.listedIn(f)
	if ms.graph != nil && listed >= annThreshold {
		// Approximate: the graph's nearest that pass, when it finds
		// enough of them within half a brute force's cost.
		accept := func(slot uint32) bool {
			no := ms.owner[slot]
			return no != noDoc && f.pass(no) && (excluded == nil || !excluded[rm.ids[no]])
		}
		found, ok := ms.graph.search(qv, depth, max(depth, hnswEf), listed/2, accept)
		if approx = ok && len(found) == depth; approx {
			for _, c := range found {
				docs = append(docs, ms.owner[c.slot])
				cos = append(cos, dot(qv, ms.vec(c.slot)))
			}
		}
	}
	if approx {
		return docs, cos, true
	}
	docs, cos = ms.scan(rm, qv, f, excluded, depth, docs, cos)
	return docs, cos, false
}

// fusion is a hybrid search's candidates: per candidate its docno,
// lexical score, cosine (when hasVec), whether it is in the pool that
// normalises the scores, and fused score, reused across searches.
type fusion struct {
	docs            []uint32
	lex, sem, fused []float64
	hasVec, pool    []bool
	sink            float32 // touch's sums
}

func (fu *fusion) reset() {
	fu.docs, fu.lex, fu.sem, fu.fused = fu.docs[:0], fu.lex[:0], fu.sem[:0], fu.fused[:0]
	fu.hasVec, fu.pool = fu.hasVec[:0], fu.pool[:0]
}

// add appends candidate no of lexical score lex, with no cosine yet.
func (fu *fusion) add(no uint32, lex float64) {
	fu.docs, fu.lex = append(fu.docs, no), append(fu.lex, lex)
	fu.sem, fu.hasVec, fu.fused = append(fu.sem, 0), append(fu.hasVec, false), append(fu.fused, 0)
	fu.pool = append(fu.pool, false)
}

// fuse sets each candidate's fused score to wl*lex' + ws*sem', where lex'
// is lex min-max normalised over the pool's candidates and sem' is sem
// normalised over the pool's candidates with a vector (hasVec), 0 for one
// without. A candidate outside the pool may normalise below 0 and, when
// the graph missed a vector better than the pool's best, above 1. When
// every pooled value of a half is equal, a lexical score above 0 and a
// cosine that reach it normalise to 1, lower ones to 0.
func (fu *fusion) fuse(wl, ws float64) {
	lmin, lmax := math.Inf(1), math.Inf(-1)
	smin, smax := math.Inf(1), math.Inf(-1)
	for i, x := range fu.lex {
		if !fu.pool[i] {
			continue
		}
		lmin, lmax = min(lmin, x), max(lmax, x)
		if fu.hasVec[i] {
			smin, smax = min(smin, fu.sem[i]), max(smax, fu.sem[i])
		}
	}
	for i, x := range fu.lex {
		l := 0.0
		switch {
		case lmax > lmin:
			l = (x - lmin) / (lmax - lmin)
		case x > 0 && x >= lmax:
			l = 1
		}
		s := 0.0
		switch {
		case !fu.hasVec[i]:
		case smax > smin:
			s = (fu.sem[i] - smin) / (smax - smin)
		case fu.sem[i] >= smax:
			s = 1
		}
		fu.fused[i] = wl*l + ws*s
	}
}

// lexicalScores sets out[i] to the BM25F score of the document docs[i]
// (0 for one holding no query term), summed in query order as Search
// sums. docs are distinct; each list is probed for them in docno order.
func (ix *Index) lexicalScores(rm *realm, terms []string, docs []uint32, out []float64, sc *scratch) {
	clear(out)
	order := sc.order[:0]
	for i := range docs {
		order = append(order, i)
	}
	sc.order = order
	slices.SortFunc(order, func(a, b int) int { return cmp.Compare(docs[a], docs[b]) })
	s, qts := ix.prepare(rm, terms)
	sumShares(rm, &s, qts, docs, order, out, &sc.probe)
}

// sumShares adds to out[c] every list's share of docs[c], the lists taken
// in the order of qts (query order, as Search sums, so each sum is the one
// FTS5 takes). order visits docs by ascending docno, as a probe must; nil
// when docs ascend already.
func sumShares(rm *realm, s *scorer, qts []qterm, docs []uint32, order []int, out []float64, p *probe) {
	for i := range qts {
		qt := &qts[i]
		p.reset(qt.list)
		for k := range docs {
			c := k
			if order != nil {
				c = order[k]
			}
			if fr := p.find(docs[c]); fr > 0 {
				out[c] += s.share(qt.idf, fr, rm.dl[docs[c]])
			}
		}
	}
}

func modelNames(rm *realm) string {
	var names []string
	for m := range rm.models {
		names = append(names, fmt.Sprintf("%q", m))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
