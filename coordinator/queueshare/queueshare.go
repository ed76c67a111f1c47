// Package queueshare divides the places of a bounded queue that every
// realm's work shares, so that no number of realms flooding it leaves no
// place for a quiet realm: a realm may hold at most half of what the other
// realms leave. One flood holds half the queue, n floods 1/(n+1) each.
package queueshare

import "sync"

// Shares counts the places each realm holds in a queue of a fixed size.
// It is safe for concurrent use.
type Shares struct {
	mu    sync.Mutex
	size  int
	held  map[string]int
	total int
}

// New answers the shares of a queue of size places.
func New(size int) *Shares {
	return &Shares{size: size, held: map[string]int{}}
}

// Hold takes a place for realm, answering false when the realm already
// holds its share; a true answer is given back with Release.
func (s *Shares) Hold(realm string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	others := s.total - s.held[realm]
	if s.held[realm] >= max(1, (s.size-others)/2) {
		return false
	}
	s.held[realm]++
	s.total++
	return true
}

// Release gives back a place Hold took for realm.
func (s *Shares) Release(realm string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[realm] <= 0 {
		return
	}
	s.total--
	if s.held[realm]--; s.held[realm] == 0 {
		delete(s.held, realm)
	}
}
