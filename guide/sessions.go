package guide

import (
	"context"
	"fmt"
	"sync"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator/keyedlock"
	"github.com/memhost/memhost/coordinator/lru"
	"github.com/memhost/memhost/sdk"
)

// DefaultSessions is how many guide sessions Sessions keeps by default.
const DefaultSessions = 10000

// SessionsOptions configure a Sessions.
type SessionsOptions struct {
	// Size bounds the sessions kept, all realms together; default
	// DefaultSessions. Past it the realm holding the most gives one up,
	// the least recently used session of its identity holding the most,
	// so a realm or an identity holding no more than others never loses
	// one to their bursts. A forgotten session recalls afresh on its next
	// call.
	Size int
	// MaxBytes caps each block; 0 is the coordinator's per-turn cap.
	MaxBytes int
	Logger   hclog.Logger
}

// Sessions is the host-side guide: the state of many guide sessions,
// keyed by (identity, session), for the HTTP API. Calls for one session
// are serialized; different sessions run in parallel.
type Sessions struct {
	rec  recaller
	size int
	// turns holds a session across a recall, apart from its entry, so a
	// session forgotten while a call holds it still runs its calls one at
	// a time.
	turns keyedlock.Lock[sessionKey]

	mu sync.Mutex
	// realms are each realm's sessions: the victim of the bound is taken
	// from the realm holding the most, since a victim taken from the
	// identity holding the most anywhere let an agent of one realm,
	// starting sessions for many identities, push out another realm's.
	realms map[string]*realmSessions
	total  int
	clock  uint64 // stamps sessionEntry.used and realmSessions.used
}

// realmSessions are one realm's sessions, each identity's in its own LRU:
// one for all would let one identity's new sessions push out every
// other's.
type realmSessions struct {
	identities map[string]*lru.Cache[string, *sessionEntry]
	n          int
	used       uint64 // the last call's stamp
}

type sessionEntry struct {
	st state
	// used orders sessions by last use (Sessions.clock); Sessions.mu
	// guards it.
	used uint64
}

type sessionKey struct{ realm, identity, session string }

// lock waits for the session's previous call to end, or for ctx to, and
// answers the session's entry and the func that ends the call's turn.
func (s *Sessions) lock(ctx context.Context, id sdk.Identity, session string) (*sessionEntry, func(), error) {
	unlock, err := s.turns.Lock(ctx, sessionKey{id.Realm, id.ID, session})
	if err != nil {
		return nil, nil, fmt.Errorf("waiting for the session's previous call: %w", err)
	}
	return s.entry(id, session), unlock, nil
}

// NewSessions builds a host-side guide recalling from src.
func NewSessions(src Source, opts SessionsOptions) *Sessions {
	if opts.Size <= 0 {
		opts.Size = DefaultSessions
	}
	logger := opts.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Sessions{
		rec:    recaller{src: src, maxBytes: opts.MaxBytes, logger: logger.Named("guide")},
		size:   opts.Size,
		realms: map[string]*realmSessions{},
	}
}

// SessionStart recalls with the task as query and answers the block (""
// when there is nothing to inject). Any error is returned: a session-start
// recall is fatal to its session.
func (s *Sessions) SessionStart(ctx context.Context, id sdk.Identity, session, task string, f Filters) (string, error) {
	if err := validate(id, session); err != nil {
		return "", err
	}
	if err := f.Validate(); err != nil {
		return "", err
	}
	e, unlock, err := s.lock(ctx, id, session)
	if err != nil {
		return "", fmt.Errorf("guide: session-start: %w", err)
	}
	defer unlock()
	block, err := s.rec.start(ctx, &e.st, id, session, task, f.normalized())
	if err != nil {
		return "", fmt.Errorf("guide: session-start recall: %w", err)
	}
	return block, nil
}

// BeforeIteration recalls with the last user message (one without a
// query term, such as an empty one: the last query) and answers the
// session's block and whether it changed. A recall that renders what the
// last one did answers the previous block byte-identical. A failed recall
// is logged and answers the previous block, saying so (RecallFailed); only
// bad input, and a wait for the session's previous call past ctx's
// deadline, are errors.
func (s *Sessions) BeforeIteration(ctx context.Context, id sdk.Identity, session, lastUserMessage string, f Filters) (Iteration, error) {
	if err := validate(id, session); err != nil {
		return Iteration{}, err
	}
	if err := f.Validate(); err != nil {
		return Iteration{}, err
	}
	e, unlock, err := s.lock(ctx, id, session)
	if err != nil {
		return Iteration{}, fmt.Errorf("guide: before-iteration: %w", err)
	}
	defer unlock()
	return s.rec.iterate(ctx, &e.st, id, session, lastUserMessage, f.normalized()), nil
}

// Len answers how many sessions are kept.
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// entry answers the session's entry, creating it; at the bound, one
// session is forgotten first (see evict).
func (s *Sessions) entry(id sdk.Identity, session string) *sessionEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clock++
	r := s.realms[id.Realm]
	if r == nil {
		r = &realmSessions{identities: map[string]*lru.Cache[string, *sessionEntry]{}}
		s.realms[id.Realm] = r
	}
	r.used = s.clock
	own := r.identities[id.ID]
	if own != nil {
		if e, ok := own.Get(session); ok {
			e.used = s.clock
			return e
		}
	}
	if s.total >= s.size {
		s.evict(id)
	}
	if own = r.identities[id.ID]; own == nil {
		own = lru.New[string, *sessionEntry](s.size)
		r.identities[id.ID] = own
	}
	e := &sessionEntry{used: s.clock}
	own.Add(session, e)
	r.n++
	s.total++
	return e
}

// evict forgets one session of the realm holding the most (on a tie, the
// caller's if it is among them, else the one used longest ago): its
// identity holding the most gives up its least recently used session.
// A realm left without sessions is dropped.
func (s *Sessions) evict(caller sdk.Identity) {
	var name string
	var victim *realmSessions
	for k, r := range s.realms {
		if r.n == 0 {
			continue
		}
		if victim == nil || r.n > victim.n || r.n == victim.n && name != caller.Realm && (k == caller.Realm || r.used < victim.used) {
			name, victim = k, r
		}
	}
	if victim == nil {
		return
	}
	prefer := ""
	if name == caller.Realm {
		prefer = caller.ID
	}
	if victim.evict(prefer) {
		s.total--
	}
	if victim.n == 0 && name != caller.Realm {
		delete(s.realms, name)
	}
}

// evict forgets the least recently used session of the identity holding
// the most in the realm, and answers whether it found one. On a tie the
// identity adding one (prefer) is the victim if it is among them, else
// the one whose least recently used session was used longest ago: never
// an order a map's iteration decides.
func (r *realmSessions) evict(prefer string) bool {
	var victim string
	var most int
	var oldest uint64
	for k, c := range r.identities {
		_, e, _ := c.Oldest()
		n := c.Len()
		if n > most || n == most && victim != prefer && (k == prefer || e.used < oldest) {
			victim, most, oldest = k, n, e.used
		}
	}
	if most == 0 {
		return false
	}
	c := r.identities[victim]
	c.RemoveOldest()
	r.n--
	if c.Len() == 0 {
		delete(r.identities, victim)
	}
	return true
}
