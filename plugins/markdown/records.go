package markdown

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
)

// The SDK's server has validated every request below (realm, scopes, ids,
// batch sizes, limits) before it reaches the store.

func (s *store) recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	limit := q.Limit
	switch {
	case limit <= 0:
		limit = sdk.DefaultRecallLimit
	case limit > maxRecallLimit:
		limit = maxRecallLimit
	}
	s.refresh()
	if err := ctx.Err(); err != nil {
		return nil, ctxErr(err)
	}
	hits := []sdk.Hit{}
	terms := index.QueryTerms(q.Query)
	if len(terms) == 0 && q.QueryVector == nil {
		return hits, nil
	}
	scopes := make([]string, len(q.Scopes))
	for i, sc := range q.Scopes {
		scopes[i] = string(sc)
	}
	s.idx.RLock()
	defer s.idx.RUnlock()
	ri := s.realms[q.Realm]
	if ri == nil {
		return hits, nil
	}
	iq := index.Query{Realm: q.Realm, Terms: terms, Scopes: scopes, ExcludeIDs: q.ExcludeIDs,
		Tags: q.Tags, ExcludeTags: q.ExcludeTags, NowMs: s.opts.now().UnixMilli(), Limit: limit,
		Vector: q.QueryVector, Model: q.VectorModel, LexicalWeight: q.Fusion.Lexical, SemanticWeight: q.Fusion.Semantic}
	iq.SinceMs, iq.UntilMs = q.WindowMillis()
	found, err := ri.ix.Search(iq)
	if errors.Is(err, index.ErrInvalid) {
		// Only the query vector can be wrong here (its model or length).
		return nil, fmt.Errorf("markdown: recall: %w: %w", sdk.ErrInvalid, err)
	}
	if err != nil {
		return nil, fmt.Errorf("markdown: recall: %w", err)
	}
	for _, h := range found {
		// The engine and the records change together under idx.
		hits = append(hits, sdk.Hit{Record: cloneRecord(&ri.byID[h.ID].rec), Score: h.Score})
	}
	return hits, nil
}

// maxRecallLimit caps a query's limit, as the SDK's server does.
const maxRecallLimit = sdk.MaxBatch

// cloneRecord copies r so callers never share memory with the index.
func cloneRecord(r *sdk.Record) sdk.Record {
	c := *r
	c.Tags = slices.Clone(r.Tags)
	return c
}

// prepare validates a record for realm and fills what the store owns,
// at millisecond precision. It also refuses times a file cannot hold.
func prepare(r *sdk.Record, realm string, now time.Time) error {
	r.Tags = slices.Clone(r.Tags)
	if err := r.Prepare(realm, now); err != nil {
		return err
	}
	return checkFileTimes(r)
}

// checkFileTimes truncates a prepared record's times to milliseconds and
// refuses those a file cannot hold.
func checkFileTimes(r *sdk.Record) error {
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"created_at", &r.CreatedAt}, {"updated_at", &r.UpdatedAt}, {"expires_at", &r.ExpiresAt}, {"last_used_at", &r.LastUsedAt}, {"occurred_at", &r.OccurredAt}} {
		if f.t.IsZero() {
			continue
		}
		*f.t = f.t.UTC().Truncate(time.Millisecond)
		if y := f.t.Year(); y < 1 || y > 9999 {
			return &sdk.FieldError{Field: f.name, Problem: fmt.Sprintf("year %d is outside 1-9999", y), Err: sdk.ErrInvalid}
		}
	}
	if r.UseCount < 0 || r.UseCount > sdk.MaxRecordUseCount {
		return &sdk.FieldError{Field: "use_count", Problem: fmt.Sprintf("%d is outside 0..%d", r.UseCount, sdk.MaxRecordUseCount), Err: sdk.ErrInvalid}
	}
	return nil
}

// pickExisting answers the record a duplicate write should resolve to: a
// live one (active, else quarantined) holding the content, or nil. A
// superseded or tombstoned copy holds nothing: the content is written
// anew, as every provider does, rather than answered with a record that
// is never recalled.
func pickExisting(ds []*doc, skip string) *doc {
	var found *doc
	for _, d := range ds {
		if d.rec.ID == skip {
			continue
		}
		if d.rec.Status == sdk.StatusActive {
			return d
		}
		if found == nil && d.rec.Status == sdk.StatusQuarantined {
			found = d
		}
	}
	return found
}

// revival answers the write that gives d's record, which holds the
// content of a record written again, that record's expiry when its own
// has passed by now (nil when it has not): the content is recallable
// again, as the writer meant.
func revival(root string, d *doc, expires time.Time, now time.Time) (*pendingWrite, error) {
	if d.rec.ExpiresAt.IsZero() || d.rec.ExpiresAt.After(now) {
		return nil, nil
	}
	rec := cloneRecord(&d.rec)
	rec.ExpiresAt, rec.UpdatedAt = expires, now
	w, err := newPendingWrite(root, rec, d)
	if err != nil {
		return nil, err
	}
	w.fields = recordFields(&w.rec)
	return w, nil
}

// pendingWrite is a file a write call is about to put down.
type pendingWrite struct {
	key    fileKey
	path   string
	data   []byte
	rec    sdk.Record
	fields [][]string // recordFields(&rec)
	stamp  fileStamp
	// was is the indexed record a rewrite replaces, nil for a new file
	// (rolled back by removing it). The file must still be what the
	// index read (writeAll checks), or the rewrite, built from the index,
	// would overwrite a hand edit it has not seen; a rollback puts was
	// back.
	was *doc
}

// errFileChanged says a file to be rewritten changed on disk since the
// index read it; the file is queued for the next refresh, and the call
// may be made again.
var errFileChanged = fmt.Errorf("a record's file changed on disk since it was read: %w", sdk.ErrConflict)

func newPendingWrite(root string, r sdk.Record, was *doc) (*pendingWrite, error) {
	k := fileKey{r.Realm, r.Scope, r.ID}
	if err := checkKey(k); err != nil {
		return nil, err
	}
	p, err := abs(root, k.rel())
	if err != nil {
		return nil, err
	}
	w := &pendingWrite{key: k, path: p, rec: r, was: was}
	w.data = renderRecord(&w.rec)
	return w, nil
}

// checkFree refuses to write a new record over a file the index does not
// hold (a hand-written file that is not a valid record): it is someone's
// work, not ours to replace. Generated ids never collide, so only chosen
// ids are checked.
func checkFree(path string) error {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s already exists and is not a valid record (see the log); fix or remove it first: %w", path, sdk.ErrConflict)
	}
	return nil
}

// doc is the written record as ri, its realm, is to hold it. A new
// record comes after every record of the realm among equal scores; a
// rewrite keeps its place (put). The caller holds idx.
func (w *pendingWrite) doc(ri *realmIndex) *doc {
	d := &doc{rec: w.rec, stamp: w.stamp, digest: fileDigest(w.data)}
	if w.was == nil {
		d.seq = ri.writeSeq(w.rec.UpdatedAt)
	}
	return d
}

// unchangedOnDisk reports whether the file at path is still the one d was
// read from: the same stamp and, when that stamp is racy (an edit within
// the same clock tick keeps it), the same bytes.
func unchangedOnDisk(path string, d *doc) bool {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || stampOf(fi) != d.stamp {
		return false
	}
	if !d.racy {
		return true
	}
	data, err := os.ReadFile(path)
	return err == nil && fileDigest(data) == d.digest
}

// writeWorkers bounds how many files a batch writes at once: a batch is
// bound by fsync latency, which parallel writers overlap.
const writeWorkers = 16

// writeAll puts writes down durably: every file to a temp file and
// fsynced (in parallel), then, for a batch of several, the batch's intent
// (see writeIntent), then each temp renamed into place, then each
// directory synced once. On any failure it undoes what it did (removes
// temp and new files, puts rewritten ones back) and answers the error, so
// a batch is all or nothing; a crash during the renames is finished at
// the next start (finishBatches). A ctx that ends before the renames
// stores nothing: a caller past its deadline has been answered already.
// The caller holds mu.
func (s *store) writeAll(ctx context.Context, ws []*pendingWrite) error {
	dirs := map[string]bool{}
	for _, w := range ws {
		if d := filepath.Dir(w.path); !dirs[d] {
			if err := s.ensureDir(w.key.dirRel()); err != nil {
				return err
			}
			dirs[d] = true
		}
	}
	tmps := make([]string, len(ws))
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(writeWorkers, len(ws)) {
		wg.Go(func() {
			for i := range next {
				tmps[i], ws[i].stamp, errs[i] = writeTemp(ws[i].path, ws[i].data)
			}
		})
	}
	for i := range ws {
		next <- i
	}
	close(next)
	wg.Wait()
	removeTemps := func(from int) {
		for _, tmp := range tmps[from:] {
			if tmp != "" {
				os.Remove(tmp)
			}
		}
	}
	// The first failure alone: a full disk fails every file of the batch
	// alike, and the answer says so once.
	if i := slices.IndexFunc(errs, func(err error) bool { return err != nil }); i >= 0 {
		removeTemps(0)
		return errs[i]
	}
	if err := sdk.ContextErr(ctx); err != nil {
		removeTemps(0)
		return fmt.Errorf("markdown: write: %w", err)
	}
	for _, w := range ws {
		if w.was != nil && !unchangedOnDisk(w.path, w.was) {
			removeTemps(0)
			s.requeue(w.key)
			return fmt.Errorf("markdown: write %s: %w", w.path, errFileChanged)
		}
	}
	var intent string
	if len(ws) > 1 {
		var err error
		if intent, err = s.writeIntent(tmps, ws); err != nil {
			removeTemps(0)
			return err
		}
	}
	undo := func(renamed []*pendingWrite, err error) error {
		if intent != "" {
			// Undone here, not finished at the next start.
			os.Remove(intent)
		}
		for _, w := range renamed {
			if w.was == nil {
				os.Remove(w.path)
			} else if _, rerr := writeAtomic(w.path, renderRecord(&w.was.rec)); rerr != nil {
				s.log.Error("cannot undo a rewrite after a failed write", "file", w.path, "error", rerr)
			}
		}
		for d := range dirs {
			syncDir(d)
		}
		return err
	}
	for i, w := range ws {
		if err := os.Rename(tmps[i], w.path); err != nil {
			removeTemps(i)
			return undo(ws[:i], fmt.Errorf("markdown: write %s: %w", w.path, err))
		}
	}
	for d := range dirs {
		if err := syncDir(d); err != nil {
			return undo(ws, fmt.Errorf("markdown: sync %s: %w", d, err))
		}
	}
	if intent != "" {
		if err := os.Remove(intent); err != nil {
			// Harmless: finishing it finds no temp file left.
			s.log.Warn("cannot remove a finished batch's intent", "file", intent, "error", err.Error())
		}
	}
	return nil
}

func (s *store) remember(ctx context.Context, realm string, records []sdk.Record) ([]string, error) {
	now := timeNow(s.opts.now)
	prepared := make([]sdk.Record, len(records))
	for i := range records {
		prepared[i] = records[i]
		if err := prepare(&prepared[i], realm, now); err != nil {
			return nil, fmt.Errorf("markdown: record %d: %w", i, err)
		}
	}
	// Tokenized before the lock, so concurrent writers overlap it with
	// each other's fsyncs (a duplicate's terms are cut for nothing).
	fields := make([][][]string, len(prepared))
	for i := range prepared {
		fields[i] = recordFields(&prepared[i])
	}
	s.refresh()
	s.mu.Lock()
	defer s.mu.Unlock()
	ri := s.realms[realm] // read without idx: only holders of mu change it
	ids := make([]string, len(records))
	var writes []*pendingWrite
	batchContent := map[contentKey]string{}
	batchIDs := map[string]bool{}
	for i := range prepared {
		r := &prepared[i]
		ck := contentKey{r.Scope, r.ContentHash}
		if id, ok := batchContent[ck]; ok {
			ids[i] = id
			continue
		}
		if ri != nil {
			if d := pickExisting(ri.sameContent(r.Scope, r.ContentHash), ""); d != nil {
				w, err := revival(s.root, d, r.ExpiresAt, now)
				if err != nil {
					return nil, fmt.Errorf("markdown: record %d: %w", i, err)
				}
				if w != nil {
					writes = append(writes, w)
				}
				ids[i] = d.rec.ID
				batchContent[ck] = d.rec.ID
				continue
			}
			if ri.get(r.ID) != nil {
				return nil, fmt.Errorf("markdown: record %d: id %q is already used by another record: %w", i, r.ID, sdk.ErrConflict)
			}
		}
		if batchIDs[r.ID] {
			return nil, fmt.Errorf("markdown: record %d: id %q appears twice in the batch: %w", i, r.ID, sdk.ErrConflict)
		}
		w, err := newPendingWrite(s.root, *r, nil)
		if err == nil && records[i].ID != "" {
			err = checkFree(w.path)
		}
		if err != nil {
			return nil, fmt.Errorf("markdown: record %d: %w", i, err)
		}
		w.fields = fields[i]
		writes = append(writes, w)
		batchContent[ck] = r.ID
		batchIDs[r.ID] = true
		ids[i] = r.ID
	}
	if err := s.writeAll(ctx, writes); err != nil {
		return nil, err
	}
	// Durable now: only then does recall see them.
	s.idx.Lock()
	ri = s.realmLocked(realm)
	for _, w := range writes {
		ri.put(w.doc(ri), w.fields)
	}
	s.idx.Unlock()
	s.noteChange()
	return ids, nil
}

// realmLocked answers realm's index, creating it. The caller holds idx.
func (s *store) realmLocked(realm string) *realmIndex {
	ri := s.realms[realm]
	if ri == nil {
		ri = newRealmIndex(realm)
		s.realms[realm] = ri
	}
	return ri
}

func (s *store) get(realm string, ids []string) ([]sdk.Record, error) {
	return s.read(realm, func(*realmIndex) []string { return ids }), nil
}

// readThread answers the records at places of realm's threads. The
// engine knows the places of active records only; the others are no
// neighbours anyway.
func (s *store) readThread(realm string, places []sdk.ThreadPlace) []sdk.Record {
	return s.read(realm, func(ri *realmIndex) []string { return ri.ix.AtPlaces(realm, indexPlaces(places)) })
}

// read answers the records of realm with the ids pick names, once the
// index reflects the files, under one read lock so ids and records agree.
func (s *store) read(realm string, pick func(*realmIndex) []string) []sdk.Record {
	s.refresh()
	s.idx.RLock()
	defer s.idx.RUnlock()
	out := []sdk.Record{}
	ri := s.realms[realm]
	if ri == nil {
		return out
	}
	for _, id := range pick(ri) {
		if d := ri.get(id); d != nil {
			out = append(out, cloneRecord(&d.rec))
		}
	}
	return out
}

func (s *store) forget(realm string, ids []string) (int, error) {
	s.refresh()
	s.mu.Lock()
	defer s.mu.Unlock()
	ri := s.realms[realm]
	if ri == nil {
		return 0, nil
	}
	var removed []string
	dirs := map[string]bool{}
	var firstErr error
	for _, id := range ids {
		d := ri.get(id)
		if d == nil || slices.Contains(removed, id) {
			continue
		}
		k := fileKey{realm, d.rec.Scope, id}
		p, err := abs(s.root, k.rel())
		if err == nil {
			err = checkPlainDir(s.root, k.dirRel())
		}
		if err == nil {
			if err = os.Remove(p); err != nil {
				// abs and checkPlainDir say "markdown:" already.
				err = fmt.Errorf("markdown: forget %s: %w", id, err)
			}
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			firstErr = err
			break
		}
		removed = append(removed, id)
		dirs[filepath.Dir(p)] = true
	}
	for d := range dirs {
		if err := syncDir(d); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("markdown: sync %s: %w", d, err)
		}
	}
	s.idx.Lock()
	for _, id := range removed {
		ri.remove(id)
	}
	s.idx.Unlock()
	if len(removed) > 0 {
		s.noteChange()
	}
	// Files removed before a failure stay removed (forgetting is
	// idempotent, so a retry finishes the job).
	return len(removed), firstErr
}

func (s *store) supersede(ctx context.Context, realm, oldID string, rep sdk.Record) (string, error) {
	if rep.Supersedes != "" && rep.Supersedes != oldID {
		return "", &sdk.FieldError{Field: "supersedes", Problem: fmt.Sprintf("names %q but the record superseded is %q", rep.Supersedes, oldID), Err: sdk.ErrInvalid}
	}
	rep.Supersedes = oldID
	s.refresh()
	s.mu.Lock()
	defer s.mu.Unlock()
	var old *doc
	ri := s.realms[realm]
	if ri != nil {
		old = ri.get(oldID)
	}
	if old == nil {
		return "", fmt.Errorf("markdown: supersede: no record %q in realm %q: %w", oldID, realm, sdk.ErrNotFound)
	}
	// The replacement inherits what it does not say.
	if rep.Scope == "" {
		rep.Scope = old.rec.Scope
	}
	if rep.Kind == "" {
		rep.Kind = old.rec.Kind
	}
	now := timeNow(s.opts.now)
	if err := prepare(&rep, realm, now); err != nil {
		return "", fmt.Errorf("markdown: supersede: %w", err)
	}
	same := ri.sameContent(rep.Scope, rep.ContentHash)
	for _, d := range same {
		if d.rec.Supersedes == oldID && old.rec.Status == sdk.StatusSuperseded {
			return d.rec.ID, nil // a retry of a supersede that succeeded
		}
	}
	if old.rec.Status == sdk.StatusSuperseded {
		return "", fmt.Errorf("markdown: supersede: record %q is already superseded: %w", oldID, sdk.ErrConflict)
	}
	if old.rec.Status == sdk.StatusTombstoned {
		return "", fmt.Errorf("markdown: supersede: record %q is tombstoned: %w", oldID, sdk.ErrConflict)
	}
	var writes []*pendingWrite
	newID := rep.ID
	if d := pickExisting(same, oldID); d != nil {
		newID = d.rec.ID // the replacement already exists: point at it
		w, err := revival(s.root, d, rep.ExpiresAt, now)
		if err != nil {
			return "", fmt.Errorf("markdown: supersede: %w", err)
		}
		if w != nil {
			writes = append(writes, w)
		}
	} else {
		if ri.get(rep.ID) != nil {
			return "", fmt.Errorf("markdown: supersede: id %q is already used by another record: %w", rep.ID, sdk.ErrConflict)
		}
		w, err := newPendingWrite(s.root, rep, nil)
		if err == nil {
			err = checkFree(w.path)
		}
		if err != nil {
			return "", fmt.Errorf("markdown: supersede: %w", err)
		}
		w.fields = recordFields(&w.rec)
		writes = append(writes, w)
	}
	marked := cloneRecord(&old.rec)
	marked.Status = sdk.StatusSuperseded
	marked.UpdatedAt = now
	mw, err := newPendingWrite(s.root, marked, old)
	if err != nil {
		return "", fmt.Errorf("markdown: supersede: %w", err)
	}
	// Both files or neither: writeAll removes the new one and puts the
	// old one back if anything fails.
	if err := s.writeAll(ctx, append(writes, mw)); err != nil {
		return "", err
	}
	s.idx.Lock()
	for _, w := range writes {
		ri.put(w.doc(ri), w.fields)
	}
	ri.put(mw.doc(ri), nil) // superseded: out of the engine
	s.idx.Unlock()
	s.noteChange()
	return newID, nil
}
