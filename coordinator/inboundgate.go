package coordinator

import (
	"context"
	"fmt"
	"runtime"

	"github.com/memhost/memhost/coordinator/keyedlock"
	"github.com/memhost/memhost/sdk"
)

// largeInboundBytes is the inbound text size from which defanging waits
// its turn at the inbound gate. Text dense with forged markers costs about
// a microsecond a byte to defang (plain text a few nanoseconds), so a few
// large ones at once would take every core the turns need.
const largeInboundBytes = 8 << 10

// inboundGate admits the defanging of large inbound texts: one per actor
// at a time, and across actors one per two cores. An actor's own texts
// queue behind each other, not in front of other actors', so one agent's
// flood delays only itself. The actor is the caller's token where the
// API edge names it (WithActor: a token that may act as any identity
// could otherwise spread a flood over many), else the identity.
type inboundGate struct {
	slots chan struct{}
	turns keyedlock.Lock[string] // one actor's turn
}

func newInboundGate() *inboundGate {
	return &inboundGate{slots: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))}
}

type actorKey struct{}

// WithActor answers ctx naming who acts (a token's name) for the fairness
// of the inbound gate.
func WithActor(ctx context.Context, actor string) context.Context {
	return context.WithValue(ctx, actorKey{}, actor)
}

// actorOf answers the gate's key for a text of id under ctx.
func actorOf(ctx context.Context, id sdk.Identity) string {
	if a, ok := ctx.Value(actorKey{}).(string); ok && a != "" {
		return "token\x00" + a
	}
	return "identity\x00" + id.Realm + "\x00" + id.ID
}

// enter waits, within ctx, for the actor's turn and a slot for a text of
// bytes, and answers the func that gives both back. A text of at most
// largeInboundBytes needs neither.
func (g *inboundGate) enter(ctx context.Context, id sdk.Identity, bytes int) (func(), error) {
	if bytes <= largeInboundBytes {
		return func() {}, nil
	}
	waited := func() error {
		return fmt.Errorf("defanging %d bytes of inbound text waited for other large texts being defanged: %w", bytes, context.Cause(ctx))
	}
	leave, err := g.turns.Lock(ctx, actorOf(ctx, id))
	if err != nil {
		return nil, waited()
	}
	select {
	case g.slots <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, waited()
	}
	return func() {
		<-g.slots
		leave()
	}, nil
}
