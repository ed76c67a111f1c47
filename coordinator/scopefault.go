package coordinator

import (
	"context"
	"time"

	"github.com/memhost/memhost/sdk"
)

// Plugin calls that can answer records outside the scopes they were
// asked for, as the scope fault log names them.
const (
	faultRecall     = "provider recall"
	faultNeighbours = "provider recall (thread neighbours)"
	faultManifest   = "provider manifest"
	faultFetch      = "provider fetch"
	faultSelector   = "selector"
)

// scopeFaultEvery is how often one realm's faults of one plugin call may
// be logged: a plugin that ignores scopes does so on every turn.
const scopeFaultEvery = time.Minute

// maxScopeFaultKeys bounds the limiter's memory; past it the state is
// forgotten, which costs at most an extra line per key.
const maxScopeFaultKeys = 1024

// outOfScope notes that call answered n records outside the scopes of
// id's query: counted in the turn's trace, and logged for the operator,
// who alone can fix the plugin.
func (c *Coordinator) outOfScope(ctx context.Context, id sdk.Identity, call string, n int) {
	if n == 0 {
		return
	}
	if notes := notesFrom(ctx); notes != nil {
		notes.outOfScope.Add(int64(n))
	}
	records, turns, held, due := c.scopeFaults.add(c.now(), [2]string{id.Realm, call}, n)
	if !due {
		return
	}
	c.log(ctx).Warn("a plugin answered records outside the scopes it was asked for; they were left out (the plugin ignores its query's scopes: fix or replace it)",
		append([]any{"realm", id.Realm, "call", call, "records", records, "requests", turns}, heldArgs(held)...)...)
}
