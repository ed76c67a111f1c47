package coordinator

import (
	"sync"
	"time"
)

// tallyLog decides when a repeated event may be logged again: at most one
// line per key per every, the line carrying the count and calls since the
// last. Past max keys its state is forgotten, which costs at most an extra
// line per key. However many keys there are (identities, realms), at most
// lines lines are due a minute, and past them the first line of each
// realm that had none this minute, up to fairLines more: one tenant's
// flood then cannot hide another tenant's lines. A line due past both is
// held back, its key's count carried to its next line, and the next line
// logged says how many were held back. Make one with newTallyLog.
type tallyLog[K comparable] struct {
	every     time.Duration
	max       int
	lines     int
	fairLines int
	realm     func(K) string

	mu     sync.Mutex
	seen   map[K]*tally
	minute time.Time       // when the current minute of lines began
	used   int             // lines due in it
	realms map[string]bool // the realms with a line due in it
	held   int             // lines held back since the last one due
}

// maxLogLines bounds the lines a minute of each rate-limited log, whatever
// the identities or realms.
const maxLogLines = 60

// maxFairLogLines bounds the lines a minute past maxLogLines that go to
// realms with no line yet that minute, so that one realm's flood cannot
// hide another's.
const maxFairLogLines = 540

// newTallyLog is a log of at most one line per key per every, remembering
// maxKeys keys, whose keys fall in realm's realm.
func newTallyLog[K comparable](every time.Duration, maxKeys int, realm func(K) string) tallyLog[K] {
	return tallyLog[K]{every: every, max: maxKeys, lines: maxLogLines, fairLines: maxFairLogLines, realm: realm}
}

type tally struct {
	last         time.Time
	count, calls int
	heldIn       time.Time // the minute this key's line was last held back in
}

// tallyMinute is the window tallyLog.lines bounds.
const tallyMinute = time.Minute

// add counts n more for key at now, and answers the count and calls to
// log, and the lines held back before it, when a line is due (due false:
// nothing to log yet).
func (l *tallyLog[K]) add(now time.Time, key K, n int) (count, calls, held int, due bool) {
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
		return 0, 0, 0, false
	}
	if now.Sub(l.minute) >= tallyMinute || l.realms == nil {
		l.minute, l.used, l.realms = now, 0, map[string]bool{}
	}
	realm := l.realm(key)
	if l.used >= l.lines && (l.realms[realm] || l.used >= l.lines+l.fairLines) {
		if !t.heldIn.Equal(l.minute) {
			t.heldIn = l.minute
			l.held++
		}
		return 0, 0, 0, false
	}
	l.used++
	l.realms[realm] = true
	count, calls, held = t.count, t.calls, l.held
	t.last, t.count, t.calls, l.held = now, 0, 0, 0
	return count, calls, held, true
}

// heldArgs are a line's attributes for held lines held back before it:
// none when there were none.
func heldArgs(held int) []any {
	if held == 0 {
		return nil
	}
	return []any{"lines_held_back", held}
}
