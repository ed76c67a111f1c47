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
type vecSet struct {
	dims   int
	n      int // attached vectors
	chunks [][]float32
	owner  []uint32 // docno per slot; noDoc when detached
	graph  *hnsw    // nil below annThreshold vectors
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

func (s *vecSet) attach(slot, no uint32) {
	if s.owner[slot] == noDoc {
		s.n++
	}
	s.owner[slot] = no
	if s.graph == nil && s.n >= annThreshold {
		s.graph = newHNSW(s)
	}
}

func (s *vecSet) detach(slot uint32) {
	if s.owner[slot] != noDoc {
		s.n--
	}
	s.owner[slot] = noDoc
}

// tidyVectors copies each set's live vectors into a fresh one when its
// dropped slots outnumber them (and the approximate index built over
// them is rebuilt); the caller holds the write lock and no vector is
// detached.
func (rm *realm) tidyVectors() {
	for model, s := range rm.models {
		dead := len(s.owner) - s.n
		if dead <= 1024 || dead <= s.n {
			continue
		}
		fresh := &vecSet{dims: s.dims}
		rm.models[model] = fresh
		for slot, no := range s.owner {
			if no != noDoc {
				dv := fresh.add(model, s.vec(uint32(slot)))
				rm.vec[no] = dv
				fresh.attach(dv.slot, no)
			}
		}
	}
}
