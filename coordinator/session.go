package coordinator

import (
	"container/heap"
	"container/list"
	"context"
	"fmt"
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
// whitespace or control characters, and not "." or "..", which no URL
// path can name (GET /v1/sessions/{key}/trace). The empty key means "no
// session" and is checked by the callers that accept it.
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
	case key == "." || key == "..":
		return bad(fmt.Sprintf("%q names no session a URL path can address", key))
	}
	return nil
}

// EvictionSlack is how many sessions below its bound a realm's session
// store evicts to once a new session passes the bound: a hundredth of the
// bound (none under 100). Choosing each victim reads the realm's sessions,
// so evicting one per new session cost a realm at its bound that read on
// every new session; in steps, it is one read per slack new sessions.
func EvictionSlack(bound int) int { return bound / 100 }

// SessionKey names one session's state. State is per (realm, identity,
// session), so two tenants that pick the same session key never share a
// budget, a dedup set or a nonce. Session is "" for calls without one
// (builds, session-less turns): only the nonce is kept there.
type SessionKey struct {
	Realm    string
	Identity string
	Session  string
}

// SessionState is what the coordinator remembers about one session. The
// zero value is a session with nothing injected. The nonce is not part of
// it: it is derived from the key (see Options.HostKey), so it needs no
// storage and every host sharing the key agrees on it.
type SessionState struct {
	// InjectedBytes and InjectedIDs account this session's per-turn
	// injections since its start or last compaction.
	InjectedBytes int
	InjectedIDs   []string
	// ExcerptIDs are the records injected as an excerpt only (query-
	// focused packing): they stay recallable, and a later turn that
	// injects one again shows it whole (and moves it to InjectedIDs).
	ExcerptIDs []string
	// Epoch counts compactions, so a background sweep started before one
	// cannot feed a turn after it.
	Epoch uint64
	// SweepIDs holds a finished background sweep's picks until the next
	// turn takes them; non-nil (possibly empty) while they wait.
	SweepIDs []string
}

// IsZero reports whether s holds nothing worth keeping.
func (s *SessionState) IsZero() bool {
	return s.InjectedBytes == 0 && len(s.InjectedIDs) == 0 && len(s.ExcerptIDs) == 0 && s.Epoch == 0 && s.SweepIDs == nil
}

// Clone answers a deep copy of s, for stores that keep their own.
func (s *SessionState) Clone() SessionState {
	c := *s
	c.InjectedIDs = slices.Clone(s.InjectedIDs)
	c.ExcerptIDs = slices.Clone(s.ExcerptIDs)
	c.SweepIDs = slices.Clone(s.SweepIDs)
	return c
}

// injected reports whether id was injected in this session.
func (s *SessionState) injected(id string) bool { return slices.Contains(s.InjectedIDs, id) }

// excerpted reports whether an excerpt of id was injected in this session.
func (s *SessionState) excerpted(id string) bool { return slices.Contains(s.ExcerptIDs, id) }

// account adds a turn's injection: whole records to InjectedIDs, excerpts
// to ExcerptIDs (a record shown whole leaves ExcerptIDs).
func (s *SessionState) account(out Rendered) {
	s.InjectedBytes += out.Bytes
	for _, id := range out.IDs {
		if slices.Contains(out.Excerpts, id) {
			if !s.excerpted(id) {
				s.ExcerptIDs = append(s.ExcerptIDs, id)
			}
			continue
		}
		s.InjectedIDs = append(s.InjectedIDs, id)
		s.ExcerptIDs = slices.DeleteFunc(s.ExcerptIDs, func(x string) bool { return x == id })
	}
	for _, rep := range out.Repeats {
		switch {
		case s.injected(rep.ID):
		case slices.Contains(out.Excerpts, rep.Of):
			if !s.excerpted(rep.ID) {
				s.ExcerptIDs = append(s.ExcerptIDs, rep.ID)
			}
		default:
			s.InjectedIDs = append(s.InjectedIDs, rep.ID)
			s.ExcerptIDs = slices.DeleteFunc(s.ExcerptIDs, func(x string) bool { return x == rep.ID })
		}
	}
}

// reset forgets the session's injection accounting (DESIGN 5.6). A session
// never seen stays unseen.
func (s *SessionState) reset() bool {
	if s.IsZero() {
		return false
	}
	s.InjectedBytes = 0
	s.InjectedIDs = nil
	s.ExcerptIDs = nil
	s.SweepIDs = nil
	s.Epoch++
	return true
}

// SessionStore holds session state. The in-memory store is the default; a
// durable store (internal/sessionstore) or a shared one (one state for many
// hosts) implements the same one method.
type SessionStore interface {
	// Update runs fn on the state of key atomically. An unknown or expired
	// key shows the zero state. fn answers whether it changed the state,
	// and the store writes only then: a visit that changes nothing creates
	// nothing. fn is quick, pure CPU work: it never blocks and never calls
	// the store. A store may run fn more than once, each time on a fresh
	// copy (a shared store reads the state and its version, runs fn and
	// writes only if the version is unchanged, retrying otherwise); fn
	// must allow for that.
	Update(ctx context.Context, key SessionKey, fn func(*SessionState) bool) error
}

// MemoryStore is an in-memory SessionStore bounded per realm: when a
// realm is full, it forgets the least recently used session of the
// identity holding the most sessions there (ties: the least recently used
// of those identities' sessions). A flood of new sessions from one identity
// thus only ever evicts its own, and no realm can push out another's. It is
// sharded so concurrent sessions rarely wait for one another; the bound
// and the policy hold per shard, which a flood dominates in every shard.
type MemoryStore struct {
	seed     maphash.Seed
	perShard int
	shards   []memoryShard
}

type memoryShard struct {
	mu     sync.Mutex
	realms map[string]*memoryRealm
}

// memoryRealm is one realm's sessions within a shard: each identity's
// sessions in order of use, and the identities in a heap whose top is the
// one to lose a session next.
type memoryRealm struct {
	clock      uint64 // orders uses; never repeats
	sessions   map[SessionKey]*list.Element
	identities map[string]*memoryIdentity
	heap       identityHeap
}

type memorySession struct {
	key   SessionKey
	state *SessionState
	used  uint64
}

type memoryIdentity struct {
	sessions list.List // of *memorySession, least recently used first
	index    int       // in the heap
}

func (id *memoryIdentity) oldest() uint64 {
	return id.sessions.Front().Value.(*memorySession).used
}

// identityHeap tops with the identity holding the most sessions; ties go
// to the one whose least recently used session is the oldest.
type identityHeap []*memoryIdentity

func (h identityHeap) Len() int { return len(h) }
func (h identityHeap) Less(i, j int) bool {
	if a, b := h[i].sessions.Len(), h[j].sessions.Len(); a != b {
		return a > b
	}
	return h[i].oldest() < h[j].oldest()
}
func (h identityHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *identityHeap) Push(x any) {
	id := x.(*memoryIdentity)
	id.index = len(*h)
	*h = append(*h, id)
}
func (h *identityHeap) Pop() any {
	old := *h
	id := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return id
}

func newMemoryRealm() *memoryRealm {
	return &memoryRealm{sessions: map[SessionKey]*list.Element{}, identities: map[string]*memoryIdentity{}}
}

// get answers key's state and marks it most recently used.
func (r *memoryRealm) get(key SessionKey) (*SessionState, bool) {
	el, ok := r.sessions[key]
	if !ok {
		return nil, false
	}
	s := el.Value.(*memorySession)
	r.clock++
	s.used = r.clock
	id := r.identities[key.Identity]
	id.sessions.MoveToBack(el)
	heap.Fix(&r.heap, id.index)
	return s.state, true
}

// add inserts a session unknown to r as the most recently used, then
// evicts down to bound.
func (r *memoryRealm) add(key SessionKey, st *SessionState, bound int) {
	id := r.identities[key.Identity]
	if id == nil {
		id = &memoryIdentity{}
		r.identities[key.Identity] = id
		r.clock++
		id.sessions.PushBack(&memorySession{key: key, state: st, used: r.clock})
		heap.Push(&r.heap, id)
	} else {
		r.clock++
		id.sessions.PushBack(&memorySession{key: key, state: st, used: r.clock})
		heap.Fix(&r.heap, id.index)
	}
	r.sessions[key] = id.sessions.Back()
	for len(r.sessions) > bound {
		victim := r.heap[0]
		s := victim.sessions.Remove(victim.sessions.Front()).(*memorySession)
		delete(r.sessions, s.key)
		if victim.sessions.Len() == 0 {
			heap.Pop(&r.heap)
			delete(r.identities, s.key.Identity)
		} else {
			heap.Fix(&r.heap, 0)
		}
	}
}

// NewMemoryStore keeps at most size sessions per realm (at least 1).
func NewMemoryStore(size int) *MemoryStore {
	size = max(size, 1)
	// Small stores get one shard, so their bound is exact.
	n := min(16, max(1, size/256))
	m := &MemoryStore{seed: maphash.MakeSeed(), perShard: (size + n - 1) / n, shards: make([]memoryShard, n)}
	for i := range m.shards {
		m.shards[i].realms = map[string]*memoryRealm{}
	}
	return m
}

// Update implements SessionStore; it never fails.
func (m *MemoryStore) Update(_ context.Context, key SessionKey, fn func(*SessionState) bool) error {
	sh := &m.shards[maphash.Comparable(m.seed, key)%uint64(len(m.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	realm := sh.realms[key.Realm]
	if realm != nil {
		if s, ok := realm.get(key); ok {
			fn(s)
			return nil
		}
	}
	s := &SessionState{}
	if !fn(s) {
		return nil
	}
	if realm == nil {
		realm = newMemoryRealm()
		sh.realms[key.Realm] = realm
	}
	realm.add(key, s, m.perShard)
	return nil
}

// Len answers the number of sessions held in realm.
func (m *MemoryStore) Len(realm string) int {
	n := 0
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		if r := sh.realms[realm]; r != nil {
			n += len(r.sessions)
		}
		sh.mu.Unlock()
	}
	return n
}
