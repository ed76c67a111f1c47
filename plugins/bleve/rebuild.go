package bleve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	blevesearch "github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	index "github.com/blevesearch/bleve_index_api"
	"github.com/memhost/memhost/sdk"
)

// A rebuild writes a fresh index of this layout from the records the old
// one stores, at <realm>.bleve.rebuild, then swaps the two by renames:
// <realm>.bleve becomes <realm>.bleve.stale, the rebuild becomes
// <realm>.bleve, and the stale one is removed. Every state a crash can
// leave is repaired at the next start (recoverRebuilds), and in each the
// old index is whole until the new one is in place, so nothing is lost.
const (
	rebuildSuffix = ".bleve.rebuild"
	staleSuffix   = ".bleve.stale"
)

// rebuildBatch is how many records a rebuild writes per durable batch.
const rebuildBatch = sdk.MaxBatch

// Reindex rebuilds the index of realm ("" for every realm) from the
// records it stores, and answers how many records the rebuild copied
// (writes made meanwhile come on top). A current realm keeps serving
// reads and writes during it: writes are journaled and replayed into the
// new index before the swap. A stale realm refuses writes with
// ErrRebuilding until it is done. progress, when not nil, is called after
// each batch with the records done and the total over every realm asked
// for, and once at the end with the count answered; it must not block. A
// reindex of a realm waits for one already running there. A rebuild
// killed or canceled half-way leaves the old index in place (see
// recoverRebuilds) and can simply be run again.
func (p *Provider) Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	if realm != "" {
		if err := sdk.ValidateRealm(realm); err != nil {
			return 0, fmt.Errorf("bleve: reindex: %w", err)
		}
	}
	done, err := p.begin(realm)
	if err != nil {
		return 0, err
	}
	defer done()
	var names []string
	p.mu.Lock()
	if realm == "" {
		for name := range p.realms {
			names = append(names, name)
		}
	} else if p.realms[realm] != nil {
		names = append(names, realm)
	}
	p.mu.Unlock()
	slices.Sort(names)
	// Progress runs over every realm asked for: done never goes back.
	grand := 0
	for _, name := range names {
		if ri, _ := p.realm(name, false); ri != nil {
			grand += ri.liveCount()
		}
	}
	total := 0
	for _, name := range names {
		ri, err := p.realm(name, false)
		if err != nil {
			return total, err
		}
		base := total
		var realmProgress func(done, total int)
		if progress != nil {
			realmProgress = func(done, _ int) { progress(base+done, max(grand, base+done)) }
		}
		n, err := ri.reindex(ctx, realmProgress)
		total += n
		if err != nil {
			return total, err
		}
	}
	if progress != nil {
		progress(total, total)
	}
	return total, nil
}

// liveCount answers the records the realm's index holds (0 when unknown).
func (ri *realmIndex) liveCount() int {
	ri.idxMu.RLock()
	defer ri.idxMu.RUnlock()
	n, err := ri.idx.DocCount()
	if err != nil {
		return 0
	}
	return int(n)
}

// reindex rebuilds the realm under its write lock.
// A reindex waits for one already running on the realm; a current realm
// is rebuilt live (writes go on meanwhile), a stale one under its write
// lock.
func (ri *realmIndex) reindex(ctx context.Context, progress func(done, total int)) (int, error) {
	if err := ri.reindexing.LockCtx(ctx); err != nil {
		return 0, fmt.Errorf("bleve: reindex realm %s: waiting for the reindex already running: %w", ri.realm, err)
	}
	defer ri.reindexing.Unlock()
	if err := ri.wmu.LockCtx(ctx); err != nil {
		return 0, fmt.Errorf("bleve: reindex realm %s: waiting for its writes: %w", ri.realm, err)
	}
	defer ri.wmu.Unlock()
	ri.idxMu.RLock()
	stale := ri.stale
	ri.idxMu.RUnlock()
	return ri.rebuild(ctx, progress, !stale)
}

// journalOp is one write made to a realm while it is rebuilt live, to be
// replayed into the rebuilt index before the swap.
type journalOp struct {
	put  []sdk.Record
	keys map[string]float64
	del  []string
}

// record journals a write when a live rebuild is running; the caller
// holds wmu.
func (ri *realmIndex) journalWrite(put []sdk.Record, keys map[string]float64, del []string) {
	if ri.journal == nil {
		return
	}
	op := journalOp{put: slices.Clone(put), keys: make(map[string]float64, len(keys)), del: slices.Clone(del)}
	for k, v := range keys {
		op.keys[k] = v
	}
	*ri.journal = append(*ri.journal, op)
}

// startRebuild rebuilds a stale realm in the background. Its catalog is
// filled by the rebuild; until then manifests, exports and writes are
// refused with ErrRebuilding.
func (ri *realmIndex) startRebuild() {
	ri.rebuilding.Store(true)
	ri.loading.Add(1)
	go func() {
		defer ri.loading.Done()
		ri.wmu.Lock()
		defer ri.wmu.Unlock()
		if _, err := ri.rebuild(ri.bgCtx, nil, false); err != nil {
			if errors.Is(err, context.Canceled) {
				ri.log.Info("realm index rebuild stopped by shutdown; it restarts at the next start", "realm", ri.realm)
			} else {
				ri.log.Error("realm index rebuild failed; the old index is kept, retry with reindex", "realm", ri.realm, "err", err)
			}
		}
	}()
}

// refuseWhileRebuilding answers ErrRebuilding, with the progress, while
// the realm is rebuilt or stale.
func (ri *realmIndex) refuseWhileRebuilding(op string) error {
	ri.idxMu.RLock()
	stale := ri.stale
	ri.idxMu.RUnlock()
	if !ri.rebuilding.Load() && !stale {
		return nil
	}
	return fmt.Errorf("bleve: %s in realm %s: the index is being rebuilt from its records (%s): %w", op, ri.realm, ri.progress(), ErrRebuilding)
}

// progress describes the state of the realm's rebuild for error messages.
func (ri *realmIndex) progress() string {
	if perr := ri.rebuildErr.Load(); perr != nil && !ri.rebuilding.Load() {
		return fmt.Sprintf("the last rebuild failed: %v; run reindex", *perr)
	}
	return fmt.Sprintf("%d of %d records done", ri.rebuildDone.Load(), ri.rebuildTotal.Load())
}

// rebuild writes the realm's records into a fresh index and swaps it in.
// The caller holds wmu, at entry and on return. Live, it lets writes go on
// while it copies a snapshot (they are journaled) and replays them into
// the new index before the swap; otherwise writes are refused throughout.
func (ri *realmIndex) rebuild(ctx context.Context, progress func(done, total int), live bool) (n int, err error) {
	if !live {
		ri.rebuilding.Store(true)
		defer ri.rebuilding.Store(false)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("bleve: rebuild realm %s: panicked (corrupt index?): %v", ri.realm, r)
		}
		if err != nil {
			ri.rebuildErr.Store(&err)
		} else {
			ri.rebuildErr.Store(nil)
		}
	}()
	start := time.Now()
	tmp := strings.TrimSuffix(ri.path, indexSuffix) + rebuildSuffix
	if err := newEmptyIndex(tmp); err != nil {
		return 0, fmt.Errorf("bleve: rebuild realm %s: create %s: %w", ri.realm, tmp, storageError("", sdk.FileProblem(err)))
	}
	idx, err := blevesearch.OpenUsing(tmp, runtimeConfig())
	if err != nil {
		os.RemoveAll(tmp)
		return 0, fmt.Errorf("bleve: rebuild realm %s: open %s: %w", ri.realm, tmp, err)
	}
	dst := &realmIndex{realm: ri.realm, path: tmp, log: ri.log, idx: idx, cat: newCatalog(), wmu: newWriteLock()}
	dst.cat.finish(nil)
	reader, err := ri.reader()
	if err == nil {
		if live {
			ri.journal = &[]journalOp{}
			ri.wmu.Unlock()
		}
		n, err = ri.copyInto(ctx, dst, progress, reader)
		reader.Close()
		if live {
			ri.wmu.Lock()
			for _, op := range *ri.journal {
				if err != nil {
					break
				}
				err = dst.write(ctx, op.put, op.keys, op.del)
			}
			ri.journal = nil
		}
	}
	if cerr := idx.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.RemoveAll(tmp)
		return n, fmt.Errorf("bleve: rebuild realm %s: %w", ri.realm, err)
	}
	if err := ri.swap(tmp); err != nil {
		return n, fmt.Errorf("bleve: rebuild realm %s: %w", ri.realm, err)
	}
	ri.cat.replace(dst.cat)
	ri.log.Info("rebuilt realm index", "realm", ri.realm, "records", n, "duration_ms", time.Since(start).Milliseconds())
	return n, nil
}

// copyInto writes every live record of the realm's index into dst, in
// durable batches, with its usage key, and reports progress.
func (ri *realmIndex) copyInto(ctx context.Context, dst *realmIndex, progress func(done, total int), reader index.IndexReader) (int, error) {
	snap, ok := reader.(*scorch.IndexSnapshot)
	if !ok {
		return 0, errors.New("the index is not a scorch index")
	}
	count, err := snap.DocCount()
	if err != nil {
		return 0, err
	}
	total := int(count)
	ri.rebuildDone.Store(0)
	ri.rebuildTotal.Store(int64(total))
	ri.log.Info("rebuilding realm index", "realm", ri.realm, "records", total)
	done, logged := 0, time.Now()
	batch := make([]sdk.Record, 0, rebuildBatch)
	keys := map[string]float64{}
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := dst.write(ctx, batch, keys, nil); err != nil {
			return err
		}
		done += len(batch)
		batch, keys = batch[:0], map[string]float64{}
		ri.rebuildDone.Store(int64(done))
		if progress != nil {
			progress(done, total)
		}
		if time.Since(logged) >= 2*time.Second || done == total {
			ri.log.Info("rebuilding realm index", "realm", ri.realm, "done", done, "total", total)
			logged = time.Now()
		}
		return nil
	}
	for _, seg := range snap.Segments() {
		live := seg.DocNumbersLive().Iterator()
		for live.HasNext() {
			num := uint64(live.Next())
			var raw []byte
			var key float64
			var keyErr error
			err := seg.VisitDocument(num, func(name string, _ byte, val []byte, _ []uint64) bool {
				switch name {
				case fieldRecord:
					raw = slices.Clone(val)
				case fieldCatalog:
					var e catEntry
					if e, keyErr = decodeCatalog(string(val)); keyErr == nil {
						key = e.usageKey
					}
				}
				return true
			})
			if err == nil {
				err = keyErr
			}
			if err != nil {
				return done, fmt.Errorf("document %d of segment %d: %w", num, seg.Id(), err)
			}
			r, err := decodeRecord(raw, fmt.Sprintf("document %d of segment %d", num, seg.Id()))
			if err != nil {
				return done, err
			}
			batch = append(batch, r)
			keys[r.ID] = key
			if len(batch) == rebuildBatch {
				if err := flush(); err != nil {
					return done, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return done, err
	}
	return done, nil
}

// swap puts the rebuilt index at tmp in the realm's place and opens it.
func (ri *realmIndex) swap(tmp string) error {
	stale := strings.TrimSuffix(ri.path, indexSuffix) + staleSuffix
	dir := filepath.Dir(ri.path)
	ri.idxMu.Lock()
	defer ri.idxMu.Unlock()
	// A write failing during a live rebuild may have left it closed.
	if !ri.closed {
		if err := ri.idx.Close(); err != nil {
			ri.log.Warn("closing the old realm index before the swap", "realm", ri.realm, "err", err)
		}
	}
	ri.closed = true // until one is opened below
	reopenOld := func(cause error) error {
		if idx, err := blevesearch.OpenUsing(ri.path, runtimeConfig()); err == nil {
			ri.idx, ri.closed = idx, false
		} else {
			cause = errors.Join(cause, fmt.Errorf("reopen the old index: %w", err))
		}
		return cause
	}
	os.RemoveAll(stale)
	if err := os.Rename(ri.path, stale); err != nil {
		os.RemoveAll(tmp)
		return reopenOld(fmt.Errorf("move the old index aside: %w", err))
	}
	if err := os.Rename(tmp, ri.path); err != nil {
		if rerr := os.Rename(stale, ri.path); rerr != nil {
			return fmt.Errorf("put the rebuilt index in place: %w; and put the old one back: %v (the next start repairs this)", err, rerr)
		}
		os.RemoveAll(tmp)
		return reopenOld(fmt.Errorf("put the rebuilt index in place: %w", err))
	}
	if err := syncDir(dir); err != nil {
		ri.log.Warn("sync the index directory after the swap", "dir", dir, "err", err)
	}
	idx, err := blevesearch.OpenUsing(ri.path, runtimeConfig())
	if err != nil {
		return fmt.Errorf("open the rebuilt index %s: %w", ri.path, err)
	}
	ri.idx, ri.stale, ri.closed = idx, false, false
	// The rebuilt index numbers its segments afresh.
	ri.filters.mu.Lock()
	ri.filters.entries = nil
	ri.filters.mu.Unlock()
	if err := os.RemoveAll(stale); err != nil {
		ri.log.Warn("remove the old realm index", "path", stale, "err", err)
	}
	return nil
}

// recoverRebuilds repairs what a rebuild killed part-way leaves in dir: a
// half-written <realm>.bleve.rebuild is removed (the old index is still in
// place, or back in place below), and a <realm>.bleve.stale is either the
// old index moved aside before the rebuilt one took its place (put back)
// or after (removed).
func recoverRebuilds(dir string, log *slog.Logger) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("bleve: read dir %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, staleSuffix) {
			continue
		}
		stale := filepath.Join(dir, name)
		final := filepath.Join(dir, strings.TrimSuffix(name, staleSuffix)+indexSuffix)
		if _, err := os.Stat(final); err == nil {
			log.Warn("removing the old index a finished rebuild replaced", "path", stale)
			if err := os.RemoveAll(stale); err != nil {
				return fmt.Errorf("bleve: remove %s: %w", stale, err)
			}
			continue
		}
		log.Warn("a rebuild was interrupted during its swap; putting the old index back", "path", final)
		if err := os.Rename(stale, final); err != nil {
			return fmt.Errorf("bleve: put %s back at %s: %w", stale, final, err)
		}
	}
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, rebuildSuffix) {
			path := filepath.Join(dir, name)
			log.Warn("removing an index rebuild left unfinished by a crash; the old index is kept", "path", path)
			if err := os.RemoveAll(path); err != nil {
				return fmt.Errorf("bleve: remove %s: %w", path, err)
			}
		}
	}
	return syncDir(dir)
}

// waitCatalog waits for the realm's catalog, refusing at once while the
// realm is stale (its catalog is filled by the rebuild).
func (ri *realmIndex) waitCatalog(ctx context.Context, op string) error {
	ri.idxMu.RLock()
	stale := ri.stale
	ri.idxMu.RUnlock()
	if stale {
		return ri.refuseWhileRebuilding(op)
	}
	return ri.cat.wait(ctx)
}
