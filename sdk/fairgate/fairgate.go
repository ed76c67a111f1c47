// Package fairgate bounds a capacity shared by several tenants (a realm's
// reads of a store's connections, a token's request bodies) and lets
// waiters in by tenant rather than in arrival order: the next one in is
// the first waiter of the key holding the least, and among keys holding
// equally little, of the key let in least recently. Served in arrival
// order alone, one tenant's flood queues in front of every other tenant's
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
	keys     map[string]*keyState // the keys holding some or waiting
	waiting  []*waiter            // in arrival order
	lets     uint64               // waiters let in so far
}

type keyState struct {
	held    int64
	waiting int
	// letIn is lets when the key was last let in. At a capacity of one
	// every key holds nothing when the slot frees: without it, a flooding
	// key's earlier arrivals would all go before another key's request.
	letIn uint64
}

type waiter struct {
	key   string
	n     int64
	ready chan struct{} // closed once let in
}

// New answers a gate of the given capacity.
func New(capacity int64) *Gate {
	return &Gate{capacity: capacity, keys: map[string]*keyState{}}
}

// Acquire waits, within ctx, until n is let in for key, and answers ctx's
// cause if it ends first. n must not exceed the capacity.
func (g *Gate) Acquire(ctx context.Context, key string, n int64) error {
	w := &waiter{key: key, n: n, ready: make(chan struct{})}
	g.mu.Lock()
	g.waiting = append(g.waiting, w)
	g.key(key).waiting++
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
		g.keys[key].waiting--
		g.forget(key)
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
	g.admit(g.key(key), n)
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
	k := g.keys[key]
	if k == nil || k.held < n {
		// As semaphore.Weighted does: the count would be wrong from here on.
		panic("fairgate: released more than the key holds")
	}
	g.used -= n
	k.held -= n
	g.forget(key)
	g.letIn()
}

// key answers key's state, adding it.
func (g *Gate) key(key string) *keyState {
	k := g.keys[key]
	if k == nil {
		k = &keyState{}
		g.keys[key] = k
	}
	return k
}

// forget drops key's state once it holds nothing and waits for nothing,
// so the map stays as small as the gate's traffic.
func (g *Gate) forget(key string) {
	if k := g.keys[key]; k.held <= 0 && k.waiting == 0 {
		delete(g.keys, key)
	}
}

func (g *Gate) admit(k *keyState, n int64) {
	k.held += n
	g.lets++
	k.letIn = g.lets
}

// letIn lets waiters in while the next fits. The next is the first waiter
// of the key holding the least, the one let in least recently among
// equals; when it does not fit, none after it goes first, so a large
// request is not passed for ever by smaller ones.
func (g *Gate) letIn() {
	for len(g.waiting) > 0 {
		next := 0
		best := g.keys[g.waiting[0].key]
		for i, w := range g.waiting[1:] {
			k := g.keys[w.key]
			if k.held < best.held || k.held == best.held && k.letIn < best.letIn {
				next, best = i+1, k
			}
		}
		w := g.waiting[next]
		if g.used+w.n > g.capacity {
			return
		}
		g.used += w.n
		best.waiting--
		g.admit(best, w.n)
		g.waiting = slices.Delete(g.waiting, next, next+1)
		close(w.ready)
	}
}
