package bleve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	blevesearch "github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	index "github.com/blevesearch/bleve_index_api"
	"github.com/memhost/memhost/sdk"
	bolterrors "go.etcd.io/bbolt/errors"
	"golang.org/x/text/unicode/norm"
)

// Index fields. A record's text is one field, fieldTerms, whose postings
// carry BM25F's weighted term frequencies (see termsField): the field
// weights are folded in at write time, so a query term costs one posting
// list instead of one per field. Only active records carry it: a record of
// any other status cannot match, so recall needs no status filter. Usage
// counters live in the stored record and the in-memory catalog, not in
// index fields: nothing queries them.
const (
	fieldTerms = "terms" // weighted terms of tags, title, description, body and thread context
	// place is the keyword of an active threaded record's scope, thread
	// id and seq (placeKey), which its neighbours' writes look it up by.
	fieldPlace = "place"
	fieldScope = "scope" // keyword
	fieldTag   = "tag"   // keyword, case-folded, one per tag
	// dedup is the keyword "scope|content_hash", only on records that
	// answer duplicates; the hash alone is not indexed, as nothing looks
	// a record up by it across scopes.
	fieldDedup   = "dedup"
	fieldRecord  = "record"  // stored only: the whole record as JSON
	fieldCatalog = "catalog" // stored only: the record's catalog entry (see encodeCatalog)
)

// schemaVersion is stored in each index; an index stamped with another
// is stale: it is rebuilt from the records it stores (see rebuild), never
// searched. It names tokenize.Version too, since the terms field holds
// the tokenizer's terms; TestSchemaFollowsTokenizer holds the two
// together. Layout 2 added thread context; layout 3 folds the text fields
// into one weighted terms field and stores each record's length in its
// catalog entry; layout 4 caps the context's frequencies and length
// (memindex.ContextFrequency, ContextLength); layout 5 keeps thread
// context within a scope (its place keys name the scope, and a layout 4
// index holds context drawn from other scopes' records); layout 6 leaves
// the system tags out of the text (memindex.TagText). terms/3: text in
// NFC, case-fold orbits folded (tokenize.Version 3). Layout 7 keys tags
// in NFC (foldTag). terms/4: format characters and variation selectors
// dropped inside words, the kana length mark kept in its run, Thai, Lao,
// Khmer and Myanmar cut into bigrams (tokenize.Version 4). terms/5:
// fullwidth and halfwidth forms folded, Latin ligatures spelled out
// (tokenize.Version 5).
const schemaVersion = "memhost-bleve/7 terms/5"

var (
	schemaKey = []byte("memhost_schema")
	// statsKey holds the realm's BM25 statistics (see bm25Stats), written
	// in every batch, so recall has them before the catalog has loaded.
	statsKey = []byte("memhost_stats")
)

// boltTimeout bounds the wait for bolt's file lock. The directory flock
// normally refuses a second opener first; this covers anything else
// holding root.bolt, so open fails instead of blocking forever.
const boltTimeout = "1s"

// newIndexMapping describes the fields for bleve's own queries (ids,
// dedup, place). Documents are built directly (see buildDocument), not
// walked through the mapping.
func newIndexMapping() (*mapping.IndexMappingImpl, error) {
	im := mapping.NewIndexMapping()
	im.DefaultAnalyzer = keyword.Name
	im.IndexDynamic, im.StoreDynamic, im.DocValuesDynamic = false, false, false
	doc := mapping.NewDocumentStaticMapping()
	doc.AddSubDocumentMapping("_all", mapping.NewDocumentDisabledMapping())
	for _, name := range []string{fieldScope, fieldTag, fieldDedup, fieldPlace} {
		fm := mapping.NewKeywordFieldMapping()
		fm.Analyzer = keyword.Name
		fm.Store, fm.IncludeTermVectors, fm.IncludeInAll, fm.DocValues = false, false, false, false
		fm.SkipFreqNorm = true
		doc.AddFieldMappingsAt(name, fm)
	}
	for _, name := range []string{fieldRecord, fieldCatalog} {
		stored := mapping.NewTextFieldMapping()
		stored.Index, stored.Store, stored.IncludeTermVectors, stored.IncludeInAll, stored.DocValues = false, true, false, false, false
		doc.AddFieldMappingsAt(name, stored)
	}
	im.DefaultMapping = doc
	return im, im.Validate()
}

// realmIndex is one realm's index and catalog. Writers serialize on wmu:
// a write reads (duplicates, counters) before it batches, two writers must
// not interleave between the read and the batch, and the catalog follows
// the index in the same order. A rebuild holds wmu throughout and swaps
// idx under idxMu.
type realmIndex struct {
	realm string
	path  string
	log   *slog.Logger
	cat   *catalog
	wmu   writeLock

	// idxMu is held shared by every search and exclusively by a rebuild's
	// swap of idx; stale is set while idx has another layout.
	idxMu sync.RWMutex
	idx   blevesearch.Index
	stale bool
	// closed is set while idx is closed because opening it again after a
	// failed write failed too; the next write tries again (reopen).
	closed bool
	// filters caches recall's per-segment scope and tag exclusions.
	filters filterCache
	// openStats are the BM25 statistics stored at the last write, which
	// recall uses until the catalog has loaded.
	openStats    bm25Stats
	hasOpenStats bool

	// rebuilding is set while a rebuild holds wmu; done and total count
	// its progress in records.
	rebuilding atomic.Bool
	// reindexing serializes reindexes; journal, set by a live rebuild
	// and guarded by wmu, collects the writes it must replay.
	reindexing                writeLock
	journal                   *[]journalOp
	rebuildDone, rebuildTotal atomic.Int64
	rebuildErr                atomic.Pointer[error]

	stopLoad context.CancelFunc
	bgCtx    context.Context
	loading  sync.WaitGroup
}

// writeLock is a mutex whose Lock can give up when a context ends.
type writeLock struct{ ch chan struct{} }

func newWriteLock() writeLock { return writeLock{ch: make(chan struct{}, 1)} }

func (l writeLock) Lock() { l.ch <- struct{}{} }

func (l writeLock) LockCtx(ctx context.Context) error {
	select {
	case l.ch <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l writeLock) Unlock() { <-l.ch }

func runtimeConfig() map[string]any {
	return map[string]any{
		"bolt_timeout": boltTimeout,
		"unsafe_batch": false, // scorch's default; durability depends on it
	}
}

// schemaPrefix starts every layout stamp this plugin ever wrote; an index
// stamped with another version of it is stale, anything else is foreign.
const schemaPrefix = "memhost-bleve/"

// openRealm opens an existing index, turning every failure (and any panic
// from a corrupt file) into one clear error. An index of an older layout
// opens stale and is rebuilt from its records in the background; recall
// fails with ErrRebuilding until that has finished.
func openRealm(path, realm string, log *slog.Logger) (ri *realmIndex, err error) {
	defer func() {
		if r := recover(); r != nil {
			ri, err = nil, fmt.Errorf("bleve: index %s is corrupt (open panicked: %v); restore it from a backup or move it aside to start the realm empty", path, r)
		}
	}()
	if err := checkNewestSnapshot(path); err != nil {
		return nil, openError(path, err)
	}
	idx, err := blevesearch.OpenUsing(path, runtimeConfig())
	if err != nil {
		return nil, openError(path, err)
	}
	v, err := idx.GetInternal(schemaKey)
	if err != nil || !strings.HasPrefix(string(v), schemaPrefix) {
		idx.Close()
		if err == nil {
			err = fmt.Errorf("schema %q, want %q", v, schemaVersion)
		}
		return nil, fmt.Errorf("bleve: index %s was not written by this plugin (%v); move it aside", path, err)
	}
	ri = &realmIndex{realm: realm, path: path, log: log, idx: idx, cat: newCatalog(), wmu: newWriteLock(), reindexing: newWriteLock()}
	ri.bgCtx, ri.stopLoad = context.WithCancel(context.Background())
	if string(v) != schemaVersion {
		ri.stale = true
		log.Warn("realm index has another layout; rebuilding it from its stored records", "realm", realm, "path", path, "layout", string(v), "want", schemaVersion)
		ri.startRebuild()
		return ri, nil
	}
	if raw, err := idx.GetInternal(statsKey); err == nil && raw != nil {
		ri.openStats, ri.hasOpenStats = decodeStats(raw)
	}
	ri.startLoad()
	return ri, nil
}

// startLoad fills the catalog in the background; the realm's writers
// wait for it, readers of the catalog wait for it, recall does not.
func (ri *realmIndex) startLoad() {
	ri.loading.Add(1)
	go func() {
		defer ri.loading.Done()
		ri.wmu.Lock()
		defer ri.wmu.Unlock()
		err := func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("panic: %v", r)
				}
			}()
			return ri.load(ri.bgCtx)
		}()
		if err != nil {
			err = fmt.Errorf("bleve: load the catalog of realm %s from %s (corrupt index?): %w", ri.realm, ri.path, err)
		}
		ri.cat.finish(err)
	}()
}

// bm25 answers the realm's BM25 statistics: the catalog's once loaded,
// before that those stored with the last write.
func (ri *realmIndex) bm25(ctx context.Context) (bm25Stats, error) {
	select {
	case <-ri.cat.loaded:
	default:
		if ri.hasOpenStats {
			return ri.openStats, nil
		}
		if err := ri.cat.wait(ctx); err != nil {
			return bm25Stats{}, err
		}
	}
	if ri.cat.loadErr != nil {
		return bm25Stats{}, ri.cat.loadErr
	}
	ri.cat.mu.RLock()
	defer ri.cat.mu.RUnlock()
	return ri.cat.stats, nil
}

func (ri *realmIndex) reader() (index.IndexReader, error) {
	if ri.closed {
		return nil, ri.closedError()
	}
	adv, err := ri.idx.Advanced()
	if err != nil {
		return nil, err
	}
	return adv.Reader()
}

func openError(path string, err error) error {
	if errors.Is(err, bolterrors.ErrTimeout) {
		return fmt.Errorf("bleve: index %s is locked by another process: %v: %w", path, err, sdk.ErrConflict)
	}
	return fmt.Errorf("bleve: index %s cannot be opened (corrupt or not a bleve index: %v); restore it from a backup or move it aside to start the realm empty", path, err)
}

// checkNewestSnapshot opens the index read-only and loads its newest
// snapshot. Scorch, on finding its newest snapshot unloadable, silently
// falls back to an older one and later deletes the newer: acknowledged
// writes would vanish without a word. Read-only, scorch runs no persister
// or merger, so nothing is deleted while we look.
func checkNewestSnapshot(path string) error {
	cfg := runtimeConfig()
	cfg["read_only"] = true
	idx, err := blevesearch.OpenUsing(path, cfg)
	if err != nil {
		return err
	}
	defer idx.Close()
	adv, err := idx.Advanced()
	if err != nil {
		return err
	}
	s, ok := adv.(*scorch.Scorch)
	if !ok {
		return fmt.Errorf("index type %T is not scorch", adv)
	}
	epochs, err := s.RootBoltSnapshotEpochs()
	if err != nil {
		return err
	}
	if len(epochs) == 0 {
		return errors.New("no snapshot")
	}
	snap, err := s.LoadSnapshot(epochs[0]) // newest first
	if err != nil {
		return fmt.Errorf("newest snapshot %d does not load: %w", epochs[0], err)
	}
	return snap.DecRef()
}

// createRealm builds a new index beside its final path and renames it into
// place, so a crash mid-creation leaves only a .partial directory (removed
// at the next start), never a half-made index that fails to open.
func createRealm(dir, realm string, log *slog.Logger) (*realmIndex, error) {
	final := filepath.Join(dir, realm+indexSuffix)
	partial := filepath.Join(dir, realm+partialSuffix)
	err := newEmptyIndex(partial)
	if err == nil {
		err = os.Rename(partial, final)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.RemoveAll(partial)
		// The system's reason alone: the partial directory it was made
		// in is this one's, named once.
		return nil, fmt.Errorf("bleve: create index %s: %w", final, sdk.FileProblem(err))
	}
	return openRealm(final, realm, log)
}

// newEmptyIndex creates an empty index of this layout at path (replacing
// anything there) and closes it.
func newEmptyIndex(path string) error {
	if err := os.RemoveAll(path); err != nil {
		return fmt.Errorf("clear %s: %w", path, err)
	}
	im, err := newIndexMapping()
	if err != nil {
		return fmt.Errorf("index mapping: %w", err)
	}
	idx, err := blevesearch.NewUsing(path, im, scorch.Name, scorch.Name, nil)
	if err != nil {
		os.RemoveAll(path)
		return err
	}
	err = idx.SetInternal(schemaKey, []byte(schemaVersion))
	if cerr := idx.Close(); err == nil {
		err = cerr
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

func (ri *realmIndex) close() error {
	ri.stopLoad()
	ri.loading.Wait()
	ri.idxMu.Lock()
	defer ri.idxMu.Unlock()
	if ri.closed {
		return nil
	}
	return ri.idx.Close()
}

// answersDuplicates reports whether a record of this status answers a
// write of the same content to its scope. Active and quarantined records
// do (re-remembering quarantined content must not slip an active copy past
// the quarantine); superseded and tombstoned ones are history, and the
// same content written again is stored afresh.
func answersDuplicates(s sdk.Status) bool {
	return s == sdk.StatusActive || s == sdk.StatusQuarantined
}

func dedupKey(scope sdk.Scope, hash string) string { return string(scope) + "|" + hash }

// foldTag maps a tag to one representative of its case-folding class, so
// that two tags match in the index exactly when sdk.SameTag (and so
// sdk.Record.HasTag) says they are equal. Each rune becomes a choice made
// from its whole simple-folding orbit: the lower case of the orbit's least
// rune when that is in the orbit (readable keys), else the least rune
// itself (İ lower-cases to i, which is not in its orbit). The tag is put
// in NFC first: the host sends tags in NFC, but a record stored before it
// did keeps a decomposed tag as written.
func foldTag(s string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		lower := unicode.ToLower(least)
		for f := unicode.SimpleFold(least); f != least; f = unicode.SimpleFold(f) {
			if f == lower {
				return lower
			}
		}
		return least
	}, norm.NFC.String(s))
}

// placeKey is the place field's value for seq in thread id of scope: a
// thread's places are its scope's alone, so neighbours are looked up by
// scope too. The scope is length-prefixed and the seq follows the last
// line feed, so no scope or id, whatever it holds, collides with another.
func placeKey(scope sdk.Scope, id string, seq int64) string {
	return strconv.Itoa(len(scope)) + " " + string(scope) + id + "\n" + strconv.FormatInt(seq, 10)
}
