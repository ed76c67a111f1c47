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
// padded with zeros to a multiple of 16 components.
type scopeList struct {
	slots  []uint32
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
	l.scales = append(l.scales, a)
}

// scanScratch is one scan's working memory.
type scanScratch struct {
	q      []int16
	dots   []int32
	passed []passed
}

// passed is a document passing the filters and its cosine's bounds.
type passed struct {
	no, slot uint32
	lo, hi   float64
}

var scanPool = sync.Pool{New: func() any { return &scanScratch{} }}

// scan appends to docs and cos the documents of s's lists for the scopes
// f reads that pass f, are not excluded and may be among the depth
// nearest qv, with their cosines.
func (s *vecSet) scan(rm *realm, qv []float32, f *filter, excluded map[string]bool, depth int, docs []uint32, cos []float64) ([]uint32, []float64) {
	ss := scanPool.Get().(*scanScratch)
	defer scanPool.Put(ss)
	pad := padded(s.dims)
	// The query in int16, scaled so no sum of products overflows int32.
	qmax := max(1, min(32767, math.MaxInt32/(127*pad)))
	m := 0.0
	for _, x := range qv {
		m = max(m, math.Abs(float64(x)))
	}
	b := m / float64(qmax)
	if cap(ss.q) < pad {
		ss.q = make([]int16, pad)
	}
	ss.q = ss.q[:pad]
	clear(ss.q)
	l1 := 0.0
	for i, x := range qv {
		d := math.Round(float64(x) / b)
		ss.q[i] = int16(d)
		l1 += math.Abs(d)
	}
	perScale := b * l1 / 2 // times a copy's scale
	fixed := b*math.Sqrt(float64(s.dims))/2*1.01 + float64(s.dims)*0x1p-23 + 1e-12
	ss.passed = ss.passed[:0]
	for id := range s.byScope {
		if !f.scopeOK[id] {
			continue
		}
		l := &s.byScope[id]
		if cap(ss.dots) < len(l.slots) {
			ss.dots = make([]int32, len(l.slots)+len(l.slots)/4)
		}
		dots := ss.dots[:len(l.slots)]
		dotsI8(l.codes, ss.q, dots)
		for i, slot := range l.slots {
			no := s.owner[slot]
			if no == noDoc || s.listed[slot] != uint32(id) || !f.pass(no) || excluded != nil && excluded[rm.ids[no]] {
				continue
			}
			a := float64(l.scales[i])
			est, err := a*b*float64(dots[i]), a*perScale+fixed
			ss.passed = append(ss.passed, passed{no: no, slot: slot, lo: est - err, hi: est + err})
		}
	}
	floor := math.Inf(-1)
	if len(ss.passed) > depth {
		floor = kthLargestLo(ss.passed, depth)
	}
	for _, p := range ss.passed {
		if p.hi >= floor {
			docs = append(docs, p.no)
			cos = append(cos, dot(qv, s.vec(p.slot)))
		}
	}
	return docs, cos
}

// kthLargestLo answers the k-th largest lower bound of ps (k <= len(ps)),
// through a min-heap of the k largest kept in ss.heap.
func kthLargestLo(ps []passed, k int) float64 {
	h := make([]float64, 0, k)
	for _, p := range ps {
		x := p.lo
		if len(h) < k {
			h = append(h, x)
			for c := len(h) - 1; c > 0; {
				up := (c - 1) / 2
				if h[up] <= h[c] {
					break
				}
				h[up], h[c] = h[c], h[up]
				c = up
			}
			continue
		}
		if x <= h[0] {
			continue
		}
		h[0] = x
		for i := 0; ; {
			c := 2*i + 1
			if c >= len(h) {
				break
			}
			if r := c + 1; r < len(h) && h[r] < h[c] {
				c = r
			}
			if h[i] <= h[c] {
				break
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	return h[0]
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
