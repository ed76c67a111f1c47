package guide

import (
	"context"
	"fmt"
	"github.com/memhost/memhost/internal/lru"
	"sync"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
)

// DefaultSessions is how many guide sessions Sessions keeps by default.
const DefaultSessions = 10000

// SessionsOptions configure a Sessions.
type SessionsOptions struct {
	// Size bounds the sessions kept, the least recently used session of
	// the identity holding the most forgotten first; default
	// DefaultSessions. A forgotten session recalls afresh on its next
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

	mu sync.Mutex
	// sessions are each identity's, least recently used last. One cache
	// for all would let one identity's new sessions, in any realm, push
	// out every other's.
	sessions map[identityKey]*lru.Cache[string, *sessionEntry]
	total    int
}

type identityKey struct{ realm, identity string }

type sessionEntry struct {
	mu sync.Mutex // held across a recall
	st state
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
		rec:      recaller{src: src, maxBytes: opts.MaxBytes, logger: logger.Named("guide")},
		size:     opts.Size,
		sessions: map[identityKey]*lru.Cache[string, *sessionEntry]{},
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
	e := s.entry(id, session)
	e.mu.Lock()
	defer e.mu.Unlock()
	block, err := s.rec.start(ctx, &e.st, id, session, task, f.normalized())
	if err != nil {
		return "", fmt.Errorf("guide: session-start recall: %w", err)
	}
	return block, nil
}

// BeforeIteration recalls with the last user message (an empty one: the
// last query) and answers the session's block and whether it changed. A
// recall that renders what the last one did answers the previous block
// byte-identical. Recall failures are logged and answer
// the previous block; only bad input is an error.
func (s *Sessions) BeforeIteration(ctx context.Context, id sdk.Identity, session, lastUserMessage string, f Filters) (string, bool, error) {
	if err := validate(id, session); err != nil {
		return "", false, err
	}
	if err := f.Validate(); err != nil {
		return "", false, err
	}
	e := s.entry(id, session)
	e.mu.Lock()
	defer e.mu.Unlock()
	block, changed := s.rec.iterate(ctx, &e.st, id, session, lastUserMessage, f.normalized())
	return block, changed, nil
}

// Len answers how many sessions are kept.
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

// entry answers the session's entry, creating it; at the bound, the
// least recently used session of the identity holding the most is
// forgotten first.
func (s *Sessions) entry(id sdk.Identity, session string) *sessionEntry {
	k := identityKey{id.Realm, id.ID}
	s.mu.Lock()
	defer s.mu.Unlock()
	own := s.sessions[k]
	if own != nil {
		if e, ok := own.Get(session); ok {
			return e
		}
	}
	if s.total >= s.size {
		s.evict(k)
	}
	if own = s.sessions[k]; own == nil {
		own = lru.New[string, *sessionEntry](s.size)
		s.sessions[k] = own
	}
	e := &sessionEntry{}
	own.Add(session, e)
	s.total++
	return e
}

// evict forgets the least recently used session of the identity holding
// the most; on a tie, prefer's (the identity adding one) if it is among
// them.
func (s *Sessions) evict(prefer identityKey) {
	var largest identityKey
	most := 0
	for k, c := range s.sessions {
		if n := c.Len(); n > most || n == most && k == prefer {
			largest, most = k, n
		}
	}
	if most == 0 {
		return
	}
	c := s.sessions[largest]
	c.RemoveOldest()
	s.total--
	if c.Len() == 0 {
		delete(s.sessions, largest)
	}
}
