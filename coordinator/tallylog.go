package coordinator

import (
	"sync"
	"time"
)

// tallyLog decides when a repeated event may be logged again: at most one
// line per key per every, the line carrying the count and calls since the
// last. Past max keys its state is forgotten, which costs at most an extra
// line per key. Its zero value is unusable: set every and max.
type tallyLog[K comparable] struct {
	every time.Duration
	max   int

	mu   sync.Mutex
	seen map[K]*tally
}

type tally struct {
	last         time.Time
	count, calls int
}

// add counts n more for key at now, and answers the count and calls to
// log when a line is due (due false: nothing to log yet).
func (l *tallyLog[K]) add(now time.Time, key K, n int) (count, calls int, due bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil || len(l.seen) >= l.max {
		l.seen = make(map[K]*tally)
	}
	t := l.seen[key]
	if t == nil {
		t = &tally{}
		l.seen[key] = t
	}
	t.count += n
	t.calls++
	if !t.last.IsZero() && now.Sub(t.last) < l.every {
		return 0, 0, false
	}
	count, calls = t.count, t.calls
	t.last, t.count, t.calls = now, 0, 0
	return count, calls, true
}
