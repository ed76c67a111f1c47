package coordinator

import (
	"context"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/usage"
)

// maxWidening bounds how much wider than asked a working set is read again
// when episodes crowded it: one more read of at most this many times k.
const maxWidening = 8

// ListMemory lists the manifest rows that stand for what memory holds:
// the provider's manifest without episodes (records of kind episode, the
// compaction archive's verbatim messages). Episodes stay recallable; in a
// summary of memory (the build's index, the selector's working set, the
// MCP index) each one would be a "user, message 12 of conversation X" row
// spending the budget and the selector's attention on transcript lines.
//
// The filter is host-side because the manifest query has no kind option:
// adding one means a wire field, every provider's SQL and index code, and
// a host-side filter anyway for a plugin built before it. Episodes are the
// newest never-used rows after a compaction, so they fill a working set
// first. Its readers use k rows (IndexRows per scope, SelectorRows): when
// the filter left fewer than k of an answer that may have held more, the
// working set is read once more with maxWidening times k, and assembled
// anew with k as asked: the top k used rows, then the newest unused, at
// most 2k rows like any working set. That bounds the cost (two reads, the second at most
// maxWidening times k) and so the cure: an unused record with maxWidening
// times k unused episodes newer than it may be left out, and the set hold
// fewer rows than asked (the used records still show). A kind filter in
// the provider would lift the bound. The full tier is one read,
// filtered.
func ListMemory(ctx context.Context, l sdk.ManifestLister, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	rows, err := l.Manifest(ctx, q)
	if err != nil {
		return nil, err
	}
	kept := withoutEpisodes(rows)
	// An answer under k rows is the whole working set: a wider read finds
	// nothing more.
	if q.Tier != sdk.TierWorkingSet || len(kept) >= q.K || len(rows) < q.K || q.K >= usage.MaxWorkingSetK {
		return kept, nil
	}
	wide := q
	wide.K = min(q.K*maxWidening, usage.MaxWorkingSetK)
	if rows, err = l.Manifest(ctx, wide); err != nil {
		return nil, err
	}
	var used, unused []sdk.ManifestRow
	for _, r := range withoutEpisodes(rows) {
		if r.Rank > 0 {
			used = append(used, r)
		} else {
			unused = append(unused, r)
		}
	}
	return usage.WorkingSet(q.K, used, func(n int) ([]sdk.ManifestRow, error) { return unused[:min(n, len(unused))], nil })
}

// ListFullMemory is ListMemory's full tier. truncated reports that the
// scopes hold more rows than the host reads of a full manifest
// (sdk.MaxFullManifestRows): rows are then of the first the provider
// listed, episodes left out after the cut, so a caller can say so.
func ListFullMemory(ctx context.Context, l sdk.ManifestLister, q sdk.ManifestQuery) (rows []sdk.ManifestRow, truncated bool, err error) {
	q.Tier = sdk.TierFull
	if rows, err = l.Manifest(ctx, q); err != nil {
		return nil, false, err
	}
	rows, truncated = CutFullManifest(rows)
	return withoutEpisodes(rows), truncated, nil
}

// CutFullManifest answers the rows of a full manifest the host serves,
// and whether it cut them: the host's client reads
// sdk.MaxFullManifestRows rows and one more, which says there were more.
func CutFullManifest(rows []sdk.ManifestRow) ([]sdk.ManifestRow, bool) {
	if len(rows) > sdk.MaxFullManifestRows {
		return rows[:sdk.MaxFullManifestRows], true
	}
	return rows, false
}

// withoutEpisodes answers rows less the episodes (rows is left as it is).
func withoutEpisodes(rows []sdk.ManifestRow) []sdk.ManifestRow {
	out := make([]sdk.ManifestRow, 0, len(rows))
	for _, r := range rows {
		if r.Kind != sdk.KindEpisode {
			out = append(out, r)
		}
	}
	return out
}
