// Package queueshare divides the places of a bounded queue that every
// realm's work shares, so that no number of realms flooding it leaves no
// place for a quiet realm: a realm may hold at most half of what the other
// realms leave. One flood holds half the queue, n floods 1/(n+1) each.
//
// Work that names its identity (HoldFor) is shared by identity as well,
// so one identity's flood leaves room for its realm's other identities:
// a realm's identities together hold at most three quarters of what the
// other realms leave, and within that an identity at most half of what
// its realm's others leave. A lone identity holds three eighths of the
// queue, the next in its realm three sixteenths, and so on, each
// newcomer to a flooded realm finding room until the places run out;
// another realm's newcomer always finds room.
package queueshare

import "sync"

// Shares counts the places each realm, and each identity within it,
// holds in a queue of a fixed size. It is safe for concurrent use.
type Shares struct {
	mu     sync.Mutex
	size   int
	total  int
	realms map[string]*realmPlaces
}

// realmPlaces is what one realm holds: in all, the places Hold took, and
// by identity the places HoldFor took.
type realmPlaces struct {
	held, plain int
	identities  map[string]int
}

// New answers the shares of a queue of size places.
func New(size int) *Shares {
	return &Shares{size: size, realms: map[string]*realmPlaces{}}
}

// Hold takes a place for realm, answering false when the realm already
// holds its share; a true answer is given back with Release.
func (s *Shares) Hold(realm string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.realms[realm]
	if !s.realmHasRoom(r) {
		return false
	}
	s.take(realm, r).plain++
	return true
}

// HoldFor takes a place for identity of realm, answering false when the
// realm or the identity already holds its share; a true answer is given
// back with ReleaseFor.
func (s *Shares) HoldFor(realm, identity string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.realms[realm]
	if r != nil {
		// Three quarters, not half as Hold's: the realm's share is split
		// again among its identities, halving at each newcomer.
		share := max(1, 3*(s.size-(s.total-r.held))/4)
		mine := r.identities[identity]
		if r.held >= share || mine >= max(1, (share-(r.held-mine))/2) {
			return false
		}
	}
	s.take(realm, r).identities[identity]++
	return true
}

// realmHasRoom reports whether the realm of r holds less than half of
// what the other realms leave.
func (s *Shares) realmHasRoom(r *realmPlaces) bool {
	return r == nil || r.held < max(1, (s.size-(s.total-r.held))/2)
}

// take counts one more place for realm and answers its record (made when
// it held none) for the caller to count the place's kind.
func (s *Shares) take(realm string, r *realmPlaces) *realmPlaces {
	if r == nil {
		r = &realmPlaces{identities: map[string]int{}}
		s.realms[realm] = r
	}
	r.held++
	s.total++
	return r
}

// Release gives back a place Hold took for realm.
func (s *Shares) Release(realm string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.realms[realm]
	if r == nil || r.plain <= 0 {
		return // no place Hold took
	}
	r.plain--
	s.give(realm, r)
}

// ReleaseFor gives back a place HoldFor took for identity of realm.
func (s *Shares) ReleaseFor(realm, identity string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.realms[realm]
	if r == nil || r.identities[identity] <= 0 {
		return
	}
	if r.identities[identity]--; r.identities[identity] == 0 {
		delete(r.identities, identity)
	}
	s.give(realm, r)
}

func (s *Shares) give(realm string, r *realmPlaces) {
	s.total--
	if r.held--; r.held == 0 {
		delete(s.realms, realm)
	}
}
