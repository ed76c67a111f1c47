package index

import "slices"

// Documents are numbered in arrival order, so one scope's documents lie
// spread over every block of a common term's list: a query of one
// identity's scope and the realm's finds a document it may read in nearly
// every block, and walks the list whole. Cluster renumbers the documents
// that arrived since its last call in scope order (arrival order within a
// scope), after those it renumbered before: a realm becomes a few runs in
// scope order, a block holds one scope's documents or two, and a walk
// passes over the blocks of the scopes a query does not read by their
// scope bits alone. Only the newer documents move, so a call costs what
// they hold, not what the realm does.
//
// Renumbering changes no answer: equal scores are ordered by Doc.Seq, not
// by docno, and every docno-keyed structure moves with its document.

// clusterMin is the fewest documents out of scope order for which Cluster
// renumbers a realm. A variable so tests can cluster small realms.
var clusterMin = 8192

// clusterBuilt, when set (tests), runs after a realm's new numbering is
// built and before it is installed.
var clusterBuilt func(realm string)

// Cluster renumbers in scope order the documents that arrived since it
// last did, in each realm where they are at least 8,192 and at least
// share of its documents, and answers how many realms it renumbered. The
// new numbering is built under the read lock and installed under the
// write lock; a realm changed between the two, by a write that slipped
// in, is left for a later call. Searches go on while it builds unless a
// write arrives: the write waits for the build, and searches queue behind
// the write. So a caller holds its own writes back meanwhile, beside its
// snapshots say, where they wait already; a call costs about as much as
// encoding the documents it moves.
func (ix *Index) Cluster(share float64) int {
	ix.mu.RLock()
	var names []string
	for name, rm := range ix.realms {
		if rm.wantsCluster(share) {
			names = append(names, name)
		}
	}
	ix.mu.RUnlock()
	slices.Sort(names)
	n := 0
	for _, name := range names {
		if ix.clusterRealm(name, share) {
			n++
		}
	}
	return n
}

// Unclustered answers how many of realm's document slots lie after its
// runs in scope order: those Cluster renumbers (dropping the deleted ones)
// once they are enough.
func (ix *Index) Unclustered(realm string) int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if rm := ix.realms[realm]; rm != nil {
		return len(rm.ids) - rm.clustered
	}
	return 0
}

func (rm *realm) wantsCluster(share float64) bool {
	out := len(rm.ids) - rm.clustered
	return out > 0 && out >= clusterMin && float64(out) >= share*float64(len(rm.ids))
}

func (ix *Index) clusterRealm(name string, share float64) bool {
	ix.mu.RLock()
	rm := ix.realms[name]
	if rm == nil || !rm.wantsCluster(share) {
		ix.mu.RUnlock()
		return false
	}
	gen, next := rm.gen, rm.clusterTail()
	ix.mu.RUnlock()
	if clusterBuilt != nil {
		clusterBuilt(name)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.realms[name] != rm || rm.gen != gen {
		return false
	}
	next.install(rm)
	return true
}

// findRuns sets clustered past the runs of at least runMin documents in
// scope order that a realm decoded from a snapshot starts with: the runs
// Cluster made (each of at least clusterMin documents when it made them).
// Documents in arrival order hardly ever make such a run, and the first
// short run ends the runs, so documents after it that happen to make one
// (a session of one identity's) are renumbered with the rest.
func (rm *realm) findRuns() {
	const runMin = 2 * blockSize
	rm.clustered, rm.lastScope = 0, 0
	start := 0
	for i := 1; i <= len(rm.scope); i++ {
		if i < len(rm.scope) && rm.scope[i] >= rm.scope[i-1] {
			continue
		}
		if i-start < runMin {
			return
		}
		rm.clustered, rm.lastScope, start = i, rm.scope[i-1], i
	}
}

// clustering is the new numbering of a realm's documents from docno from
// on (its tail), built beside the realm: the tail's documents in their
// new order, and per posting list its postings from the first block that
// holds a tail document.
type clustering struct {
	from    uint32
	moves   []move // by docno - from
	dropped int    // deleted slots in the tail, which it leaves out
	ids     []string
	scope   []uint32
	dl      []uint32
	expires []int64
	when    []int64
	seq     []uint64
	vec     []*docVec
	tags    spans[uint32]
	terms   spans[byte]
	lists   []listTail // by term id
}

// move is where a tail docno goes (noDoc: a deleted slot, dropped), with
// its scope id and length: what its postings need, side by side so that
// renumbering a rare term's postings, spread over the tail, misses the
// cache once a posting rather than three times.
type move struct{ no, scope, dl uint32 }

// listTail is a posting list's part from block at on, renumbered, with
// offsets from its start; at < 0 when the list holds no tail document.
type listTail struct {
	at      int
	part    plist
	dropped int32 // postings of deleted documents left out
	// repeak is set when a dropped posting's (frequency, length) pair is
	// one of the list's peaks, and peaks are then the whole list's anew:
	// a snapshot must not hold a peak no posting has.
	repeak bool
	peaks  []peak
}

// clusterTail numbers rm's live tail documents (from rm.clustered on) in
// scope order, arrival order within a scope, leaving rm as it is; the
// caller holds the read lock.
func (rm *realm) clusterTail() *clustering {
	from := uint32(rm.clustered)
	tail := rm.scope[from:]
	c := &clustering{from: from, moves: make([]move, len(tail))}
	// A counting sort by scope id: next[s] is scope s's next docno.
	next := make([]uint32, len(rm.scopeNames))
	for _, s := range tail {
		switch {
		case s == deadScope:
			c.dropped++
		case int(s)+1 < len(next):
			next[s+1]++
		}
	}
	next[0] = from
	for s := 1; s < len(next); s++ {
		next[s] += next[s-1]
	}
	order := make([]uint32, len(tail)-c.dropped) // new docno - from to old docno
	for i, s := range tail {
		if s == deadScope {
			c.moves[i] = move{noDoc, s, 0}
			continue
		}
		d := from + uint32(i)
		nd := next[s]
		next[s]++
		c.moves[i], order[nd-from] = move{nd, s, rm.dl[d]}, d
	}
	n := len(order)
	c.ids, c.scope, c.dl = make([]string, n), make([]uint32, n), make([]uint32, n)
	c.expires, c.when, c.seq, c.vec = make([]int64, n), make([]int64, n), make([]uint64, n), make([]*docVec, n)
	for nd, d := range order {
		c.ids[nd], c.scope[nd], c.dl[nd] = rm.ids[d], rm.scope[d], rm.dl[d]
		c.expires[nd], c.when[nd], c.seq[nd], c.vec[nd] = rm.expires[d], rm.when[d], rm.seq[d], rm.vec[d]
	}
	c.tags, c.terms = rm.tags.permute(order), rm.terms.permute(order)
	c.lists = make([]listTail, len(rm.lists))
	var ps permuteScratch
	for t := range rm.lists {
		c.lists[t] = rm.lists[t].permuteTail(from, c.moves, rm.scope, rm.dl, &ps)
	}
	return c
}

// install puts c in place of rm's tail; the caller holds the write lock,
// and rm is unchanged since c was built from it. It costs what the tail
// holds: the realm's documents before it stay where they are.
func (c *clustering) install(rm *realm) {
	from := c.from
	for nd, id := range c.ids {
		rm.byID[id] = from + uint32(nd)
	}
	for _, s := range rm.models {
		for slot, no := range s.owner {
			if no != noDoc && no >= from {
				s.setOwner(uint32(slot), c.moves[no-from].no)
			}
		}
	}
	rm.ids, rm.scope, rm.dl = append(rm.ids[:from], c.ids...), append(rm.scope[:from], c.scope...), append(rm.dl[:from], c.dl...)
	rm.expires, rm.when = append(rm.expires[:from], c.expires...), append(rm.when[:from], c.when...)
	rm.seq, rm.vec = append(rm.seq[:from], c.seq...), append(rm.vec[:from], c.vec...)
	clear(rm.vec[len(rm.vec):cap(rm.vec)]) // what the dropped slots held
	clear(rm.ids[len(rm.ids):cap(rm.ids)])
	rm.tags.splice(from, c.tags)
	rm.terms.splice(from, c.terms)
	for t := range c.lists {
		if lt := &c.lists[t]; lt.at >= 0 {
			rm.lists[t].splice(lt)
		}
	}
	rm.dead -= c.dropped
	rm.clustered = len(rm.ids)
	if len(c.scope) > 0 {
		rm.lastScope = c.scope[len(c.scope)-1]
	}
	rm.gen++
}

// splice puts tail's lists in place of those from docno from on.
func (s *spans[T]) splice(from uint32, tail spans[T]) {
	base := uint32(0)
	if from > 0 {
		base = s.end[from-1]
	}
	s.data = append(s.data[:base], tail.data...)
	s.end = s.end[:from]
	for _, e := range tail.end {
		s.end = append(s.end, base+e)
	}
}

// permuteScratch is permuteTail's working memory, kept across lists.
type permuteScratch struct {
	moved, sorted []move    // per tail posting: its document's move
	fs, sortedF   []float32 // per tail posting: its frequency
	at            []uint32  // by scope id: its next place in sorted; 0 between lists
	scopes        []uint32  // the scope ids the list's tail holds
}

// permuteTail answers l's postings from the block that holds its first
// docno at or past from on, the tail's renumbered by moves (a move to
// noDoc drops a posting). The new numbering is scope order and keeps each
// scope's documents in their order: the renumbered postings of one scope
// already ascend, so a counting sort by scope puts them all in order.
// scope and dl are by docno, for the postings before from.
func (l *plist) permuteTail(from uint32, moves []move, scope, dl []uint32, ps *permuteScratch) listTail {
	at := l.seek(from, 0)
	if at == len(l.blocks) {
		return listTail{at: -1}
	}
	lt := listTail{at: at}
	// The part holds about the bytes and blocks it replaces.
	lt.part.data = make([]byte, 0, len(l.data)-int(l.blocks[at].off))
	lt.part.blocks = make([]pblock, 0, len(l.blocks)-at)
	ps.moved, ps.fs, ps.scopes = ps.moved[:0], ps.fs[:0], ps.scopes[:0]
	var docs [blockSize]uint32
	var fs [blockSize]float32
	for bi := at; bi < len(l.blocks); bi++ {
		for k := range l.decode(bi, &docs, &fs) {
			d := docs[k]
			if d < from { // the first block's postings before the tail stay first
				lt.part.add(d, fs[k], dl[d], scope[d])
				continue
			}
			m := moves[d-from]
			if m.no == noDoc {
				lt.dropped++
				lt.repeak = lt.repeak || slices.Contains(l.peaks, peak{fs[k], dl[d]})
				continue
			}
			for int(m.scope) >= len(ps.at) {
				ps.at = append(ps.at, 0)
			}
			if ps.at[m.scope] == 0 {
				ps.scopes = append(ps.scopes, m.scope)
			}
			ps.at[m.scope]++
			ps.moved, ps.fs = append(ps.moved, m), append(ps.fs, fs[k])
		}
	}
	slices.Sort(ps.scopes)
	next := uint32(0)
	for _, s := range ps.scopes {
		next, ps.at[s] = next+ps.at[s], next
	}
	n := len(ps.moved)
	ps.sorted, ps.sortedF = slices.Grow(ps.sorted[:0], n)[:n], slices.Grow(ps.sortedF[:0], n)[:n]
	for i, m := range ps.moved {
		at := &ps.at[m.scope]
		ps.sorted[*at], ps.sortedF[*at] = m, ps.fs[i]
		*at++
	}
	for _, s := range ps.scopes {
		ps.at[s] = 0
	}
	for i, m := range ps.sorted {
		lt.part.add(m.no, ps.sortedF[i], m.dl, m.scope)
	}
	if lt.repeak {
		whole := plist{peaks: slices.Clone(lt.part.peaks)}
		for bi := range at {
			for k := range l.decode(bi, &docs, &fs) {
				whole.addPeak(fs[k], dl[docs[k]])
			}
		}
		lt.peaks = whole.peaks
	}
	return lt
}

// splice puts lt's part in place of l's blocks from lt.at on. Its
// postings are those blocks' less the dropped ones, so the list's live
// count stands, and so do its peaks unless a dropped posting was one.
func (l *plist) splice(lt *listTail) {
	base := l.blocks[lt.at].off
	l.data = append(l.data[:base], lt.part.data...)
	l.blocks = l.blocks[:lt.at]
	for _, b := range lt.part.blocks {
		b.off += base
		l.blocks = append(l.blocks, b)
	}
	if lt.repeak {
		l.peaks = lt.peaks
	}
	l.n = int32(lt.at*blockSize) + lt.part.n
	l.dead -= lt.dropped
}
