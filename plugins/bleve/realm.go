package bleve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"unicode"

	blevesearch "github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/keyword"
	"github.com/blevesearch/bleve/v2/analysis/tokenizer/whitespace"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	index "github.com/blevesearch/bleve_index_api"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/tokenize"
	bolterrors "go.etcd.io/bbolt/errors"
)

// Index fields. Text is indexed pre-tokenized by sdk/tokenize (the terms
// joined by spaces, cut again on whitespace), so the index and the query
// agree with every other memhost component, CJK bigrams included. Only
// active records carry text fields: a record of any other status cannot
// match a query, so recall needs no status filter. Usage counters live in
// the stored record and the in-memory catalog, not in index fields: every
// numeric value costs 16 prefix-coded terms, and nothing queries them.
const (
	fieldTags  = "tags_t"  // text: tag terms
	fieldTitle = "title_t" // text: title terms
	fieldDesc  = "desc_t"  // text: description terms
	fieldBody  = "body_t"  // text: body terms
	// context: the terms of the active records beside an active threaded
	// record in its thread (within memindex.ContextSpan), so a question
	// naming the topic of a stretch of conversation finds the turn in it
	// that answers.
	fieldContext = "context_t"
	// place is the keyword "thread id\nseq" of an active threaded record,
	// which its neighbours' writes look it up by.
	fieldPlace  = "place"
	fieldRealm  = "realm"  // keyword
	fieldScope  = "scope"  // keyword
	fieldStatus = "status" // keyword
	fieldKind   = "kind"   // keyword
	fieldTag    = "tag"    // keyword, case-folded, one per tag
	// dedup is the keyword "scope|content_hash", only on records that
	// answer duplicates; the hash alone is not indexed, as nothing looks
	// a record up by it across scopes.
	fieldDedup   = "dedup"
	fieldExpires = "expires_ms" // numeric, unix ms; absent when the record never expires
	fieldRecord  = "record"     // stored only: the whole record as JSON
	fieldCatalog = "catalog"    // stored only: the record's catalog entry (see encodeCatalog)
)

// textFields are the searched fields with their boosts: a term in a tag or
// the title says more about a record than the same term in its body.
var textFields = []struct {
	name  string
	boost float64
}{
	{fieldTags, 4}, {fieldTitle, 3}, {fieldDesc, 2}, {fieldBody, 1}, {fieldContext, contextBoost},
}

// contextBoost is the context field's boost. Bleve scores each field with
// its own BM25 (the context field's lengths normalised among themselves)
// and sums the boosted fields, so the weight that suits sdk/index's BM25F
// (memindex.ContextWeight, 0.375) is too low here: on the LoCoMo
// development split 0.375 / 1 / 1.5 gave turn recall@10 0.706 / 0.729 / 0.737.
const contextBoost = 1.5

const termsAnalyzer = "memhost_terms"

// schemaVersion is stored in each index; a plugin refuses an index written
// with another layout rather than answering wrong results from it. It
// names tokenize.Version too, since the text fields hold the tokenizer's
// terms; TestSchemaFollowsTokenizer holds the two together.
// Layout 2 added the thread context and place fields; "terms/2" is the
// stemmed tokenizer.
const schemaVersion = "memhost-bleve/2 terms/2"

var schemaKey = []byte("memhost_schema")

// boltTimeout bounds the wait for bolt's file lock. The directory flock
// normally refuses a second opener first; this covers anything else
// holding root.bolt, so open fails instead of blocking forever.
const boltTimeout = "1s"

func newIndexMapping() (*mapping.IndexMappingImpl, error) {
	im := mapping.NewIndexMapping()
	if err := im.AddCustomAnalyzer(termsAnalyzer, map[string]any{
		"type":      custom.Name,
		"tokenizer": whitespace.Name,
	}); err != nil {
		return nil, err
	}
	im.ScoringModel = index.BM25Scoring
	im.DefaultAnalyzer = termsAnalyzer
	im.IndexDynamic, im.StoreDynamic, im.DocValuesDynamic = false, false, false

	doc := mapping.NewDocumentStaticMapping()
	doc.AddSubDocumentMapping("_all", mapping.NewDocumentDisabledMapping())
	for _, f := range textFields {
		fm := mapping.NewTextFieldMapping()
		fm.Analyzer = termsAnalyzer
		fm.Store, fm.IncludeTermVectors, fm.IncludeInAll, fm.DocValues = false, false, false, false
		doc.AddFieldMappingsAt(f.name, fm)
	}
	for _, name := range []string{fieldRealm, fieldScope, fieldStatus, fieldKind, fieldTag, fieldDedup, fieldPlace} {
		fm := mapping.NewKeywordFieldMapping()
		fm.Analyzer = keyword.Name
		fm.Store, fm.IncludeTermVectors, fm.IncludeInAll, fm.DocValues = false, false, false, false
		fm.SkipFreqNorm = true
		doc.AddFieldMappingsAt(name, fm)
	}
	expires := mapping.NewNumericFieldMapping()
	expires.Store, expires.IncludeInAll, expires.DocValues = false, false, false
	doc.AddFieldMappingsAt(fieldExpires, expires)
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
// the index in the same order.
type realmIndex struct {
	realm string
	path  string
	idx   blevesearch.Index
	cat   *catalog
	wmu   sync.Mutex

	stopLoad context.CancelFunc
	loading  sync.WaitGroup
}

func runtimeConfig() map[string]any {
	return map[string]any{
		"bolt_timeout": boltTimeout,
		"unsafe_batch": false, // scorch's default; durability depends on it
	}
}

// openRealm opens an existing index, turning every failure (and any panic
// from a corrupt file) into one clear error.
func openRealm(path, realm string) (ri *realmIndex, err error) {
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
	if err != nil || string(v) != schemaVersion {
		idx.Close()
		if err == nil {
			err = fmt.Errorf("schema %q, want %q", v, schemaVersion)
		}
		return nil, fmt.Errorf("bleve: index %s was not written by this plugin (%v); move it aside or reindex", path, err)
	}
	ri = &realmIndex{realm: realm, path: path, idx: idx, cat: newCatalog()}
	ri.startLoad()
	return ri, nil
}

// startLoad fills the catalog in the background; the realm's writers
// wait for it, readers of the catalog wait for it, recall does not.
func (ri *realmIndex) startLoad() {
	ctx, cancel := context.WithCancel(context.Background())
	ri.stopLoad = cancel
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
			return ri.load(ctx)
		}()
		if err != nil {
			err = fmt.Errorf("bleve: load the catalog of realm %s from %s (corrupt index?): %w", ri.realm, ri.path, err)
		}
		ri.cat.finish(err)
	}()
}

func (ri *realmIndex) reader() (index.IndexReader, error) {
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
func createRealm(dir, realm string) (*realmIndex, error) {
	final := filepath.Join(dir, realm+indexSuffix)
	partial := filepath.Join(dir, realm+partialSuffix)
	if err := os.RemoveAll(partial); err != nil {
		return nil, fmt.Errorf("bleve: clear %s: %w", partial, err)
	}
	im, err := newIndexMapping()
	if err != nil {
		return nil, fmt.Errorf("bleve: index mapping: %w", err)
	}
	idx, err := blevesearch.NewUsing(partial, im, scorch.Name, scorch.Name, nil)
	if err != nil {
		os.RemoveAll(partial)
		return nil, fmt.Errorf("bleve: create index %s: %w", partial, err)
	}
	err = idx.SetInternal(schemaKey, []byte(schemaVersion))
	if cerr := idx.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(partial, final)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		os.RemoveAll(partial)
		return nil, fmt.Errorf("bleve: create index %s: %w", final, err)
	}
	return openRealm(final, realm)
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
	return ri.idx.Close()
}

// document is what the index mapping walks for one record with usage key
// key. Absent keys index nothing, which the queries rely on (no expiry).
func document(r *sdk.Record, key float64, context []string) (map[string]any, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("bleve: encode record %s: %w", r.ID, err)
	}
	var tagTerms []string
	folded := make([]string, len(r.Tags))
	for i, t := range r.Tags {
		tagTerms = append(tagTerms, tokenize.Tokens(t)...)
		folded[i] = foldTag(t)
	}
	doc := map[string]any{
		fieldRealm:   r.Realm,
		fieldScope:   string(r.Scope),
		fieldStatus:  string(r.Status),
		fieldKind:    string(r.Kind),
		fieldRecord:  string(raw),
		fieldCatalog: encodeCatalog(entryOf(r, key)),
	}
	if r.Status == sdk.StatusActive {
		doc[fieldTags] = strings.Join(tagTerms, " ")
		doc[fieldTitle] = strings.Join(tokenize.Tokens(r.Title), " ")
		doc[fieldDesc] = strings.Join(tokenize.Tokens(r.Description), " ")
		doc[fieldBody] = strings.Join(tokenize.Tokens(r.Body), " ")
		if r.Thread != nil {
			doc[fieldPlace] = placeKey(r.Thread.ID, r.Thread.Seq)
			if len(context) > 0 {
				doc[fieldContext] = strings.Join(context, " ")
			}
		}
	}
	if len(folded) > 0 {
		doc[fieldTag] = folded
	}
	if answersDuplicates(r.Status) {
		doc[fieldDedup] = dedupKey(r.Scope, r.ContentHash)
	}
	if !r.ExpiresAt.IsZero() {
		doc[fieldExpires] = float64(r.ExpiresAt.UnixMilli())
	}
	return doc, nil
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
// that two tags match in the index exactly when strings.EqualFold (and so
// sdk.Record.HasTag) says they are equal. Each rune becomes a choice made
// from its whole simple-folding orbit: the lower case of the orbit's least
// rune when that is in the orbit (readable keys), else the least rune
// itself (İ lower-cases to i, which is not in its orbit).
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
	}, s)
}

// placeKey is the place field's value for seq in thread id; the seq after
// the last line feed decides, so an id holding one cannot collide.
func placeKey(id string, seq int64) string { return id + "\n" + strconv.FormatInt(seq, 10) }

// recordTerms answers the terms a record contributes to its neighbours'
// context: those of its text fields.
func recordTerms(r *sdk.Record) []string {
	var out []string
	for _, t := range r.Tags {
		out = append(out, tokenize.Tokens(t)...)
	}
	for _, s := range [3]string{r.Title, r.Description, r.Body} {
		out = append(out, tokenize.Tokens(s)...)
	}
	return out
}
