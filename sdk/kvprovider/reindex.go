package kvprovider

import (
	"context"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
)

var _ sdk.Reindexer = (*Provider)(nil)

// progressGap spaces the progress reports of a rebuild.
const progressGap = 100 * time.Millisecond

// Reindex rebuilds the index of realm ("" for every realm) from the
// records in memory and swaps it in (sdk.Reindexer). It tokenizes without
// holding the provider's lock, so recall and writes go on; a record
// written or forgotten meanwhile is a stored record whose pointer changed,
// and the swap, under the lock, re-derives exactly those.
func (p *Provider) Reindex(ctx context.Context, realmName string, progress func(done, total int)) (int, error) {
	// One at a time: a second waits; a canceled one ends within 256
	// records.
	select {
	case p.reindexing <- struct{}{}:
		defer func() { <-p.reindexing }()
	case <-ctx.Done():
		return 0, p.errorf("reindex: %w", ctx.Err())
	}

	seen, err := p.reindexSnapshot(ctx, realmName)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, recs := range seen {
		total += len(recs)
	}
	report := func(int, int) {}
	if progress != nil {
		var last time.Time
		report = func(done, total int) {
			if now := time.Now(); now.Sub(last) >= progressGap || done == total {
				last = now
				progress(done, total)
			}
		}
	}
	ix, err := index.New(indexOptions)
	if err != nil {
		return 0, err
	}
	done := 0
	report(0, total)
	for _, recs := range seen {
		for _, r := range recs {
			if err := ix.Put(docOf(r)); err != nil {
				return 0, p.errorf("reindex %s/%s: %w", r.Realm, r.ID, err)
			}
			done++
			if done%256 == 0 {
				if err := ctx.Err(); err != nil {
					return 0, p.errorf("reindex: %w", err)
				}
				report(done, total)
			}
		}
	}

	// In scope order, so a query of one scope passes over the others'
	// postings; ix has no searches yet, so this stalls nothing.
	ix.Cluster(0)

	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ready(ctx); err != nil {
		return 0, err
	}
	// Re-derive what changed since the snapshot: a record is replaced by
	// a new value on every write, so a changed pointer is a changed record.
	for name, rm := range p.realms {
		if realmName != "" && name != realmName {
			continue
		}
		then := seen[name]
		for id, r := range rm.recs {
			if then[id] == r {
				continue
			}
			if r.Status == sdk.StatusActive {
				if err := ix.Put(docOf(r)); err != nil {
					return 0, p.errorf("reindex %s/%s: %w", r.Realm, r.ID, err)
				}
			} else {
				ix.Delete(name, id)
			}
		}
		for id := range then {
			if rm.recs[id] == nil {
				ix.Delete(name, id)
			}
		}
	}
	// ix holds the reindexed realms only.
	n := ix.Len()
	if err := p.ix.Replace(ix, realmName); err != nil {
		return 0, p.errorf("reindex: %w", err)
	}
	report(n, n)
	return n, nil
}

// reindexSnapshot answers the active records of realmName (every realm for
// "") by realm and id, as stored now: the ones the index holds.
func (p *Provider) reindexSnapshot(ctx context.Context, realmName string) (map[string]map[string]*sdk.Record, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if err := p.ready(ctx); err != nil {
		return nil, err
	}
	seen := map[string]map[string]*sdk.Record{}
	for name, rm := range p.realms {
		if realmName != "" && name != realmName {
			continue
		}
		recs := make(map[string]*sdk.Record, len(rm.recs))
		for id, r := range rm.recs {
			if r.Status == sdk.StatusActive {
				recs[id] = r
			}
		}
		seen[name] = recs
	}
	return seen, nil
}
