// Package fairgate bounds a capacity shared by several tenants (a realm's
// reads of a store's connections, a token's request bodies) and lets
// waiters in by tenant rather than in arrival order: the next one in is
// the first waiter of the key holding the least. Served in arrival order
// alone, one tenant's flood queues in front of every other tenant's
// request; here another tenant waits for one of the flood's to end.
package fairgate

import (
	"context"
	"slices"
	"sync"
)

// Gate is a weighted semaphore admitting by key. The zero value is not
// usable; call New.
type Gate struct {
	mu       sync.Mutex
	capacity int64
	used     int64
	held     map[string]int64 // by key, the keys holding some
	waiting  []*waiter        // in arrival order
}

type waiter struct {
	key   string
	n     int64
	ready chan struct{} // closed once let in
}

// New answers a gate of the given capacity.
func New(capacity int64) *Gate {
	return &Gate{capacity: capacity, held: map[string]int64{}}
}

// Acquire waits, within ctx, until n is let in for key, and answers ctx's
// cause if it ends first. n must not exceed the capacity.
func (g *Gate) Acquire(ctx context.Context, key string, n int64) error {
	w := &waiter{key: key, n: n, ready: make(chan struct{})}
	g.mu.Lock()
	g.waiting = append(g.waiting, w)
	g.letIn()
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-w.ready:
		// Let in as ctx ended: given back, as the caller will not.
		g.giveBack(key, n)
	default:
		g.waiting = slices.DeleteFunc(g.waiting, func(x *waiter) bool { return x == w })
		// It may have been the one the others waited behind.
		g.letIn()
	}
	return context.Cause(ctx)
}

// TryAcquire lets n in for key when it fits and nothing waits.
func (g *Gate) TryAcquire(key string, n int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.waiting) > 0 || g.used+n > g.capacity {
		return false
	}
	g.used += n
	g.held[key] += n
	return true
}

// Waiting answers how many wait to be let in.
func (g *Gate) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.waiting)
}

// Release gives back n that Acquire or TryAcquire let in for key.
func (g *Gate) Release(key string, n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.giveBack(key, n)
}

func (g *Gate) giveBack(key string, n int64) {
	g.used -= n
	if g.held[key] -= n; g.held[key] <= 0 {
		delete(g.held, key)
	}
	g.letIn()
}

// letIn lets waiters in while the next fits. The next is the first waiter
// of the key holding the least; when it does not fit, none after it goes
// first, so a large request is not passed for ever by smaller ones.
func (g *Gate) letIn() {
	for len(g.waiting) > 0 {
		next := 0
		for i, w := range g.waiting {
			if g.held[w.key] < g.held[g.waiting[next].key] {
				next = i
			}
		}
		w := g.waiting[next]
		if g.used+w.n > g.capacity {
			return
		}
		g.used += w.n
		g.held[w.key] += w.n
		g.waiting = slices.Delete(g.waiting, next, next+1)
		close(w.ready)
	}
}
