package index

import (
	"cmp"
	"math"
	"slices"
	"sync/atomic"
)

// cursor walks one list document at a time, a block decoded at a time,
// passing over the blocks no document of which is in the query's scopes
// and those whose bound is below its floor.
type cursor struct {
	qt    *qterm
	bi    int // the block decoded into docs and fs
	n, i  int // postings decoded (those before hi), the current one
	doc   uint32
	hi    uint32  // the walk's docnos end before this
	floor float64 // a block bounded below this is passed over
	docs  [blockSize]uint32
	fs    [blockSize]float32
}

// start puts c on the first posting at or after docno lo that may matter,
// walking up to hi.
func (c *cursor) start(lo, hi uint32, m *maxScorer) {
	c.hi = hi
	c.enter(c.qt.list.seek(lo, 0), m, 0, 0)
	for c.doc < lo {
		c.next(m)
	}
}

// next moves c to the posting after the current one.
func (c *cursor) next(m *maxScorer) {
	if c.i++; c.i < c.n {
		c.doc = c.docs[c.i]
		return
	}
	c.enter(c.bi+1, m, 0, 0)
}

// enter decodes the first block from bi on that may matter and puts c on
// its first posting, or ends c. A block whose documents all come before
// until must reach tight as well as the floor.
func (c *cursor) enter(bi int, m *maxScorer, tight float64, until uint32) {
	l := c.qt.list
	for ; bi < len(l.blocks) && l.blocks[bi].first < c.hi; bi++ {
		b := &l.blocks[bi]
		if b.scopes&m.f.scopes == 0 {
			continue
		}
		floor := c.floor
		if b.last < until {
			floor = max(floor, tight)
		}
		if floor > 0 && m.s.share(c.qt.idf, b.maxF, b.minDL) < floor {
			m.skipped++
			continue
		}
		c.bi, c.n, c.i = bi, l.decode(bi, &c.docs, &c.fs), 0
		if b.last >= c.hi {
			c.n, _ = slices.BinarySearch(c.docs[:c.n], c.hi)
		}
		c.doc = c.docs[0]
		return
	}
	c.bi, c.n, c.i, c.doc = len(l.blocks), 0, 0, noDoc // past every docno
}

// maxScorer is one document-at-a-time search (MaxScore). The lists are
// ordered by ascending score bound; once the k-th best score so far
// (theta) passes the sum of the first lists' bounds, those lists are no
// longer walked but only probed for the documents the others hold, and
// only while the document can still reach theta, its blocks' bounds tried
// before its postings. A walked list passes over a block whose bound, with
// every other list's, cannot reach theta.
//
// A long walk with a core to spare is split at a docno: the two halves run
// side by side, each with its own cursors, probes and candidates, and
// share theta (each half's k-th best is a floor for the whole answer's).
//
// Scores are summed in bound order with BM25 rearranged to one division,
// so they may differ from FTS5's sums in the last bits: slack keeps every
// comparison safe from that, and every document that reached theta is
// rescored in query order at the end.
type maxScorer struct {
	rm       *realm
	f        *filter
	s        *scorer
	sc       *scratch // its acc is only read once the walk starts
	k        int
	excluded bool // the query excludes ids: their acc is -1
	cur      []cursor
	probes   []probe
	// shared is the best theta of a split search's halves (float64 bits),
	// nil when the search is not split
	shared  *atomic.Uint64
	skipped int // blocks passed over by their bound
	// pre[j] bounds what the lists 0..j-1 (bound order) can add to any
	// document; idfk[j] is list j's idf times k1+1
	pre, idfk   []float64
	norm0, norm float64 // BM25's length norm is norm0 + norm*dl
	theta       float64 // the k-th best score so far less the slack; 0 until k are scored
	ess         int     // lists ess.. are walked, the ones below probed
	heap        []float64
	cands       []uint32
	approx      []float64 // cands' scores, as summed here
}

// fast is list j's share of a document of length dl with weighted
// frequency f, within a few ulps of scorer.share.
func (m *maxScorer) fast(j int, f float32, dl uint32) float64 {
	ff := float64(f)
	return m.idfk[j] * ff / (ff + m.norm0 + m.norm*float64(dl))
}

// maxScore answers the best k documents (see maxScorer). With a core to
// spare (spare) and much to walk, the walk is split in two docno ranges
// searched side by side (split).
func (ix *Index) maxScore(rm *realm, f *filter, s *scorer, qts []qterm, sc *scratch, k int, excluded, spare bool) []entry {
	for i := range qts {
		qts[i].ub = qts[i].list.bound(s, qts[i].idf)
	}
	slices.SortStableFunc(qts, func(a, b qterm) int { return cmp.Compare(a.ub, b.ub) })
	m := &sc.ms
	m.init(rm, f, s, sc, qts, k, excluded)
	m.seed()
	mid := uint32(noDoc)
	if spare {
		mid = m.split()
	}
	for j := range m.cur {
		m.cur[j].start(0, mid, m)
	}
	var cands []uint32
	var approx []float64
	theta := 0.0
	if mid == noDoc {
		m.run()
		cands, approx, theta = m.cands, m.approx, m.theta
	} else {
		// The halves share theta; each keeps its own candidates, the
		// first half's all before the second's.
		other := &sc.ms2
		other.init(rm, f, s, sc, qts, k, excluded)
		other.shared = m.shared
		other.raise(m.theta)
		for j := range other.cur {
			other.cur[j].start(mid, noDoc, other)
		}
		if splitInTurn {
			other.run()
			m.run()
		} else {
			wait := goWait(other.run)
			m.run()
			wait()
		}
		cands, approx = append(m.cands, other.cands...), append(m.approx, other.approx...)
		theta = max(m.theta, other.theta)
		sc.skipped += other.skipped
	}
	sc.skipped += m.skipped
	// Keep the candidates still in reach of the final theta, rescored in
	// query order, so each sum is the one FTS5 takes.
	kept, exact := sc.cands[:0], sc.exact[:0]
	for c, d := range cands {
		if approx[c] >= theta {
			kept, exact = append(kept, d), append(exact, 0)
		}
	}
	m.cands, m.approx = cands[:0], approx[:0]
	slices.SortStableFunc(qts, func(a, b qterm) int { return a.pos - b.pos })
	sumShares(rm, s, qts, kept, nil, exact, &sc.probe) // kept ascends: the halves walk in docno order
	sc.cands, sc.exact = kept, exact
	return best(rm, sc, kept, exact, k)
}

// init readies m for a search of qts, which are in bound order.
func (m *maxScorer) init(rm *realm, f *filter, s *scorer, sc *scratch, qts []qterm, k int, excluded bool) {
	n := len(qts)
	if cap(m.cur) < n {
		m.cur, m.probes = make([]cursor, n), make([]probe, n)
	}
	*m = maxScorer{
		rm: rm, f: f, s: s, sc: sc, k: k, excluded: excluded,
		cur: m.cur[:n], probes: m.probes[:n],
		pre: append(m.pre[:0], 0), idfk: m.idfk[:0],
		norm0: s.k1 * (1 - s.b), norm: s.k1 * s.b / s.avgdl,
		heap: m.heap[:0], cands: m.cands[:0], approx: m.approx[:0],
	}
	for j := range qts {
		m.pre = append(m.pre, m.pre[j]+qts[j].ub)
		m.idfk = append(m.idfk, qts[j].idf*(s.k1+1))
		m.cur[j].qt, m.cur[j].floor = &qts[j], 0
		m.probes[j].reset(qts[j].list)
	}
}

// split answers the docno at which to split the walk in two, noDoc when
// it is too short to pay for a goroutine: the middle of the longest list
// left to walk, so each half walks about as many postings.
func (m *maxScorer) split() uint32 {
	work, longest := 0, (*plist)(nil)
	for j := m.ess; j < len(m.cur); j++ {
		l := m.cur[j].qt.list
		work += int(l.n)
		if longest == nil || l.n > longest.n {
			longest = l
		}
	}
	if work < splitWork {
		return noDoc
	}
	m.shared = new(atomic.Uint64)
	m.shared.Store(math.Float64bits(m.theta))
	return longest.blocks[len(longest.blocks)/2].first
}

// splitWork is how many postings a search's walked lists must hold for it
// to be split when a core is spare. A split search costs about a tenth more
// processor time: measured at 1M records on memhost bench's corpus, one
// client, splitting from 131,072 postings or from 524,288 cut the p99 alike
// (16.6 to 10.5 and 10.2 ms), at 12% and 10% more CPU a query. A variable
// so tests can split small searches.
var splitWork = 1 << 19

// splitInTurn runs a split search's second half to its end before the
// first (tests): the first then meets the second's whole theta at its
// first poll, which goroutines side by side only now and then do.
var splitInTurn = false

// seed raises theta from zero before the walk, so a query with a rare
// term does not walk its common terms' lists until theta has grown. The
// lists of highest bound are summed term at a time while they hold
// seedWork postings or fewer, until k documents have a sum; those k,
// completed by probing the other lists, are k documents whose lowest
// score the answer's k-th can only pass.
func (m *maxScorer) seed() {
	n := len(m.cur)
	sc, lo, summed := m.sc, n, 0
	for lo > 0 {
		qt := m.cur[lo-1].qt
		if summed+int(qt.list.n) > seedWork {
			break
		}
		walk(m.rm, m.f, m.s, qt, sc, 0, len(qt.list.blocks))
		lo, summed = lo-1, summed+int(qt.list.n)
		scored := 0
		for _, d := range sc.touched {
			if sc.acc[d] > 0 {
				scored++
			}
		}
		if scored >= m.k {
			break
		}
	}
	if lo == n {
		return
	}
	es := bestUnordered(m.rm, sc, sc.touched, nil, m.k)
	if len(es) < m.k {
		return
	}
	slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.doc, b.doc) })
	low := math.Inf(1)
	for _, e := range es {
		score := e.score
		for j := range lo {
			if fr := m.probes[j].find(e.doc); fr > 0 {
				score += m.fast(j, fr, m.rm.dl[e.doc])
			}
		}
		low = min(low, score)
	}
	for j := range lo {
		m.probes[j].reset(m.cur[j].qt.list)
	}
	m.raise(low * (1 - slack))
}

// poll takes the other half's theta when it is higher.
func (m *maxScorer) poll() {
	if m.shared != nil {
		if t := math.Float64frombits(m.shared.Load()); t > m.theta {
			m.raise(t)
		}
	}
}

// raise sets theta, shares it with the other half, and moves the lists it
// puts out of reach from walked to probed.
func (m *maxScorer) raise(theta float64) {
	m.theta = theta
	if m.shared != nil {
		// Positive floats order as their bits do.
		for old := m.shared.Load(); math.Float64frombits(old) < theta; old = m.shared.Load() {
			if m.shared.CompareAndSwap(old, math.Float64bits(theta)) {
				break
			}
		}
	}
	n := len(m.cur)
	for m.ess < n && m.pre[m.ess+1] < m.theta {
		m.ess++
	}
	for j := m.ess; j < n; j++ {
		m.cur[j].floor = m.theta - (m.pre[n] - m.cur[j].qt.ub)
	}
}

// run walks the lists to their end.
func (m *maxScorer) run() {
	n, cur, dl := len(m.cur), m.cur, m.rm.dl
	for {
		// The walked list with the first document, and the next first.
		first, d, next := 0, uint32(noDoc), uint32(noDoc)
		for j := m.ess; j < n; j++ {
			switch c := cur[j].doc; {
			case c < d:
				first, d, next = j, c, d
			case c < next:
				next = c
			}
		}
		if d == noDoc {
			return
		}
		if d < next {
			m.runOne(first, next)
			continue
		}
		score := 0.0
		for j := m.ess; j < n; j++ {
			if c := &cur[j]; c.doc == d {
				score += m.fast(j, c.fs[c.i], dl[d])
				c.next(m)
			}
		}
		if score+m.pre[m.ess] >= m.theta {
			m.consider(d, score)
		}
	}
}

// runOne walks list j, a block at a time, up to docno until, which no
// other walked list holds a document before: only the probed lists can
// add to those documents, so a share must reach theta less their bounds.
// It returns early when theta moves lists from walked to probed.
func (m *maxScorer) runOne(j int, until uint32) {
	c, dl, ess := &m.cur[j], m.rm.dl, m.ess
	idfk, norm0, norm := m.idfk[j], m.norm0, m.norm
	floor := m.theta - m.pre[ess]
	for c.doc < until {
		for ; c.i < c.n; c.i++ {
			d, f := c.docs[c.i], float64(c.fs[c.i])
			if d >= until {
				c.doc = d
				return
			}
			// Asked without dividing: nearly every posting falls short.
			den := f + norm0 + norm*float64(dl[d])
			if idfk*f < floor*den {
				continue
			}
			m.consider(d, idfk*f/den)
			if m.ess != ess {
				c.doc = d
				c.next(m)
				return
			}
			floor = m.theta - m.pre[ess]
		}
		if m.poll(); m.ess != ess {
			c.enter(c.bi+1, m, 0, 0)
			return
		}
		floor = m.theta - m.pre[ess]
		c.enter(c.bi+1, m, floor, until)
	}
}

// consider completes the score of document d, whose walked lists sum to
// score, unless the filters drop it or it falls out of reach, and keeps it
// if it reaches theta.
func (m *maxScorer) consider(d uint32, score float64) {
	// score holds the walked lists' shares as of the caller's ess: a poll
	// that moves lists from walked to probed must not have them probed
	// and added again.
	ess := m.ess
	m.poll()
	if m.excluded && m.sc.acc[d] < 0 || !m.f.pass(d) {
		return
	}
	if ess > 0 && m.theta > 0 {
		reach := score
		for j := range ess {
			reach += m.blockBound(j, d)
		}
		if reach < m.theta {
			return
		}
	}
	for j := ess - 1; j >= 0; j-- {
		if score+m.pre[j+1] < m.theta {
			return
		}
		if fr := m.probes[j].find(d); fr > 0 {
			score += m.fast(j, fr, m.rm.dl[d])
		}
	}
	if score < m.theta {
		return
	}
	m.cands, m.approx = append(m.cands, d), append(m.approx, score)
	h := m.heap
	switch {
	case len(h) < m.k:
		h = append(h, score)
		siftUpF(h, len(h)-1)
	case score > h[0]:
		h[0] = score
		siftDownF(h, 0)
	default:
		return
	}
	m.heap = h
	if len(h) < m.k {
		return
	}
	if t := h[0] * (1 - slack); t > m.theta {
		m.raise(t)
	}
}

// blockBound is the most list j can add to docno d: its block's bound, or
// 0 when no block of the list can hold d.
func (m *maxScorer) blockBound(j int, d uint32) float64 {
	b := m.probes[j].block(d)
	if b == nil || b.first > d {
		return 0
	}
	return m.s.share(m.cur[j].qt.idf, b.maxF, b.minDL)
}

// seedWork is how many postings seed may sum. Measured on the memhost
// bench corpus at 100k and 1M records, paired: a sixteenth of the query's
// postings as well cost a third more at 1M, 1,024 or 16,384 a few percent.
// A variable so tests can turn seeding off (0).
var seedWork = 4096

// goWait runs fn on a goroutine of its own and answers the wait for it. A
// panic in fn is raised again by wait, on the caller's goroutine, where
// the caller's recovery sees it.
func goWait(fn func()) (wait func()) {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		fn()
	}()
	return func() {
		if p := <-done; p != nil {
			panic(p)
		}
	}
}
