package coordinator

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"github.com/memhost/memhost/sdk"
)

// largeInboundBytes is the inbound text size from which defanging waits
// its turn at the inbound gate. Text dense with forged markers costs about
// a microsecond a byte to defang (plain text a few nanoseconds), so a few
// large ones at once would take every core the turns need.
const largeInboundBytes = 8 << 10

// inboundGate admits the defanging of large inbound texts: one per
// identity at a time, and across identities one per two cores. An
// identity's own texts queue behind each other, not in front of other
// identities', so one agent's flood delays only itself.
type inboundGate struct {
	slots chan struct{}
	mu    sync.Mutex
	turns map[sdk.Identity]*identityTurn
}

// identityTurn is one identity's place at the gate and how many of its
// texts wait for it or hold it.
type identityTurn struct {
	held  chan struct{}
	users int
}

func newInboundGate() *inboundGate {
	return &inboundGate{slots: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2)), turns: map[sdk.Identity]*identityTurn{}}
}

// enter waits, within ctx, for id's turn and a slot, and answers the func
// that gives both back.
func (g *inboundGate) enter(ctx context.Context, id sdk.Identity, bytes int) (func(), error) {
	g.mu.Lock()
	t := g.turns[id]
	if t == nil {
		t = &identityTurn{held: make(chan struct{}, 1)}
		g.turns[id] = t
	}
	t.users++
	g.mu.Unlock()
	leave := func() {
		g.mu.Lock()
		if t.users--; t.users == 0 {
			delete(g.turns, id)
		}
		g.mu.Unlock()
	}
	waited := func() error {
		return fmt.Errorf("defanging %d bytes of inbound text waited for other large texts being defanged: %w", bytes, context.Cause(ctx))
	}
	select {
	case t.held <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, waited()
	}
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		<-t.held
		leave()
		return nil, waited()
	}
	return func() {
		<-g.slots
		<-t.held
		leave()
	}, nil
}
