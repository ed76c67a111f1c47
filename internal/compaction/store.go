package compaction

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
)

// Key names one conversation's compaction state. Conversations are per
// realm: two tenants may use the same conversation id without meeting.
type Key struct {
	Realm        string
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
}

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

func (m *MemoryStore) Delete(_ context.Context, key Key) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.states, key)
	return nil
}
