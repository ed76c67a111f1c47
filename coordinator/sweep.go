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
	start := false
	err := c.store.Update(c.sweepCtx, key, func(s *SessionState) {
		start = s.Epoch == epoch && !s.SweepRunning && s.SweepIDs == nil
		if start {
			s.SweepRunning = true
		}
	})
	if err != nil || !start {
		return
	}
	c.sweeps.Add(1)
	go c.sweep(key, epoch, id, p, slices.Clone(scopes), query)
}

func (c *Coordinator) sweep(key SessionKey, epoch uint64, id sdk.Identity, p provider, scopes []sdk.Scope, query string) {
	defer c.sweeps.Done()
	ctx, cancel := context.WithTimeout(c.sweepCtx, c.cfg.SweepTimeout)
	defer cancel()
	start := time.Now()
	ids, err := c.fullSweep(ctx, key, id, p, scopes, query)
	c.metrics.Recalled(SurfaceSweep, id.Realm, time.Since(start), sdk.CodeOf(err))
	if err != nil {
		c.logger.Warn("background sweep failed", "realm", id.Realm, "identity", id.ID, "error", err)
	}
	_ = c.store.Update(context.Background(), key, func(s *SessionState) {
		if s.Epoch != epoch {
			return // compacted meanwhile: reset already cleared the flag
		}
		s.SweepRunning = false
		if err == nil {
			s.SweepIDs = append(make([]string, 0, len(ids)), ids...)
		}
	})
}

// fullSweep runs the selector over the composed scopes' full manifest.
func (c *Coordinator) fullSweep(ctx context.Context, key SessionKey, id sdk.Identity, p provider, scopes []sdk.Scope, query string) ([]string, error) {
	rows, err := p.Provider.(sdk.ManifestLister).Manifest(ctx, sdk.ManifestQuery{Realm: id.Realm, Scopes: scopes, Tier: sdk.TierFull})
	if err != nil {
		return nil, fmt.Errorf("full manifest: %w", err)
	}
	var suppressed []string
	if err := c.store.Update(ctx, key, func(s *SessionState) { suppressed = slices.Clone(s.InjectedIDs) }); err != nil {
		return nil, err
	}
	sel, err := c.selector.Select(ctx, sdk.SelectRequest{Identity: id, Query: query, Rows: rows, SuppressedIDs: suppressed, Max: c.cfg.MaxEntries})
	if err != nil {
		return nil, fmt.Errorf("selector: %w", err)
	}
	return sel.IDs, nil
}
