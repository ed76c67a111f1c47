package compaction

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/sdk"
)

// A compaction naming a session owes that session a reset (DESIGN 5.6).
// Where the store is a TxStore, the summary and the reset commit together.
// Elsewhere the reset is recorded with the summary (State.Pending) before
// it is made; until it is done, the next compaction of the conversation
// and the session's next turn (through SessionGate) complete it, and the
// compaction answers an error, never a success.

// resettingKey marks the context of a reset the Service makes itself, so
// SessionGate lets that visit through instead of completing it again.
type resettingKey struct{}

func resetting(ctx context.Context) context.Context {
	return context.WithValue(ctx, resettingKey{}, true)
}

// pendingIndex finds a session's pending resets without a query: the
// stores that record pending resets belong to one host (its state
// database), so the index is exact once loaded at start. A session may
// owe resets to several conversations (each compaction names the session
// it ran in), and each stays listed until it is done.
type pendingIndex struct {
	mu        sync.Mutex
	bySession map[coordinator.SessionKey]map[Key]struct{}
	n         atomic.Int64 // entries, read without the lock per turn
}

func sessionKey(key Key, p PendingReset) coordinator.SessionKey {
	return coordinator.SessionKey{Realm: key.Realm, Identity: p.Identity, Session: p.Session}
}

func (ix *pendingIndex) add(key Key, p PendingReset) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	sk := sessionKey(key, p)
	if ix.bySession == nil {
		ix.bySession = map[coordinator.SessionKey]map[Key]struct{}{}
	}
	keys := ix.bySession[sk]
	if keys == nil {
		keys = map[Key]struct{}{}
		ix.bySession[sk] = keys
	}
	if _, dup := keys[key]; !dup {
		keys[key] = struct{}{}
		ix.n.Add(1)
	}
}

func (ix *pendingIndex) remove(key Key, p PendingReset) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	sk := sessionKey(key, p)
	keys := ix.bySession[sk]
	if _, ok := keys[key]; !ok {
		return
	}
	delete(keys, key)
	if len(keys) == 0 {
		delete(ix.bySession, sk)
	}
	ix.n.Add(-1)
}

// lookup answers the conversations owing sk a reset, in a fixed order so
// that two visits of one session take their locks alike.
func (ix *pendingIndex) lookup(sk coordinator.SessionKey) []Key {
	if ix.n.Load() == 0 {
		return nil
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	keys := make([]Key, 0, len(ix.bySession[sk]))
	for key := range ix.bySession[sk] {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b Key) int {
		return cmp.Or(cmp.Compare(a.Identity, b.Identity), cmp.Compare(a.Conversation, b.Conversation))
	})
	return keys
}

// completeReset makes st's pending reset and clears it from the store;
// the caller holds key's lock.
func (s *Service) completeReset(ctx context.Context, key Key, st *State) error {
	p := st.Pending
	if err := s.opts.Resetter.OnSessionCompacted(resetting(ctx), sdk.Identity{Realm: key.Realm, ID: p.Identity}, p.Session); err != nil {
		return fmt.Errorf("conversation %s: the summary is saved, but the reset of session %s is not done (the next compaction of the conversation or the session's next turn completes it): %w", key.Conversation, p.Session, err)
	}
	next := *st
	next.Pending = PendingReset{}
	if err := s.opts.Store.Save(ctx, key, st.Watermark, next); err != nil {
		return fmt.Errorf("conversation %s: session %s was reset, but clearing the pending reset failed: %w", key.Conversation, p.Session, err)
	}
	s.pending.remove(key, p)
	*st = next
	return nil
}

// completeFor completes every pending reset of session sk.
func (s *Service) completeFor(ctx context.Context, sk coordinator.SessionKey) error {
	for _, key := range s.pending.lookup(sk) {
		if err := s.completeOne(ctx, sk, key); err != nil {
			return err
		}
	}
	return nil
}

// completeOne completes the reset conversation key owes session sk, if it
// still owes one.
func (s *Service) completeOne(ctx context.Context, sk coordinator.SessionKey, key Key) error {
	unlock, err := s.lock(ctx, key)
	if err != nil {
		return fmt.Errorf("session %s: waiting for a compaction under way: %w", sk.Session, err)
	}
	defer unlock()
	st, found, err := s.opts.Store.Load(ctx, key)
	if err != nil {
		return fmt.Errorf("session %s: a compaction's reset is pending: %w", sk.Session, err)
	}
	if !found || st.Pending.IsZero() || sessionKey(key, st.Pending) != sk {
		s.pending.remove(key, PendingReset{Identity: sk.Identity, Session: sk.Session})
		return nil
	}
	return s.completeReset(ctx, key, &st)
}

// loadPending fills the index from the store, at start.
func (s *Service) loadPending(ctx context.Context) error {
	lister, ok := s.opts.Store.(PendingLister)
	if !ok {
		return nil
	}
	all, err := lister.PendingResets(ctx)
	if err != nil {
		return err
	}
	for key, p := range all {
		s.pending.add(key, p)
	}
	return nil
}

// SessionGate is the coordinator's session store with the Service in
// front: a session's first visit after a compaction that could not reset
// it completes that reset first. The coordinator is built before the
// Service (the Service resets through it), so the two meet in Bind.
type SessionGate struct {
	inner coordinator.SessionStore
	svc   atomic.Pointer[Service]
}

// NewSessionGate wraps inner; until Bind it passes every visit through.
func NewSessionGate(inner coordinator.SessionStore) *SessionGate {
	return &SessionGate{inner: inner}
}

// Bind loads svc's pending resets and puts svc in front of the store.
func (g *SessionGate) Bind(ctx context.Context, svc *Service) error {
	if err := svc.loadPending(ctx); err != nil {
		return err
	}
	g.svc.Store(svc)
	return nil
}

// Update implements coordinator.SessionStore. A pending reset that cannot
// be completed fails the visit: a turn must not run on a budget and dedup
// set the compaction cleared.
func (g *SessionGate) Update(ctx context.Context, key coordinator.SessionKey, fn func(*coordinator.SessionState) bool) error {
	if svc := g.svc.Load(); svc != nil && ctx.Value(resettingKey{}) == nil {
		if err := svc.completeFor(ctx, key); err != nil {
			return err
		}
	}
	return g.inner.Update(ctx, key, fn)
}

var _ coordinator.SessionStore = (*SessionGate)(nil)
