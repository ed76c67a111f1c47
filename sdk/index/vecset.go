package index

import "math"

// vecSet holds a realm's vectors of one model: unit vectors of dims
// components, numbered by slot in arrival order and kept in chunks of
// chunkVecs that never move (a document's docVec points into one), so a
// scan reads them nearly in order rather than one allocation each.
//
// A slot stays taken when its vector is dropped (owner noDoc): the
// approximate index numbers its nodes by slot. tidyVectors copies the
// live vectors into a fresh set once dropped slots outnumber them.
//
// The slots are also listed by their document's scope, each with a
// coarse int8 copy of its vector (vecscan.go), so a query that reads a
// few scopes (an identity's and the realm's) scans only their vectors,
// and in a quarter of the bytes: a list keeps a slot after its vector is
// dropped or moves to another scope (listed and entry name the one list
// entry that counts), until tidyVectors rebuilds the set. Each entry
// also holds its document's number, noDoc for one that does not count,
// so a scan reads a passing copy's document beside the copy rather than
// through three arrays indexed by slot (a cache miss each).
type vecSet struct {
	dims    int
	n       int // attached vectors
	chunks  [][]float32
	owner   []uint32    // docno per slot; noDoc when detached
	byScope []scopeList // by scope id
	listed  []uint32    // per slot, the scope list that holds it (0: none)
	stale   int         // list entries left behind by a move
	graph   *hnsw       // nil below annThreshold vectors
	// per slot, its entry in the list listed names: a slot that moved
	// away and back is listed there twice, and only this entry counts
	entry []uint32
}

const (
	chunkVecs = 256
	noDoc     = math.MaxUint32
)

// add stores unit (of s.dims components) in a new slot, detached, and
// answers its docVec.
func (s *vecSet) add(model string, unit []float32) *docVec {
	slot := uint32(len(s.owner))
	if slot%chunkVecs == 0 {
		s.chunks = append(s.chunks, make([]float32, 0, chunkVecs*s.dims))
	}
	c := &s.chunks[len(s.chunks)-1]
	off := len(*c)
	*c = append(*c, unit...)
	s.owner = append(s.owner, noDoc)
	s.listed, s.entry = append(s.listed, deadScope), append(s.entry, 0)
	if s.graph != nil {
		s.graph.insert(slot)
	}
	return &docVec{model: model, v: (*c)[off : off+s.dims : off+s.dims], set: s, slot: slot}
}

// vec answers slot's vector.
func (s *vecSet) vec(slot uint32) []float32 {
	off := int(slot%chunkVecs) * s.dims
	return s.chunks[slot/chunkVecs][off : off+s.dims]
}

// attach gives slot to docno no, whose scope id is scope.
func (s *vecSet) attach(slot, no, scope uint32) {
	if s.owner[slot] == noDoc {
		s.n++
	}
	if was := s.listed[slot]; was != scope {
		if was != deadScope {
			s.stale++
			s.byScope[was].nos[s.entry[slot]] = noDoc
		}
		for int(scope) >= len(s.byScope) {
			s.byScope = append(s.byScope, scopeList{})
		}
		s.entry[slot] = uint32(len(s.byScope[scope].slots))
		s.byScope[scope].add(slot, s.vec(slot))
		s.listed[slot] = scope
	}
	s.setOwner(slot, no)
	if s.graph == nil && s.n >= annThreshold {
		s.graph = newHNSW(s)
	}
}

func (s *vecSet) detach(slot uint32) {
	if s.owner[slot] != noDoc {
		s.n--
	}
	s.setOwner(slot, noDoc)
}

// setOwner records no (noDoc: none) as slot's document, in its list
// entry too.
func (s *vecSet) setOwner(slot, no uint32) {
	s.owner[slot] = no
	if l := s.listed[slot]; l != deadScope {
		s.byScope[l].nos[s.entry[slot]] = no
	}
}

// tidyVectors copies each set's live vectors into a fresh one when its
// dropped slots outnumber them (and the approximate index built over
// them is rebuilt); the caller holds the write lock and no vector is
// detached.
func (rm *realm) tidyVectors() {
	for model, s := range rm.models {
		dead := len(s.owner) - s.n + s.stale
		if dead <= 1024 || dead <= s.n {
			continue
		}
		fresh := &vecSet{dims: s.dims}
		rm.models[model] = fresh
		for slot, no := range s.owner {
			if no != noDoc {
				dv := fresh.add(model, s.vec(uint32(slot)))
				rm.vec[no] = dv
				fresh.attach(dv.slot, no, rm.scope[no])
			}
		}
	}
}

// listedIn answers how many list entries the scopes f reads hold: the
// most vectors an exact scan under f scores.
func (s *vecSet) listedIn(f *filter) int {
	n := 0
	for id := range s.byScope {
		if f.scopeOK[id] {
			n += len(s.byScope[id].slots)
		}
	}
	return n
}
