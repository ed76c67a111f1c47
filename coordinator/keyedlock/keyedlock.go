// Package keyedlock is a mutex per key whose waiters give up with their
// context, holding an entry only while the key is held or waited for.
package keyedlock

import (
	"context"
	"sync"
)

// Lock is a mutex per key; its zero value is ready.
type Lock[K comparable] struct {
	mu sync.Mutex
	m  map[K]*entry
}

type entry struct {
	sem  chan struct{}
	refs int // holders and waiters
}

// Lock waits, within ctx, to hold key, and answers the func that lets it
// go; it answers ctx's error when ctx ends first.
func (l *Lock[K]) Lock(ctx context.Context, key K) (func(), error) {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[K]*entry{}
	}
	e := l.m[key]
	if e == nil {
		e = &entry{sem: make(chan struct{}, 1)}
		l.m[key] = e
	}
	e.refs++
	l.mu.Unlock()
	release := func() {
		l.mu.Lock()
		if e.refs--; e.refs == 0 {
			delete(l.m, key)
		}
		l.mu.Unlock()
	}
	select {
	case e.sem <- struct{}{}:
		return func() { <-e.sem; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// Len answers how many keys are held or waited for.
func (l *Lock[K]) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.m)
}
