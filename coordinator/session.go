package coordinator

import (
	"context"
	"fmt"
	"github.com/memhost/memhost/internal/lru"
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
)

// MaxSessionKeyBytes bounds a session key.
const MaxSessionKeyBytes = 256

// ValidateSessionKey checks a session key: 1-256 bytes of UTF-8 with no
// whitespace or control characters. The empty key means "no session" and
// is checked by the callers that accept it.
func ValidateSessionKey(key string) error {
	bad := func(problem string) error {
		return &sdk.FieldError{Field: "session", Problem: problem, Err: sdk.ErrInvalid}
	}
	switch {
	case key == "":
		return bad("must not be empty")
	case len(key) > MaxSessionKeyBytes:
		return bad(fmt.Sprintf("is %d bytes, the limit is %d", len(key), MaxSessionKeyBytes))
	case !utf8.ValidString(key):
		return bad("is not valid UTF-8")
	case strings.IndexFunc(key, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0:
		return bad("must not hold whitespace or control characters")
	}
	return nil
}

// SessionKey names one session's state. State is per (realm, identity,
// session), so two tenants that pick the same session key never share a
// budget, a dedup set or a nonce. Session is "" for calls without one
// (builds, session-less turns): only the nonce is kept there.
type SessionKey struct {
	Realm    string
	Identity string
	Session  string
}

// SessionState is what the coordinator remembers about one session.
type SessionState struct {
	// Nonce is minted on first use and kept for the session's life; a
	// compaction does not rotate it.
	Nonce string
	// InjectedBytes and InjectedIDs account this session's per-turn
	// injections since its start or last compaction.
	InjectedBytes int
	InjectedIDs   []string
	// Epoch counts compactions, so a background sweep started before one
	// cannot feed a turn after it.
	Epoch uint64
	// SweepRunning is set while a background full sweep runs; SweepIDs
	// holds a finished sweep's picks until the next turn takes them.
	SweepRunning bool
	SweepIDs     []string
}

// injected reports whether id was injected in this session.
func (s *SessionState) injected(id string) bool { return slices.Contains(s.InjectedIDs, id) }

// reset forgets the session's injection accounting (DESIGN 5.6).
func (s *SessionState) reset() {
	s.InjectedBytes = 0
	s.InjectedIDs = nil
	s.SweepIDs = nil
	s.SweepRunning = false
	s.Epoch++
}

// SessionStore holds session state. The in-memory store is the default; a
// durable or shared store (one state for many hosts) implements the same
// one method.
type SessionStore interface {
	// Update runs fn on the state of key atomically, creating an empty
	// state for an unknown key. fn is quick, pure CPU work: it never
	// blocks and never calls the store. A store may run fn more than once
	// (an optimistic transaction retrying); fn must allow for that.
	Update(ctx context.Context, key SessionKey, fn func(*SessionState)) error
}

// MemoryStore is an in-memory SessionStore bounded by a least-recently
// used policy: when full, it forgets the session untouched the longest.
// It is sharded so concurrent sessions rarely wait for one another.
type MemoryStore struct {
	seed   maphash.Seed
	shards []memoryShard
}

type memoryShard struct {
	mu  sync.Mutex
	lru *lru.Cache[SessionKey, *SessionState]
}

// NewMemoryStore keeps at most size sessions (at least 1).
func NewMemoryStore(size int) *MemoryStore {
	size = max(size, 1)
	// Small stores get one shard, so their bound is exact.
	n := min(16, max(1, size/256))
	m := &MemoryStore{seed: maphash.MakeSeed(), shards: make([]memoryShard, n)}
	per := (size + n - 1) / n
	for i := range m.shards {
		m.shards[i].lru = lru.New[SessionKey, *SessionState](per)
	}
	return m
}

// Update implements SessionStore; it never fails.
func (m *MemoryStore) Update(_ context.Context, key SessionKey, fn func(*SessionState)) error {
	sh := &m.shards[maphash.Comparable(m.seed, key)%uint64(len(m.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s, ok := sh.lru.Get(key)
	if !ok {
		s = &SessionState{}
		sh.lru.Add(key, s)
	}
	fn(s)
	return nil
}

// Len answers the number of sessions held.
func (m *MemoryStore) Len() int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		n += sh.lru.Len()
		sh.mu.Unlock()
	}
	return n
}
