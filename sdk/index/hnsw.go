package index

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
)

// hnsw is an approximate nearest-neighbour index (a hierarchical navigable
// small-world graph) over a vecSet's slots, by cosine. It is built when a
// set reaches annThreshold vectors and grown on every add; it is not kept
// in snapshots but built again as a decoded realm's vectors are added.
// Its levels come from a generator seeded the same for every set, so a
// set built by the same adds is the same graph and answers the same.
//
// A dropped vector stays a node (its slot's owner is noDoc): it still
// routes searches but is never answered; tidyVectors rebuilds the set and
// its graph once dropped slots outnumber live ones.
type hnsw struct {
	set   *vecSet
	links [][][]uint32  // per slot, per level, the neighbours' slots
	sims  [][][]float32 // their cosines with the slot, best first
	entry uint32
	top   int // the entry's level
	rng   *rand.Rand
}

// annThreshold is the vector count from which a set keeps a graph, and
// from which the vectors a query's scopes list are searched through it
// rather than scanned (docs/benchmarks.md has the measurements). A
// variable so tests can build graphs over small sets.
var annThreshold = 40_000

const (
	hnswM  = 12 // neighbours per node above level 0
	hnswM0 = 24 // at level 0
	// hnswEf is the least search breadth; a search for k keeps at least
	// k candidates.
	hnswEf = 64
)

// hnswEfBuild is the candidates kept while inserting. Measured at 100k
// clustered vectors of 100 dimensions (docs/benchmarks.md), 40 left
// recall@10 at 0.970 at search breadth 100 (0.985 at 300: nodes the graph
// no longer reaches, not a search too narrow), 48 at 0.973, 56 at 0.994
// and 64 at 0.9995; 384 dimensions needed 64 too.
const hnswEfBuild = 64

func newHNSW(s *vecSet) *hnsw {
	g := &hnsw{set: s, rng: rand.New(rand.NewPCG(0x6d656d68, 0x6f7374))}
	for slot := range s.owner {
		g.insert(uint32(slot))
	}
	return g
}

// cand is a slot and its cosine with the query.
type cand struct {
	sim  float32
	slot uint32
}

func (g *hnsw) level() int {
	return int(-math.Log(1-g.rng.Float64()) / math.Log(hnswM))
}

// insert adds slot, whose vector is stored, as a node.
func (g *hnsw) insert(slot uint32) {
	lv := g.level()
	g.links = append(g.links, make([][]uint32, lv+1))
	g.sims = append(g.sims, make([][]float32, lv+1))
	if slot == 0 {
		g.entry, g.top = 0, lv
		return
	}
	q := g.set.vec(slot)
	ep := []cand{{float32(dot(q, g.set.vec(g.entry))), g.entry}}
	for l := g.top; l > lv; l-- {
		ep = g.greedy(q, ep[0], l)
	}
	v := getVisited(len(g.links))
	defer visitedPool.Put(v)
	for l := min(lv, g.top); l >= 0; l-- {
		found := g.searchLayer(q, ep, hnswEfBuild, l, nil, v, 0)
		m := hnswM
		if l == 0 {
			m = hnswM0
		}
		nb := g.selectNeighbours(found, m)
		g.links[slot][l] = make([]uint32, len(nb))
		g.sims[slot][l] = make([]float32, len(nb))
		for i, c := range nb {
			g.links[slot][l][i], g.sims[slot][l][i] = c.slot, c.sim
			g.connect(c, slot, l, m)
		}
		ep = found
	}
	if lv > g.top {
		g.entry, g.top = slot, lv
	}
}

// connect adds to, at cosine c.sim, to c.slot's neighbours at level l.
// A list may grow to half again m before it is cut back to m by the
// diversity rule of selectNeighbours, which so runs once per m/2 links
// rather than on every one (it costs up to m² cosines; the cosines kept
// with the links spare the rest).
func (g *hnsw) connect(c cand, to uint32, l, m int) {
	nb, sims := g.links[c.slot][l], g.sims[c.slot][l]
	if len(nb) < m+m/2 {
		at := len(sims)
		for at > 0 && sims[at-1] < c.sim {
			at--
		}
		nb, sims = append(nb, 0), append(sims, 0)
		copy(nb[at+1:], nb[at:])
		copy(sims[at+1:], sims[at:])
		nb[at], sims[at] = to, c.sim
		g.links[c.slot][l], g.sims[c.slot][l] = nb, sims
		return
	}
	cs := make([]cand, 0, len(nb)+1)
	for i, n := range nb {
		cs = append(cs, cand{sims[i], n})
	}
	cs = append(cs, cand{c.sim, to})
	sortCands(cs)
	kept := g.selectNeighbours(cs, m)
	nb, sims = nb[:len(kept)], sims[:len(kept)]
	for i, k := range kept {
		nb[i], sims[i] = k.slot, k.sim
	}
	g.links[c.slot][l], g.sims[c.slot][l] = nb, sims
}

// selectNeighbours keeps up to m of cs (best first), preferring those
// nearer the query than to any already kept, so links reach out in
// several directions (which keeps clustered data connected); it fills up
// with the best of the rest.
func (g *hnsw) selectNeighbours(cs []cand, m int) []cand {
	out := make([]cand, 0, m)
	var skipped []cand
	for _, c := range cs {
		if len(out) == m {
			break
		}
		cv, keep := g.set.vec(c.slot), true
		for _, o := range out {
			if float32(dot(cv, g.set.vec(o.slot))) > c.sim {
				keep = false
				break
			}
		}
		if keep {
			out = append(out, c)
		} else {
			skipped = append(skipped, c)
		}
	}
	out = append(out, skipped[:min(len(skipped), m-len(out))]...)
	sortCands(out)
	return out
}

// greedy walks level l from ep to the node nearest q it can reach.
func (g *hnsw) greedy(q []float32, ep cand, l int) []cand {
	for moved := true; moved; {
		moved = false
		for _, n := range g.links[ep.slot][l] {
			if s := float32(dot(q, g.set.vec(n))); s > ep.sim {
				ep, moved = cand{s, n}, true
			}
		}
	}
	return []cand{ep}
}

// search answers up to k slots nearest q that accept passes, best first,
// searching level 0 with breadth ef. Rejected nodes still route the
// search. It gives up (ok false) after budget cosines, so a filter that
// passes few documents costs no more than brute force would.
func (g *hnsw) search(q []float32, k, ef, budget int, accept func(slot uint32) bool) (out []cand, ok bool) {
	ep := cand{float32(dot(q, g.set.vec(g.entry))), g.entry}
	for l := g.top; l > 0; l-- {
		ep = g.greedy(q, ep, l)[0]
	}
	v := getVisited(len(g.links))
	defer visitedPool.Put(v)
	found := g.searchLayer(q, []cand{ep}, max(ef, k), 0, accept, v, budget)
	if found == nil {
		return nil, false
	}
	return found[:min(k, len(found))], true
}

// searchLayer answers the ef best nodes of level l reachable from ep that
// accept (nil: all) passes, best first; nil when budget (0: none) runs out.
func (g *hnsw) searchLayer(q []float32, ep []cand, ef, l int, accept func(uint32) bool, v *visited, budget int) []cand {
	v.next()
	var cands, res candHeap // cands: best on top; res: worst on top
	for _, e := range ep {
		v.mark[e.slot] = v.epoch
		cands.push(cand{-e.sim, e.slot})
		if accept == nil || accept(e.slot) {
			res.push(e)
		}
	}
	spent := 0
	for len(cands) > 0 {
		c := cands.pop()
		if len(res) >= ef && -c.sim < res[0].sim {
			break
		}
		for _, n := range g.links[c.slot][l] {
			if v.mark[n] == v.epoch {
				continue
			}
			v.mark[n] = v.epoch
			s := float32(dot(q, g.set.vec(n)))
			if spent++; budget > 0 && spent > budget {
				return nil
			}
			if len(res) < ef || s > res[0].sim {
				cands.push(cand{-s, n})
				if accept == nil || accept(n) {
					res.push(cand{s, n})
					if len(res) > ef {
						res.pop()
					}
				}
			}
		}
	}
	out := []cand(res)
	sortCands(out)
	return out
}

// sortCands orders cs best first, ties by slot.
func sortCands(cs []cand) {
	slices.SortFunc(cs, func(a, b cand) int {
		if c := cmp.Compare(b.sim, a.sim); c != 0 {
			return c
		}
		return cmp.Compare(a.slot, b.slot)
	})
}

// candHeap is a min-heap by sim (then slot, so ties are deterministic).
type candHeap []cand

func less(a, b cand) bool { return a.sim < b.sim || a.sim == b.sim && a.slot > b.slot }

func (h *candHeap) push(c cand) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !less(s[i], s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *candHeap) pop() cand {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		if r := l + 1; r < len(s) && less(s[r], s[l]) {
			l = r
		}
		if !less(s[l], s[i]) {
			break
		}
		s[i], s[l] = s[l], s[i]
		i = l
	}
	*h = s
	return top
}

// visited marks the nodes one search has reached: mark[slot] == epoch.
type visited struct {
	mark  []uint32
	epoch uint32
}

var visitedPool sync.Pool // *visited

func getVisited(n int) *visited {
	v, _ := visitedPool.Get().(*visited)
	if v == nil {
		v = &visited{}
	}
	if len(v.mark) < n {
		v.mark = make([]uint32, n+n/4)
		v.epoch = 0
	}
	return v
}

func (v *visited) next() {
	if v.epoch++; v.epoch == 0 {
		clear(v.mark)
		v.epoch = 1
	}
}
