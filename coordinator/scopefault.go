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

// Resolvers whose unusable names are logged as the scope faults are.
const (
	faultMobResolver      = "mob resolver"
	faultOperatorResolver = "operator resolver"
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

// HitsInScopes keeps the hits of a recall for id that are of its realm
// and of one of scopes, for the surfaces that answer a recall outside a
// turn (POST /v1/recall, MCP memory_recall): a plugin that ignores its
// query's realm or scopes must not hand an identity another's memory
// there either (every realm has a scope "realm", and an identity of the
// same name). What it drops is noted as a turn's is; hits is reused.
func (c *Coordinator) HitsInScopes(ctx context.Context, id sdk.Identity, scopes []sdk.Scope, hits []sdk.Hit) []sdk.Hit {
	hits, foreign := inScopes(hits, scopes, func(h *sdk.Hit) sdk.Scope {
		if h.Record.Realm != "" && h.Record.Realm != id.Realm {
			return "" // no scope of id's
		}
		return h.Record.Scope
	})
	c.outOfScope(ctx, id, faultRecall, foreign)
	return hits
}

// RowsInScopes is HitsInScopes for a manifest's rows (POST /v1/manifest,
// MCP memory_index).
func (c *Coordinator) RowsInScopes(ctx context.Context, id sdk.Identity, scopes []sdk.Scope, rows []sdk.ManifestRow) []sdk.ManifestRow {
	rows, foreign := inScopes(rows, scopes, func(r *sdk.ManifestRow) sdk.Scope { return r.Scope })
	c.outOfScope(ctx, id, faultManifest, foreign)
	return rows
}
