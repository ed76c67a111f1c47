package coordinator

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/sdk"
)

// startSweep starts a background full sweep for a session unless one is
// running or a finished one waits to be taken (at most one per session).
// Its picks feed the session's next turn only. A compaction in the
// meantime (a new epoch) discards them. reqLog is the logger of the
// request that asked for the sweep: the sweep's lines carry its id.
func (c *Coordinator) startSweep(reqLog hclog.Logger, key SessionKey, epoch uint64, id sdk.Identity, p provider, scopes []sdk.Scope, query string) {
	c.sweepsStart.Lock()
	defer c.sweepsStart.Unlock()
	if c.closed {
		return
	}
	if _, running := c.sweeping[key]; running {
		return
	}
	start := false
	err := c.visit(c.sweepCtx, key, func(s *SessionState) bool {
		start = s.Epoch == epoch && s.SweepIDs == nil
		return false
	})
	if err != nil || !start {
		return
	}
	c.sweeping[key] = struct{}{}
	c.sweeps.Add(1)
	go c.sweep(reqLog, key, epoch, id, p, slices.Clone(scopes), query)
}

func (c *Coordinator) sweep(reqLog hclog.Logger, key SessionKey, epoch uint64, id sdk.Identity, p provider, scopes []sdk.Scope, query string) {
	defer c.sweeps.Done()
	defer func() {
		c.sweepsStart.Lock()
		delete(c.sweeping, key)
		c.sweepsStart.Unlock()
	}()
	ctx, cancel := context.WithTimeout(c.sweepCtx, c.cfg.SweepTimeout)
	defer cancel()
	ctx = hclog.WithContext(ctx, reqLog)
	start := time.Now()
	ids, err := c.fullSweep(ctx, key, id, p, scopes, query)
	c.metrics.Recalled(SurfaceSweep, id.Realm, time.Since(start), MetricCode(err))
	if err != nil {
		c.log(ctx).Warn("background sweep failed", "realm", id.Realm, "identity", id.ID, "error", err)
	}
	if err != nil {
		return
	}
	// The picks wait for the session's next turn, in the store so that a
	// restart or another host sharing it keeps them. The sweep's own time
	// may be spent (it keeps the pages done when it runs out), so the write
	// has the store's bound alone; Close still waits for it.
	if err := c.visit(context.WithoutCancel(ctx), key, func(s *SessionState) bool {
		if s.Epoch != epoch {
			return false // compacted meanwhile: the picks are stale
		}
		s.SweepIDs = append(make([]string, 0, len(ids)), ids...)
		return true
	}); err != nil {
		c.log(ctx).Warn("background sweep: session store", "realm", id.Realm, "identity", id.ID, "error", err)
	}
}

// returnSweep puts back the sweep picks a turn took (snap.swept) when its
// recall failed before weighing them: they wait for the next turn again,
// unless a compaction or another sweep came meanwhile. The turn's time
// may be spent, so the write has the store's bound alone.
func (c *Coordinator) returnSweep(ctx context.Context, key SessionKey, snap turnSnapshot) {
	if snap.swept == nil {
		return
	}
	err := c.visit(context.WithoutCancel(ctx), key, func(s *SessionState) bool {
		if s.Epoch != snap.epoch || s.SweepIDs != nil {
			return false
		}
		s.SweepIDs = snap.swept
		return true
	})
	if err != nil {
		c.log(ctx).Warn("a failed turn's sweep picks were not put back", "realm", key.Realm, "identity", key.Identity, "error", err)
	}
}

// fullSweep runs the selector over the composed scopes' full manifest,
// page by page (Config.Sweep.PageRows rows per Select), within the sweep's
// time bound. A manifest above WarnRows is logged; above MaxRows it is cut
// to the ranked rows first, then the newest. When several pages picked more
// than MaxEntries ids, one last Select over the picked rows narrows them.
// Should the time bound end the sweep after some pages, their picks stand.
func (c *Coordinator) fullSweep(ctx context.Context, key SessionKey, id sdk.Identity, p provider, scopes []sdk.Scope, query string) ([]string, error) {
	lister, ok := p.Lister()
	if !ok {
		return nil, fmt.Errorf("full manifest: %w", errUndeclared(sdk.CapManifest))
	}
	rows, truncated, err := ListFullMemory(ctx, lister, sdk.ManifestQuery{Realm: id.Realm, Scopes: scopes})
	if err != nil {
		return nil, fmt.Errorf("full manifest: %w", err)
	}
	// As a turn's working set: rows outside the scopes are other
	// identities' memory, their titles too, and never reach the selector.
	rows, foreign := inScopes(rows, scopes, func(r *sdk.ManifestRow) sdk.Scope { return r.Scope })
	c.outOfScope(ctx, id, faultManifest, foreign)
	lim := c.cfg.Sweep
	if truncated {
		c.log(ctx).Warn("background sweep: the full manifest holds more rows than the host reads; the sweep sees the first the provider listed",
			"realm", id.Realm, "identity", id.ID, "read", sdk.MaxFullManifestRows)
	}
	if len(rows) > lim.WarnRows {
		c.log(ctx).Warn("background sweep over a large manifest", "realm", id.Realm, "identity", id.ID,
			"rows", len(rows), "warn_rows", lim.WarnRows, "max_rows", lim.MaxRows)
	}
	if len(rows) > lim.MaxRows {
		rows = truncateRows(rows, lim.MaxRows)
		c.log(ctx).Warn("background sweep truncated the manifest: ranked rows first, then the newest", "realm", id.Realm, "identity", id.ID, "kept", len(rows))
	}
	var suppressed []string
	if err := c.visit(ctx, key, func(s *SessionState) bool { suppressed = slices.Clone(s.InjectedIDs); return false }); err != nil {
		return nil, err
	}
	// The host drops suppressed picks itself (selectRecords).
	exclude, _ := wireIDs(suppressed)
	rows = withoutUnsent(rows, suppressed)
	ask := func(page []sdk.ManifestRow) ([]string, error) {
		sel, err := c.selectAmong(ctx, sdk.SelectRequest{Identity: id, Query: query, Rows: page, SuppressedIDs: exclude, Max: c.cfg.MaxEntries})
		return sel.IDs, err
	}
	var picked []string
	pages := 0
	for start := 0; start < len(rows); start += lim.PageRows {
		ids, err := ask(rows[start:min(start+lim.PageRows, len(rows))])
		if err != nil {
			if pages > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				c.log(ctx).Warn("background sweep ran out of time; keeping the pages done", "realm", id.Realm, "identity", id.ID,
					"pages_done", pages, "rows_done", start, "rows", len(rows))
				break
			}
			return nil, fmt.Errorf("selector, rows %d..%d: %w", start, min(start+lim.PageRows, len(rows)), err)
		}
		pages++
		for _, rid := range ids {
			if !slices.Contains(picked, rid) {
				picked = append(picked, rid)
			}
		}
	}
	if pages <= 1 || len(picked) <= c.cfg.MaxEntries {
		return picked, nil
	}
	byID := make(map[string]sdk.ManifestRow, len(rows))
	for _, r := range rows {
		byID[r.ID] = r
	}
	finalists := make([]sdk.ManifestRow, 0, len(picked))
	for _, rid := range picked {
		if r, ok := byID[rid]; ok {
			finalists = append(finalists, r)
		}
	}
	ids, err := ask(finalists)
	if err != nil {
		// The pages' own picks still beat nothing.
		c.log(ctx).Warn("background sweep: narrowing the pages' picks failed; keeping the first ones", "realm", id.Realm, "identity", id.ID, "error", err)
		return picked[:c.cfg.MaxEntries], nil
	}
	return ids, nil
}

// truncateRows keeps n rows: the ranked ones by rank, then the unranked
// ones by update time, newest first.
func truncateRows(rows []sdk.ManifestRow, n int) []sdk.ManifestRow {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b sdk.ManifestRow) int {
		if (a.Rank > 0) != (b.Rank > 0) {
			if a.Rank > 0 {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(b.Rank, a.Rank); c != 0 {
			return c
		}
		return b.UpdatedAt.Compare(a.UpdatedAt)
	})
	return rows[:n]
}
