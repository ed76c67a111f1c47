// Package lru is the bounded, least-recently-used map that keeps the
// host's per-session state (coordinator sessions, guide sessions, once-per
// key log suppression) from growing without limit.
package lru

// Cache is a fixed-capacity map that evicts its least recently used entry.
// It is not safe for concurrent use: callers hold their own lock.
type Cache[K comparable, V any] struct {
	capacity   int
	items      map[K]*lruEntry[K, V]
	head, tail *lruEntry[K, V] // head is the most recently used
}

type lruEntry[K comparable, V any] struct {
	key        K
	value      V
	prev, next *lruEntry[K, V]
}

// New makes a cache holding at most capacity entries (at least one).
func New[K comparable, V any](capacity int) *Cache[K, V] {
	return &Cache[K, V]{capacity: max(capacity, 1), items: make(map[K]*lruEntry[K, V])}
}

// Len answers how many entries are kept.
func (l *Cache[K, V]) Len() int { return len(l.items) }

// Get answers the value of k and marks it most recently used.
func (l *Cache[K, V]) Get(k K) (V, bool) {
	e, ok := l.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	l.moveToFront(e)
	return e.value, true
}

// Add inserts or replaces k as the most recently used entry.
func (l *Cache[K, V]) Add(k K, v V) {
	if e, ok := l.items[k]; ok {
		e.value = v
		l.moveToFront(e)
		return
	}
	if len(l.items) >= l.capacity {
		old := l.tail
		l.unlink(old)
		delete(l.items, old.key)
	}
	e := &lruEntry[K, V]{key: k, value: v}
	l.items[k] = e
	l.pushFront(e)
}

func (l *Cache[K, V]) moveToFront(e *lruEntry[K, V]) {
	if l.head == e {
		return
	}
	l.unlink(e)
	l.pushFront(e)
}

func (l *Cache[K, V]) pushFront(e *lruEntry[K, V]) {
	e.prev, e.next = nil, l.head
	if l.head != nil {
		l.head.prev = e
	}
	l.head = e
	if l.tail == nil {
		l.tail = e
	}
}

func (l *Cache[K, V]) unlink(e *lruEntry[K, V]) {
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		l.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		l.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

// Remove forgets k, if kept.
func (l *Cache[K, V]) Remove(k K) {
	if e, ok := l.items[k]; ok {
		l.unlink(e)
		delete(l.items, k)
	}
}

// Oldest answers the least recently used entry without marking it used;
// false when the cache is empty.
func (l *Cache[K, V]) Oldest() (K, V, bool) {
	if l.tail == nil {
		var k K
		var v V
		return k, v, false
	}
	return l.tail.key, l.tail.value, true
}

// RemoveOldest forgets the least recently used entry and answers it;
// false when the cache is empty.
func (l *Cache[K, V]) RemoveOldest() (K, V, bool) {
	e := l.tail
	if e == nil {
		var k K
		var v V
		return k, v, false
	}
	l.unlink(e)
	delete(l.items, e.key)
	return e.key, e.value, true
}
