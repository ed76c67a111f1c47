package index

import (
	"math"
	"sync"
)

// An exact scan reads, for each scope a query reads, the scope's list of
// int8 copies of its vectors in order (a quarter of the float32 bytes,
// the cost at 100k records being memory rather than arithmetic), and
// bounds each passing document's cosine from its copy. Only the
// documents whose upper bound reaches the depth-th best lower bound can
// be among the depth nearest; their cosines are then computed from the
// float32 vectors by dot, so the top is the one brute force answers, bit
// for bit (TestScanMatchesBruteForce).
//
// A copy is c = round(v/a) with a = max|v_i|/127, so |v_i - a*c_i| <= a/2;
// the query is quantised to int16, d = round(q/b), |q_i - b*d_i| <= b/2,
// and the integer D = sum c_i*d_i is exact. Then
//
//	q.v - a*b*D = sum b*d_i*(v_i - a*c_i) + sum (q_i - b*d_i)*v_i
//
// is at most a*b*sum|d_i|/2 + b*sum|v_i|/2 in size, sum|v_i| <= sqrt(n)
// for a unit v, and dot's float32 sums differ from q.v by at most about
// n*2^-24 (sum|q_i*v_i| <= 1): the bound adds twice that.

// scopeList is one scope's slots and their vectors' int8 copies, each
// padded with zeros to a multiple of 16 components, and per entry the
// slot's document (noDoc: the entry does not count).
type scopeList struct {
	slots  []uint32
	nos    []uint32
	codes  []int8
	scales []float32 // a per copy
}

// padded answers n rounded up to a multiple of 16.
func padded(n int) int { return (n + 15) &^ 15 }

// add lists slot, whose vector is v.
func (l *scopeList) add(slot uint32, v []float32) {
	m := 0.0
	for _, x := range v {
		m = max(m, math.Abs(float64(x)))
	}
	a := float32(m / 127)
	at := len(l.codes)
	l.codes = append(l.codes, make([]int8, padded(len(v)))...)
	if a > 0 {
		for i, x := range v {
			l.codes[at+i] = int8(max(-127, min(127, math.Round(float64(x)/float64(a)))))
		}
	}
	l.slots = append(l.slots, slot)
	l.nos = append(l.nos, noDoc)
	l.scales = append(l.scales, a)
}

// scanScratch is one scan's working memory.
type scanScratch struct {
	q      []int16 // the quantised query's components
	dots   []int32
	passed []passed
	lows   lowHeap
	sink   float32 // touch's sums
}

// passed is a document passing the filters and its cosine's bounds.
type passed struct {
	no, slot uint32
	lo, hi   float64
}

// boundQuery is a query quantised for a scan: d = round(q/b), and the
// terms of the bound on a cosine's distance from its estimate.
type boundQuery struct {
	d        []int16
	b        float64
	perScale float64 // times a copy's scale
	fixed    float64
}

// quantise answers qv (a unit vector) quantised into ss.q, scaled so
// that no sum of products of a copy's and its components overflows int32.
func (ss *scanScratch) quantise(qv []float32) boundQuery {
	pad := padded(len(qv))
	qmax := max(1, min(32767, math.MaxInt32/(127*pad)))
	m := 0.0
	for _, x := range qv {
		m = max(m, math.Abs(float64(x)))
	}
	bq := boundQuery{b: m / float64(qmax)}
	if cap(ss.q) < pad {
		ss.q = make([]int16, pad)
	}
	ss.q = ss.q[:pad]
	clear(ss.q)
	l1 := 0.0
	for i, x := range qv {
		d := math.Round(float64(x) / bq.b)
		ss.q[i] = int16(d)
		l1 += math.Abs(d)
	}
	bq.d = ss.q
	bq.perScale = bq.b * l1 / 2
	bq.fixed = bq.b*math.Sqrt(float64(len(qv)))/2*1.01 + float64(len(qv))*0x1p-23 + 1e-12
	return bq
}

// bounds answers the estimate of the cosine of a copy of scale a whose
// sum of products with bq.d is dot, and how far from it the cosine dot
// computes can be.
func (bq *boundQuery) bounds(a float32, dot int32) (est, err float64) {
	return float64(a) * bq.b * float64(dot), float64(a)*bq.perScale + bq.fixed
}

var scanPool = sync.Pool{New: func() any { return &scanScratch{} }}

// scan appends to docs and cos the documents of s's lists for the scopes
// f reads that pass f, are not excluded and may be among the depth
// nearest qv, with their cosines.
func (s *vecSet) scan(rm *realm, qv []float32, f *filter, excluded map[string]bool, depth int, docs []uint32, cos []float64) ([]uint32, []float64) {
	ss := scanPool.Get().(*scanScratch)
	defer scanPool.Put(ss)
	bq := ss.quantise(qv)
	// floor is the depth-th best lower bound among the documents passed
	// so far, so never above the final one: a copy whose upper bound is
	// under it cannot be among the depth nearest, and is passed over
	// before its document is looked at.
	ss.passed, ss.lows = ss.passed[:0], ss.lows[:0]
	floor := math.Inf(-1)
	for id := range s.byScope {
		if !f.scopeOK[id] {
			continue
		}
		l := &s.byScope[id]
		if cap(ss.dots) < len(l.slots) {
			ss.dots = make([]int32, len(l.slots)+len(l.slots)/4)
		}
		dots := ss.dots[:len(l.slots)]
		dotsI8(l.codes, bq.d, dots)
		nos, scales := l.nos[:len(dots)], l.scales[:len(dots)]
		for i, d := range dots {
			est, err := bq.bounds(scales[i], d)
			if est+err < floor {
				continue
			}
			no := nos[i]
			if no == noDoc || !f.pass(no) || excluded != nil && excluded[rm.ids[no]] {
				continue
			}
			ss.passed = append(ss.passed, passed{no: no, slot: l.slots[i], lo: est - err, hi: est + err})
			if ss.lows.keep(est-err, depth) {
				floor = ss.lows[0]
			}
		}
	}
	// The vectors to score lie anywhere in the set: reading a component
	// of each cache line of all of them first lets their misses overlap,
	// where dot would meet them one at a time.
	for _, p := range ss.passed {
		if p.hi >= floor {
			ss.sink += touch(s.vec(p.slot))
		}
	}
	for _, p := range ss.passed {
		if p.hi >= floor {
			docs = append(docs, p.no)
			cos = append(cos, dot(qv, s.vec(p.slot)))
		}
	}
	return docs, cos
}

// touch reads one component of v per 64-byte cache line (and its last)
// and answers their sum, which the caller keeps so the reads are not
// left out.
func touch(v []float32) float32 {
	if len(v) == 0 {
		return 0
	}
	sum := v[len(v)-1]
	for i := 0; i < len(v); i += 16 {
		sum += v[i]
	}
	return sum
}

// lowHeap is a min-heap of the largest lower bounds seen.
type lowHeap []float64

// keep adds x when the heap holds fewer than k or x beats its least,
// which it then drops; full reports whether the heap holds k.
func (h *lowHeap) keep(x float64, k int) (full bool) {
	if len(*h) < k {
		*h = append(*h, x)
		siftUpF(*h, len(*h)-1)
		return len(*h) == k
	}
	if s := *h; x > s[0] {
		s[0] = x
		siftDownF(s, 0)
	}
	return true
}

// dotsI8Go is dotsI8 in Go: out[j] is the sum of codes[j*len(q)+i]*q[i].
// len(q) is a multiple of 16 and len(codes) is len(out)*len(q).
func dotsI8Go(codes []int8, q []int16, out []int32) {
	for j := range out {
		c := codes[j*len(q) : (j+1)*len(q)]
		var sum int32
		for i, x := range q {
			sum += int32(c[i]) * int32(x)
		}
		out[j] = sum
	}
}
