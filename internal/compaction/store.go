package compaction

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
)

// Key names one conversation's compaction state. Conversations are per
// realm and identity: two tenants, or two identities of one realm, may use
// the same conversation id without seeing, blocking or deleting each
// other's state. Identity "" holds a state saved before identities were
// recorded, which only an application reaches (see Service.Compact).
type Key struct {
	Realm        string
	Identity     string
	Conversation string
}

// State is what the host remembers of a conversation between calls.
type State struct {
	// Watermark is how many evicted messages the artifact has absorbed.
	Watermark int
	// PrefixHash is the hash chain over those messages (see hashChain), so
	// a request whose history differs from what was absorbed is refused
	// rather than summarised on top of the wrong past.
	PrefixHash string
	// Artifact is the rolling summary; the carry-over of the next call.
	Artifact  sdk.Message
	UpdatedAt time.Time
	// Pending is a session reset the compaction that saved this state owes
	// and has not done yet (zero: none). It is saved with the summary, so
	// a failure between the two, or a host killed there, leaves a record
	// that the next compaction of the conversation, or the session's next
	// turn, completes.
	Pending PendingReset
}

// PendingReset names a session whose reset is owed: an identity of the
// conversation's realm and its session key.
type PendingReset struct {
	Identity string
	Session  string
}

// IsZero reports whether no reset is pending.
func (p PendingReset) IsZero() bool { return p.Session == "" }

// ErrStale is answered by Store.Save when the stored watermark is no longer
// the one the caller read: another writer got there first.
var ErrStale = errors.New("compaction state changed since it was read")

// Store persists compaction state. Implementations must be safe for
// concurrent use.
type Store interface {
	// Load answers the state of key; found is false when there is none.
	Load(ctx context.Context, key Key) (st State, found bool, err error)
	// Save replaces key's state if its stored watermark is still prev (0
	// meaning "no state yet"), else answers an error wrapping ErrStale.
	Save(ctx context.Context, key Key, prev int, st State) error
	// Delete forgets key's state; forgetting nothing is not an error.
	Delete(ctx context.Context, key Key) error
	// Identities lists the identities that hold state for a conversation
	// id of a realm ("" for a state saved before identities were
	// recorded), so an application can forget the id for all of them.
	Identities(ctx context.Context, realm, conversation string) ([]string, error)
}

// Holder is a Store shared by several hosts that holds a conversation for
// one compaction at a time across them (pgstate). The compare-and-set of
// Save keeps two hosts from both committing; the hold keeps the loser from
// archiving its history over the winner's first (a compaction archives
// before it commits).
type Holder interface {
	Store
	// Hold waits until no other compaction holds key, or ctx ends, and
	// holds it until release is called or, should its host die, until a
	// while past ctx's deadline. held is ctx, ended also should the hold
	// lapse and another host take key (a stall, or the database out of
	// reach, past the hold's lease), with a cause wrapping ErrHoldLost:
	// whatever the holder writes under key it writes within held.
	Hold(ctx context.Context, key Key) (held context.Context, release func(), err error)
}

// ErrHoldLost is the cause a Holder's context ends with when the hold
// lapsed and another host took the conversation.
var ErrHoldLost = errors.New("its hold lapsed (its host stalled, or lost the database, past the hold's lease) and another host took the conversation")

// TxStore is a Store that also holds the session store (pgstate, where both
// live in PostgreSQL): the summary and the session reset commit in one
// transaction, and no reset is ever pending.
type TxStore interface {
	Store
	// SaveWith saves as Save does, then runs fn with a context carrying
	// the transaction, which the session store joins; both commit, or
	// neither does and the error is answered.
	SaveWith(ctx context.Context, key Key, prev int, st State, fn func(ctx context.Context) error) error
}

// PendingLister is a Store that can list the states with a pending reset,
// so a host that restarts still completes them on the sessions' turns.
type PendingLister interface {
	PendingResets(ctx context.Context) (map[Key]PendingReset, error)
}

// MemoryStore keeps state in memory: for tests and Go embedders that do
// not need compaction to survive a restart.
type MemoryStore struct {
	mu     sync.Mutex
	states map[Key]State
}

// NewMemoryStore answers an empty in-memory store.
func NewMemoryStore() *MemoryStore { return &MemoryStore{states: map[Key]State{}} }

func (m *MemoryStore) Load(_ context.Context, key Key) (State, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[key]
	return st, ok, nil
}

func (m *MemoryStore) Save(_ context.Context, key Key, prev int, st State) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.states[key].Watermark != prev {
		return ErrStale
	}
	m.states[key] = st
	return nil
}

func (m *MemoryStore) PendingResets(context.Context) (map[Key]PendingReset, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[Key]PendingReset{}
	for k, st := range m.states {
		if !st.Pending.IsZero() {
			out[k] = st.Pending
		}
	}
	return out, nil
}

func (m *MemoryStore) Identities(_ context.Context, realm, conversation string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.states {
		if k.Realm == realm && k.Conversation == conversation {
			out = append(out, k.Identity)
		}
	}
	return out, nil
}

func (m *MemoryStore) Delete(_ context.Context, key Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.states, key)
	return nil
}

// String names the key in errors and logs: realm/identity/conversation.
func (k Key) String() string { return k.Realm + "/" + k.Identity + "/" + k.Conversation }
