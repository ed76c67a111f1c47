package bleve

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	blevesearch "github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/memhost/memhost/sdk"
	memindex "github.com/memhost/memhost/sdk/index"
	"github.com/memhost/memhost/sdk/usage"
)

// Remember stores records all or nothing. Every record is validated
// before anything is written; then the new ones go to the index in one
// batch, which scorch answers only once it is durable. A record whose
// scope already holds an active or quarantined record with the same
// content hash (in the index or earlier in this batch) is not stored
// again: its existing id is answered in its place, and an expired copy
// takes the new record's expiry.
func (p *Provider) Remember(ctx context.Context, realm string, records []sdk.Record) ([]string, error) {
	done, err := p.begin(realm)
	if err != nil {
		return nil, err
	}
	defer done()
	now := time.Now().UTC()
	recs := make([]sdk.Record, len(records))
	supplied := make([]bool, len(records))
	for i := range records {
		r := records[i]
		r.Tags = slices.Clone(r.Tags)
		supplied[i] = r.ID != ""
		if err := prepare(&r, realm, now); err != nil {
			return nil, fmt.Errorf("bleve: records[%d]: %w", i, err)
		}
		recs[i] = r
	}
	if len(recs) == 0 {
		return []string{}, nil
	}
	ri, err := p.realm(realm, true)
	if err != nil {
		return nil, storageError("", err)
	}
	if err := ri.lockWrites(ctx); err != nil {
		return nil, err
	}
	defer ri.wmu.Unlock()
	ids, fresh, revived, err := ri.plan(ctx, recs, supplied, now)
	if err != nil {
		return nil, err
	}
	if err := ri.write(ctx, append(fresh, revived...), ri.usageKeys(revived), nil); err != nil {
		return nil, err
	}
	return ids, nil
}

// usageKeys answers the stored usage keys of recs, records the realm
// holds that a write puts again.
func (ri *realmIndex) usageKeys(recs []sdk.Record) map[string]float64 {
	if len(recs) == 0 {
		return nil
	}
	keys := make(map[string]float64, len(recs))
	for _, r := range recs {
		keys[r.ID] = ri.cat.usageKeyOf(r.ID)
	}
	return keys
}

// prepare validates r for realm and fills what the store owns, usage
// counters included: usage is the store's to count.
func prepare(r *sdk.Record, realm string, now time.Time) error {
	r.UseCount, r.LastUsedAt = 0, time.Time{}
	if err := r.Prepare(realm, now); err != nil {
		return err
	}
	for _, t := range []struct {
		field string
		at    time.Time
	}{{"created_at", r.CreatedAt}, {"expires_at", r.ExpiresAt}} {
		if !t.at.IsZero() && (t.at.Year() < 1 || t.at.Year() > 9999) {
			return &sdk.FieldError{Field: t.field, Problem: fmt.Sprintf("year %d is outside 1-9999", t.at.Year()), Err: sdk.ErrInvalid}
		}
	}
	return nil
}

// plan answers each record's id and the records that must be stored:
// duplicates answer the existing id, and a caller-chosen id that is taken
// by other content is a conflict. revived are the holders of duplicates
// that had expired by now, with the duplicate's expiry: written again,
// the content is recallable as the writer meant, as in every provider.
func (ri *realmIndex) plan(ctx context.Context, recs []sdk.Record, supplied []bool, now time.Time) (ids []string, fresh, revived []sdk.Record, err error) {
	var keys, chosen []string
	for i := range recs {
		if answersDuplicates(recs[i].Status) {
			keys = append(keys, dedupKey(recs[i].Scope, recs[i].ContentHash))
		}
		if supplied[i] {
			chosen = append(chosen, recs[i].ID)
		}
	}
	known, err := ri.duplicates(ctx, keys)
	if err != nil {
		return nil, nil, nil, err
	}
	taken, err := ri.stored(ctx, chosen)
	if err != nil {
		return nil, nil, nil, err
	}
	ids = make([]string, len(recs))
	inBatch := map[string]bool{}
	for i := range recs {
		r := &recs[i]
		if answersDuplicates(r.Status) {
			key := dedupKey(r.Scope, r.ContentHash)
			if holder, ok := known[key]; ok {
				ids[i] = holder.ID
				if !holder.ExpiresAt.IsZero() && !holder.ExpiresAt.After(now) {
					holder.ExpiresAt, holder.UpdatedAt = r.ExpiresAt, now
					known[key] = holder
					revived = append(revived, holder)
				}
				continue
			}
			known[key] = *r
		}
		if _, ok := taken[r.ID]; ok || inBatch[r.ID] {
			return nil, nil, nil, fmt.Errorf("bleve: records[%d]: id %s already holds another record: %w", i, r.ID, sdk.ErrConflict)
		}
		inBatch[r.ID] = true
		ids[i] = r.ID
		fresh = append(fresh, *r)
	}
	return ids, fresh, revived, nil
}

// lockWrites takes the realm's write lock, first waiting (as long as ctx
// allows) for the catalog load that holds it when the realm was opened. A
// realm being rebuilt refuses writes at once: the rebuild holds the lock
// for as long as it takes.
func (ri *realmIndex) lockWrites(ctx context.Context) error {
	if err := ri.refuseWhileRebuilding("write"); err != nil {
		return err
	}
	select {
	case <-ri.cat.loaded:
	case <-ctx.Done():
		return fmt.Errorf("bleve: realm %s is loading its catalog: %w", ri.realm, ctx.Err())
	}
	if err := ri.wmu.LockCtx(ctx); err != nil {
		return fmt.Errorf("bleve: write to realm %s: waiting for the realm's other writes: %w", ri.realm, err)
	}
	if err := ri.refuseWhileRebuilding("write"); err != nil {
		ri.wmu.Unlock()
		return err
	}
	if ri.closed {
		ri.reopen()
		if ri.closed {
			ri.wmu.Unlock()
			return fmt.Errorf("bleve: write to realm %s: %w", ri.realm, ri.closedError())
		}
	}
	return nil
}

// write indexes put (with their usage keys, 0 when absent) and deletes
// del in one durable batch, then mirrors it in the catalog.
func (ri *realmIndex) write(ctx context.Context, put []sdk.Record, keys map[string]float64, del []string) error {
	if len(put) == 0 && len(del) == 0 {
		return nil
	}
	put, keys, contexts, err := ri.threadContext(ctx, put, keys, del)
	if err != nil {
		return err
	}
	docs, entries, err := buildDocuments(put, keys, contexts)
	if err != nil {
		return err
	}
	b := ri.idx.NewBatch()
	for i, doc := range docs {
		if err := b.IndexAdvanced(doc); err != nil {
			return fmt.Errorf("bleve: index record %s: %w", put[i].ID, err)
		}
	}
	for _, id := range del {
		b.Delete(id)
	}
	// The statistics land with the batch, so they are never ahead of it.
	b.SetInternal(statsKey, ri.cat.statsAfter(entries, del).encode())
	// Past this point the batch is not interrupted: it lands whole or not.
	if err := sdk.ContextErr(ctx); err != nil {
		return fmt.Errorf("bleve: write to realm %s: %w", ri.realm, err)
	}
	if err := ri.checkSpace(put); err != nil {
		return err
	}
	if err := ri.idx.Batch(b); err != nil {
		// A batch whose persist failed (the disk full after all, a quota,
		// a file-size limit) stays in scorch's in-memory index with its
		// segment closed, and the next search or write panics on it: the
		// index is opened again from disk, which holds every write before
		// this one and nothing of it, as the catalog does.
		ri.reopen()
		return fmt.Errorf("bleve: write to realm %s: %w", ri.realm, storageError(ri.path, err))
	}
	ri.cat.put(entries)
	ri.cat.remove(del)
	ri.journalWrite(put, keys, del)
	return nil
}

// buildDocuments builds the documents of put on every core: cutting text
// into terms is most of a write's own work.
func buildDocuments(put []sdk.Record, keys map[string]float64, contexts map[string][]string) ([]*document.Document, []catEntry, error) {
	docs := make([]*document.Document, len(put))
	entries := make([]catEntry, len(put))
	errs := make([]error, len(put))
	workers := min(runtime.GOMAXPROCS(0), (len(put)+63)/64)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(put) {
					return
				}
				r := &put[i]
				docs[i], entries[i], errs[i] = buildDocument(r, keys[r.ID], contexts[r.ID])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return docs, entries, nil
}

// duplicates answers, for each dedup key present in the index, a record
// holding it. The catalog's fingerprints answer most keys
// without a search: a key it has never seen is in no record, and a hit is
// confirmed from the stored record (a fingerprint collision falls back to
// searching the index).
func (ri *realmIndex) duplicates(ctx context.Context, keys []string) (map[string]sdk.Record, error) {
	out := map[string]sdk.Record{}
	if len(keys) == 0 {
		return out, nil
	}
	hits := map[string]string{} // key -> candidate id
	var ids []string
	for _, k := range keys {
		if id, ok := ri.cat.duplicateOf(dedupPrint(k)); ok {
			hits[k] = id
			ids = append(ids, id)
		}
	}
	if len(hits) == 0 {
		return out, nil
	}
	found, err := ri.lookup(ctx, ids)
	if err != nil {
		return nil, err
	}
	var unsure []query.Query
	for k, id := range hits {
		if r, ok := found[id]; ok && answersDuplicates(r.Status) && dedupKey(r.Scope, r.ContentHash) == k {
			out[k] = r
			continue
		}
		unsure = append(unsure, termQuery(fieldDedup, k))
	}
	if len(unsure) == 0 {
		return out, nil
	}
	recs, err := ri.search(ctx, "find duplicates", query.NewDisjunctionQuery(unsure), 2*len(unsure))
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		out[dedupKey(r.Scope, r.ContentHash)] = r
	}
	return out, nil
}

// stored answers the records among ids that the realm holds, reading
// only those the catalog lists (a freshly minted id costs no search).
func (ri *realmIndex) stored(ctx context.Context, ids []string) (map[string]sdk.Record, error) {
	known := ri.cat.known(ids)
	if len(known) == 0 {
		return map[string]sdk.Record{}, nil
	}
	return ri.lookup(ctx, known)
}

// lookup answers the stored records among ids.
func (ri *realmIndex) lookup(ctx context.Context, ids []string) (map[string]sdk.Record, error) {
	out := map[string]sdk.Record{}
	if len(ids) == 0 {
		return out, nil
	}
	recs, err := ri.search(ctx, "fetch", query.NewDocIDQuery(ids), len(ids))
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		out[r.ID] = r
	}
	return out, nil
}

// search answers the stored records of up to size documents matching q.
func (ri *realmIndex) search(ctx context.Context, op string, q query.Query, size int) ([]sdk.Record, error) {
	req := blevesearch.NewSearchRequestOptions(q, size, 0, false)
	req.Fields = []string{fieldRecord}
	req.Score = "none"
	return ri.records(ctx, op, req)
}

// records answers the stored records of req's hits.
func (ri *realmIndex) records(ctx context.Context, op string, req *blevesearch.SearchRequest) ([]sdk.Record, error) {
	res, err := ri.run(ctx, op, req)
	if err != nil {
		return nil, err
	}
	return storedRecords(res)
}

// storedRecords answers the stored records of res's hits.
func storedRecords(res *blevesearch.SearchResult) ([]sdk.Record, error) {
	out := make([]sdk.Record, 0, len(res.Hits))
	for _, h := range res.Hits {
		r, err := storedRecord(h)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Get answers the records found among ids, of any status, in the order
// asked (an id asked twice is answered once).
func (p *Provider) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	done, err := p.begin(realm)
	if err != nil {
		return nil, err
	}
	defer done()
	ri, err := p.realm(realm, false)
	if err != nil || ri == nil {
		return []sdk.Record{}, err
	}
	found, err := ri.lookup(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]sdk.Record, 0, len(found))
	for _, id := range ids {
		if r, ok := found[id]; ok {
			out = append(out, r)
			delete(found, id)
		}
	}
	return out, nil
}

// ReadThread answers the records at places of threads, in no order. Only
// an active record holds a place (buildDocument), and only an active one
// is shown as a neighbour.
func (p *Provider) ReadThread(ctx context.Context, realm string, places []sdk.ThreadPlace) ([]sdk.Record, error) {
	done, err := p.begin(realm)
	if err != nil {
		return nil, err
	}
	defer done()
	ri, err := p.realm(realm, false)
	if err != nil || ri == nil || len(places) == 0 {
		return []sdk.Record{}, err
	}
	keys := make([]string, len(places))
	for i, pl := range places {
		keys[i] = placeKey(pl.Scope, pl.Thread, pl.Seq)
	}
	first := make(map[string]int, len(keys))
	for _, k := range keys {
		first[k] = sdk.MaxPlaceReads
	}
	return ri.firstAtPlaces(ctx, "read thread", first)
}

// firstAtPlaces answers the stored records at the places first names
// (placeKey), of each its first first[place] by id. One search serves
// them all when they hold fewer; otherwise each place is searched for its
// own first ones by id, so a place crowded by a flood of writes is never
// read whole.
func (ri *realmIndex) firstAtPlaces(ctx context.Context, op string, first map[string]int) ([]sdk.Record, error) {
	keys := slices.Sorted(maps.Keys(first))
	terms := make([]query.Query, len(keys))
	size := 0
	for i, k := range keys {
		terms[i] = termQuery(fieldPlace, k)
		size += first[k]
	}
	// Unscored, a search stops at a full page: a full one may be partial.
	req := blevesearch.NewSearchRequestOptions(query.NewDisjunctionQuery(terms), size, 0, false)
	req.Fields = []string{fieldRecord}
	req.Score = "none"
	res, err := ri.run(ctx, op, req)
	if err != nil {
		return nil, err
	}
	if len(res.Hits) < size {
		recs, err := storedRecords(res)
		if err != nil {
			return nil, err
		}
		return firstPerPlace(recs, first), nil
	}
	var out []sdk.Record
	for i, t := range terms {
		req := blevesearch.NewSearchRequestOptions(t, first[keys[i]], 0, false)
		req.Fields = []string{fieldRecord}
		req.Score = "none"
		req.SortBy([]string{"_id"})
		recs, err := ri.records(ctx, op, req)
		if err != nil {
			return nil, err
		}
		out = append(out, recs...)
	}
	return out, nil
}

// firstPerPlace keeps of each place in recs, all of which hold one, its
// first first[place] records by id.
func firstPerPlace(recs []sdk.Record, first map[string]int) []sdk.Record {
	slices.SortFunc(recs, func(a, b sdk.Record) int { return strings.Compare(a.ID, b.ID) })
	count := map[string]int{}
	return slices.DeleteFunc(recs, func(r sdk.Record) bool {
		if r.Thread == nil {
			return true
		}
		k := placeKey(r.Scope, r.Thread.ID, r.Thread.Seq)
		count[k]++
		return count[k] > first[k]
	})
}

// Forget deletes the records among ids and answers how many there were.
// Ids not present are not an error.
func (p *Provider) Forget(ctx context.Context, realm string, ids []string) (int, error) {
	done, err := p.begin(realm)
	if err != nil {
		return 0, err
	}
	defer done()
	ri, err := p.realm(realm, false)
	if err != nil || ri == nil {
		return 0, err
	}
	if err := ri.lockWrites(ctx); err != nil {
		return 0, err
	}
	defer ri.wmu.Unlock()
	found, err := ri.lookup(ctx, ids)
	if err != nil {
		return 0, err
	}
	del := make([]string, 0, len(found))
	for id := range found {
		del = append(del, id)
	}
	if err := ri.write(ctx, nil, nil, del); err != nil {
		return 0, err
	}
	return len(del), nil
}

// Supersede stores replacement and marks oldID superseded, in one batch.
// The replacement inherits the old record's scope and kind when it names
// none. Retrying a supersede that already happened answers the same id;
// a replacement identical to the old record changes nothing.
func (p *Provider) Supersede(ctx context.Context, realm, oldID string, replacement sdk.Record) (string, error) {
	done, err := p.begin(realm)
	if err != nil {
		return "", err
	}
	defer done()
	if replacement.Supersedes != "" && replacement.Supersedes != oldID {
		return "", &sdk.FieldError{Field: "supersedes", Problem: fmt.Sprintf("names %s, but the record superseded is %s", replacement.Supersedes, oldID), Err: sdk.ErrInvalid}
	}
	ri, err := p.realm(realm, false)
	if err != nil {
		return "", err
	}
	if ri == nil {
		return "", fmt.Errorf("bleve: supersede %s in realm %s: %w", oldID, realm, sdk.ErrNotFound)
	}
	if err := ri.lockWrites(ctx); err != nil {
		return "", err
	}
	defer ri.wmu.Unlock()
	found, err := ri.lookup(ctx, []string{oldID})
	if err != nil {
		return "", err
	}
	old, ok := found[oldID]
	if !ok {
		return "", fmt.Errorf("bleve: supersede %s in realm %s: %w", oldID, realm, sdk.ErrNotFound)
	}
	repl := replacement
	repl.Tags = slices.Clone(repl.Tags)
	repl.Supersedes = oldID
	if repl.Scope == "" {
		repl.Scope = old.Scope
	}
	if repl.Kind == "" {
		repl.Kind = old.Kind
	}
	now := time.Now().UTC()
	if err := prepare(&repl, realm, now); err != nil {
		return "", fmt.Errorf("bleve: replacement: %w", err)
	}
	ids, fresh, revived, err := ri.plan(ctx, []sdk.Record{repl}, []bool{replacement.ID != ""}, now)
	if err != nil {
		return "", err
	}
	newID := ids[0]
	if newID == oldID {
		return oldID, ri.write(ctx, revived, ri.usageKeys(revived), nil)
	}
	retired := old.Status == sdk.StatusSuperseded || old.Status == sdk.StatusTombstoned
	if retired {
		if len(fresh) == 0 && old.Status == sdk.StatusSuperseded {
			// A retry, when the replacement's content is held by the
			// record that superseded oldID; another holder of it is not.
			held, err := ri.lookup(ctx, []string{newID})
			if err != nil {
				return "", err
			}
			if h, ok := held[newID]; ok && h.Supersedes == oldID {
				return newID, nil
			}
		}
		return "", fmt.Errorf("bleve: record %s is already %s: %w", oldID, old.Status, sdk.ErrConflict)
	}
	old.Status = sdk.StatusSuperseded
	old.UpdatedAt = now
	keys := ri.usageKeys(append(revived, old))
	if err := ri.write(ctx, append(append(fresh, revived...), old), keys, nil); err != nil {
		return "", err
	}
	return newID, nil
}

// MarkUsed counts one use of each distinct id at time at, and moves its
// last use to at when later. Ids not present are skipped: usage is
// telemetry and never fails a turn over a record forgotten meanwhile.
func (p *Provider) MarkUsed(ctx context.Context, realm string, ids []string, at time.Time) error {
	return p.countUses(ctx, realm, sdk.OneUseEach(ids), at)
}

// CountUses counts each use's uses of its record at time at, as MarkUsed
// counts one.
func (p *Provider) CountUses(ctx context.Context, realm string, uses []sdk.Use, at time.Time) error {
	if err := sdk.ValidateUses("uses", uses); err != nil {
		return err
	}
	return p.countUses(ctx, realm, uses, at)
}

// countUses applies uses, which list each id once.
func (p *Provider) countUses(ctx context.Context, realm string, uses []sdk.Use, at time.Time) error {
	done, err := p.begin(realm)
	if err != nil {
		return err
	}
	defer done()
	if at.IsZero() {
		at = time.Now()
	}
	if at.Year() < 1 || at.Year() > 9999 {
		return &sdk.FieldError{Field: "at", Problem: fmt.Sprintf("year %d is outside 1-9999", at.Year()), Err: sdk.ErrInvalid}
	}
	at = at.UTC()
	ri, err := p.realm(realm, false)
	if err != nil || ri == nil {
		return err
	}
	if err := ri.lockWrites(ctx); err != nil {
		return err
	}
	defer ri.wmu.Unlock()
	ids := make([]string, len(uses))
	for i, u := range uses {
		ids[i] = u.ID
	}
	found, err := ri.lookup(ctx, ids)
	if err != nil {
		return err
	}
	put := make([]sdk.Record, 0, len(found))
	keys := make(map[string]float64, len(found))
	for _, u := range uses {
		r, ok := found[u.ID]
		if !ok {
			continue
		}
		keys[r.ID] = usage.KeyN(ri.cat.usageKeyOf(r.ID), r.UseCount > 0, u.Count, at)
		r.UseCount = min(r.UseCount+u.Count, sdk.MaxRecordUseCount)
		if at.After(r.LastUsedAt) {
			r.LastUsedAt = at
		}
		put = append(put, r)
	}
	return ri.write(ctx, put, keys, nil)
}

// reopen opens the realm's index again from disk after a failed batch;
// the caller holds wmu. Should that fail too, the realm is closed: reads
// and writes answer unavailable, and the next write tries again (a
// second Close of the closed index would panic).
func (ri *realmIndex) reopen() {
	ri.idxMu.Lock()
	defer ri.idxMu.Unlock()
	if !ri.closed {
		if err := ri.idx.Close(); err != nil {
			ri.log.Warn("closing the realm index after a failed write", "realm", ri.realm, "err", err)
		}
	}
	idx, err := blevesearch.OpenUsing(ri.path, runtimeConfig())
	if err != nil {
		ri.closed = true
		ri.log.Error("reopening the realm index after a failed write; the next write tries again", "realm", ri.realm, "path", ri.path, "err", err)
		return
	}
	ri.idx, ri.closed = idx, false
	// The reopened index numbers its segments as on disk.
	ri.filters.mu.Lock()
	ri.filters.entries = nil
	ri.filters.mu.Unlock()
}

// closedError is what a realm whose index could not be reopened answers.
func (ri *realmIndex) closedError() error {
	return fmt.Errorf("its index %s could not be opened again after a failed write (the plugin's log says why); the next write tries again: %w", ri.path, sdk.ErrUnavailable)
}

// storageError classifies a failure writing the index at dir (or,
// with dir empty, one the error names already): a full disk, a read-only
// store, or a file or directory the plugin's user may not write (EACCES,
// EPERM), as sdk.FileStorageError. Scorch formats the system error into
// its message (%v, not %w), so the errno is matched by its text when
// errors.Is cannot see it, and said alone, after the index's directory:
// scorch's text names the segment file twice around its own "persist err".
func storageError(dir string, err error) error {
	if errors.Is(err, sdk.ErrNoSpace) || errors.Is(err, sdk.ErrReadOnly) || errors.Is(err, sdk.ErrPermission) {
		return err
	}
	if e := sdk.FileStorageError(err); e != err {
		return e
	}
	msg := err.Error()
	for _, errno := range []syscall.Errno{syscall.ENOSPC, syscall.EDQUOT, syscall.EFBIG, syscall.EROFS, syscall.EACCES, syscall.EPERM} {
		if strings.Contains(msg, errno.Error()) {
			if dir == "" {
				return fmt.Errorf("save the index: %w", sdk.FileStorageError(errno))
			}
			return fmt.Errorf("save the index %s: %w", dir, sdk.FileStorageError(errno))
		}
	}
	return err
}

// spaceReserve is the free space a write leaves for scorch's segment
// files, merges and bolt root. Scorch applies a batch in memory before it
// persists it, and a persist that fails (ENOSPC) leaves the in-memory
// segment unusable (later searches panic), so a write is refused before it
// starts when the disk is nearly full, not after scorch has failed.
const spaceReserve = 8 << 20

// checkSpace refuses a write that would leave less than spaceReserve free,
// counting a generous four times the records' text for the new segment.
func (ri *realmIndex) checkSpace(put []sdk.Record) error {
	free, ok := freeBytes(ri.path)
	if !ok {
		return nil
	}
	need := uint64(spaceReserve)
	for i := range put {
		r := &put[i]
		need += 4 * uint64(len(r.Title)+len(r.Description)+len(r.Body)+len(strings.Join(r.Tags, " "))+256)
	}
	if free < need {
		return fmt.Errorf("bleve: write to realm %s: %d bytes free under %s, the write needs %d: %w", ri.realm, free, ri.path, need, sdk.ErrNoSpace)
	}
	return nil
}

// threadContext answers the batch to write for put and del with thread
// context: each active threaded record of put with the terms of its
// neighbours as they will be after the batch, and the neighbours whose
// context the batch changes added to put (with their usage keys), so the
// batch lands with every context current.
func (ri *realmIndex) threadContext(ctx context.Context, put []sdk.Record, keys map[string]float64, del []string) ([]sdk.Record, map[string]float64, map[string][]string, error) {
	// A place is in one scope's thread: records of other scopes under
	// the same thread id are no neighbours.
	type place struct {
		scope sdk.Scope
		id    string
		seq   int64
	}
	var changed []place // places a record of the batch leaves or joins
	joining := map[place]int{}
	for i := range put {
		if t := put[i].Thread; t != nil {
			p := place{put[i].Scope, t.ID, t.Seq}
			changed = append(changed, p)
			if put[i].Status == sdk.StatusActive {
				joining[p]++
			}
		}
	}
	ids := make([]string, 0, len(put)+len(del))
	for i := range put {
		ids = append(ids, put[i].ID)
	}
	ids = append(ids, del...)
	// The stored versions: a record may leave its place (forgotten,
	// superseded, moved).
	old, err := ri.stored(ctx, ids)
	if err != nil {
		return nil, nil, nil, err
	}
	leaving := map[place]int{}
	for _, r := range old {
		if r.Thread != nil && r.Status == sdk.StatusActive {
			p := place{r.Scope, r.Thread.ID, r.Thread.Seq}
			changed = append(changed, p)
			leaving[p]++
		}
	}
	// At a changed place, the records whose context may change after the
	// batch: the participants and one past them for each record joining
	// (a newcomer with a lesser id pushes one out of taking part).
	settled := func(p place) int { return memindex.MaxPlaceDocs + max(1, joining[p]) }
	if len(changed) == 0 {
		return put, keys, nil, nil
	}
	// Every place within two spans of a changed one: its neighbours, and
	// theirs, which their context is rebuilt from.
	want := map[place]bool{}
	for _, p := range changed {
		// Neighbours of neighbours, not seq±2·ContextSpan: a seq near
		// either end of int64 must not wrap around.
		want[p] = true
		for _, n := range memindex.Neighbours(p.seq) {
			want[place{p.scope, p.id, n}] = true
			for _, s := range memindex.Neighbours(n) {
				want[place{p.scope, p.id, s}] = true
			}
		}
	}
	// Of each place, the first records that can be among those settled
	// once the batch's records have left it: a place crowded by a flood is
	// not read whole on every write beside it.
	wanted := make(map[string]int, len(want))
	for p := range want {
		wanted[placeKey(p.scope, p.id, p.seq)] = settled(p) + leaving[p]
	}
	stored, err := ri.firstAtPlaces(ctx, "find thread neighbours", wanted)
	if err != nil {
		return nil, nil, nil, err
	}
	// The active threaded records after the batch, by place.
	after := map[string]*sdk.Record{}
	for i := range stored {
		after[stored[i].ID] = &stored[i]
	}
	for _, id := range del {
		delete(after, id)
	}
	inBatch := map[string]bool{}
	for i := range put {
		r := &put[i]
		inBatch[r.ID] = true
		if r.Thread != nil && r.Status == sdk.StatusActive {
			after[r.ID] = r
		} else {
			delete(after, r.ID)
		}
	}
	byPlace := map[place][]*sdk.Record{}
	for _, r := range after {
		p := place{r.Scope, r.Thread.ID, r.Thread.Seq}
		byPlace[p] = append(byPlace[p], r)
	}
	// As in sdk/index, only the least ids of a crowded place take part.
	at := make(map[place][]*sdk.Record, len(byPlace))
	for p, rs := range byPlace {
		slices.SortFunc(rs, func(a, b *sdk.Record) int { return strings.Compare(a.ID, b.ID) })
		at[p] = rs[:min(len(rs), memindex.MaxPlaceDocs)]
	}
	contextOf := func(r *sdk.Record) []string {
		if !slices.ContainsFunc(at[place{r.Scope, r.Thread.ID, r.Thread.Seq}], func(n *sdk.Record) bool { return n.ID == r.ID }) {
			return nil
		}
		var out []string
		for _, s := range memindex.Neighbours(r.Thread.Seq) {
			for _, n := range at[place{r.Scope, r.Thread.ID, s}] {
				if n.ID != r.ID {
					out = append(out, recordTerms(n)...)
				}
			}
		}
		return out
	}
	contexts := map[string][]string{}
	for i := range put {
		if r := &put[i]; r.Thread != nil && r.Status == sdk.StatusActive {
			contexts[r.ID] = contextOf(r)
		}
	}
	// Records outside the batch whose context changes are re-indexed: the
	// participants beside a changed place, and at it, also the first one
	// past them (a newcomer with a lesser id pushes it out of taking part).
	var extra []sdk.Record
	reindex := func(rs []*sdk.Record) {
		for _, n := range rs {
			if !inBatch[n.ID] {
				inBatch[n.ID] = true
				extra = append(extra, *n)
				contexts[n.ID] = contextOf(n)
			}
		}
	}
	for _, p := range changed {
		rs := byPlace[p]
		reindex(rs[:min(len(rs), settled(p))])
		for _, s := range memindex.Neighbours(p.seq) {
			reindex(at[place{p.scope, p.id, s}])
		}
	}
	if len(extra) > 0 {
		all := make(map[string]float64, len(keys)+len(extra))
		for k, v := range keys {
			all[k] = v
		}
		for i := range extra {
			all[extra[i].ID] = ri.cat.usageKeyOf(extra[i].ID)
		}
		put, keys = append(slices.Clip(put), extra...), all
	}
	return put, keys, contexts, nil
}
