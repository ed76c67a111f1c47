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
	// Size bounds the sessions kept (least recently used forgotten
	// first); default DefaultSessions. A forgotten session simply
	// recalls afresh on its next call.
	Size int
	// MaxBytes caps each block; 0 is the coordinator's per-turn cap.
	MaxBytes int
	Logger   hclog.Logger
}

// Sessions is the host-side guide: the state of many guide sessions,
// keyed by (identity, session), for the HTTP API. Calls for one session
// are serialized; different sessions run in parallel.
type Sessions struct {
	rec recaller

	mu       sync.Mutex
	sessions *lru.Cache[sessionKey, *sessionEntry]
}

type sessionKey struct{ realm, identity, session string }

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
		sessions: lru.New[sessionKey, *sessionEntry](opts.Size),
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

// BeforeIteration recalls with the last user message and answers the
// session's block and whether it changed. An empty message, or the same
// query and filters as last time, answers the previous block
// byte-identical without a recall. Recall failures are logged and answer
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
	return s.sessions.Len()
}

// entry answers the session's entry, creating it (and forgetting the least
// recently used one when full).
func (s *Sessions) entry(id sdk.Identity, session string) *sessionEntry {
	k := sessionKey{id.Realm, id.ID, session}
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.sessions.Get(k)
	if !ok {
		e = &sessionEntry{}
		s.sessions.Add(k, e)
	}
	return e
}
