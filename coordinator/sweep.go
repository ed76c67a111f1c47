package coordinator

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk"
)

// startSweep starts a background full sweep for a session unless one is
// running or a finished one waits to be taken (at most one per session).
// Its picks feed the session's next turn only. A compaction in the
// meantime (a new epoch) discards them.
func (c *Coordinator) startSweep(key SessionKey, epoch uint64, id sdk.Identity, p provider, scopes []sdk.Scope, query string) {
	c.sweepsStart.Lock()
	defer c.sweepsStart.Unlock()
	if c.closed {
		return
	}
	if _, running := c.sweeping[key]; running {
		return
	}
	start := false
	err := c.store.Update(c.sweepCtx, key, func(s *SessionState) bool {
		start = s.Epoch == epoch && s.SweepIDs == nil
		return false
	})
	if err != nil || !start {
		return
	}
	c.sweeping[key] = struct{}{}
	c.sweeps.Add(1)
	go c.sweep(key, epoch, id, p, slices.Clone(scopes), query)
}

func (c *Coordinator) sweep(key SessionKey, epoch uint64, id sdk.Identity, p provider, scopes []sdk.Scope, query string) {
	defer c.sweeps.Done()
	defer func() {
		c.sweepsStart.Lock()
		delete(c.sweeping, key)
		c.sweepsStart.Unlock()
	}()
	ctx, cancel := context.WithTimeout(c.sweepCtx, c.cfg.SweepTimeout)
	defer cancel()
	start := time.Now()
	ids, err := c.fullSweep(ctx, key, id, p, scopes, query)
	c.metrics.Recalled(SurfaceSweep, id.Realm, time.Since(start), sdk.CodeOf(err))
	if err != nil {
		c.logger.Warn("background sweep failed", "realm", id.Realm, "identity", id.ID, "error", err)
	}
	if err != nil {
		return
	}
	// The picks wait for the session's next turn, in the store so that a
	// restart or another host sharing it keeps them.
	if err := c.store.Update(context.Background(), key, func(s *SessionState) bool {
		if s.Epoch != epoch {
			return false // compacted meanwhile: the picks are stale
		}
		s.SweepIDs = append(make([]string, 0, len(ids)), ids...)
		return true
	}); err != nil {
		c.logger.Warn("background sweep: session store", "realm", id.Realm, "identity", id.ID, "error", err)
	}
}

// fullSweep runs the selector over the composed scopes' full manifest.
func (c *Coordinator) fullSweep(ctx context.Context, key SessionKey, id sdk.Identity, p provider, scopes []sdk.Scope, query string) ([]string, error) {
	rows, err := p.Provider.(sdk.ManifestLister).Manifest(ctx, sdk.ManifestQuery{Realm: id.Realm, Scopes: scopes, Tier: sdk.TierFull})
	if err != nil {
		return nil, fmt.Errorf("full manifest: %w", err)
	}
	var suppressed []string
	if err := c.store.Update(ctx, key, func(s *SessionState) bool { suppressed = slices.Clone(s.InjectedIDs); return false }); err != nil {
		return nil, err
	}
	sel, err := c.selector.Select(ctx, sdk.SelectRequest{Identity: id, Query: query, Rows: rows, SuppressedIDs: suppressed, Max: c.cfg.MaxEntries})
	if err != nil {
		return nil, fmt.Errorf("selector: %w", err)
	}
	return sel.IDs, nil
}
