package markdown

import (
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
)

// Each realm keeps its records in memory (the files stay the truth) and
// answers recall from an sdk/index engine: BM25F over tags, title,
// description and body weighted 5, 4, 2 and 1, as the sqlite provider
// ranks, with thread neighbours as a context field at index.ContextWeight.
// Only active records are in the engine; expiry, scopes, tags and excluded
// ids are checked inside its posting walk. Equal scores go in write order,
// later first, as sqlite's row ids put them (see doc.seq), then the lesser
// id.

// fieldWeights are the BM25F weights of tags, title, description, body.
var fieldWeights = [4]float64{5, 4, 2, 1}

// doc is one record file as indexed.
type doc struct {
	rec   sdk.Record
	stamp fileStamp
	// digest of the file bytes; a re-read with the same digest is no change.
	digest uint64
	// racy: the stamp was taken so soon after the file's mtime that a
	// later edit could carry the same stamp; re-read before trusting it.
	racy bool
	// seq orders equal scores, higher first (index.Doc.Seq). A record
	// written here takes the realm's next number, so later writes, and
	// later records of a batch, rank first, as sqlite's row ids do; a
	// rewrite of ours (a revival, a supersede's mark) keeps it, as
	// sqlite's update of a row does. A file read from disk keeps the
	// place of the record it replaces when its update time is the same,
	// else takes timeSeq(updated) (fileSeq): files say only the
	// millisecond, so the order within one is kept by the snapshot.
	seq uint64
}

type contentKey struct {
	scope sdk.Scope
	hash  string
}

// realmIndex holds one realm: its records by id, scope and content, and
// the engine over the active ones. Nothing in it refers to another realm,
// so realm isolation (scores included) does not depend on filtering.
// Readers hold the store's read lock; all changes happen under its write
// lock.
type realmIndex struct {
	name      string
	byID      map[string]*doc
	byScope   map[sdk.Scope]map[string]*doc // scope → id → doc
	byContent map[contentKey][]*doc
	ix        *index.Index
	lastSeq   uint64 // the highest seq of a doc entered
}

func newEngine() *index.Index {
	ix, err := index.New(index.Options{Weights: fieldWeights[:], ContextWeight: index.ContextWeight})
	if err != nil {
		panic(err) // the options are constants of this package
	}
	return ix
}

func newRealmIndex(name string) *realmIndex {
	return newRealmIndexOn(name, newEngine())
}

func newRealmIndexOn(name string, ix *index.Index) *realmIndex {
	return &realmIndex{
		name:      name,
		byID:      map[string]*doc{},
		byScope:   map[sdk.Scope]map[string]*doc{},
		byContent: map[contentKey][]*doc{},
		ix:        ix,
	}
}

func (ri *realmIndex) get(id string) *doc { return ri.byID[id] }

// inScope answers the doc stored under (scope, id), or nil.
func (ri *realmIndex) inScope(scope sdk.Scope, id string) *doc { return ri.byScope[scope][id] }

// sameContent answers the docs of scope whose title and body hash to hash.
// The answer aliases the index: read it, never change it.
func (ri *realmIndex) sameContent(scope sdk.Scope, hash string) []*doc {
	return ri.byContent[contentKey{scope, hash}]
}

// recordFields cuts a record into the engine's fields, exactly as the
// sqlite provider does; nil for a record the engine does not hold.
func recordFields(r *sdk.Record) [][]string {
	if r.Status != sdk.StatusActive {
		return nil
	}
	return [][]string{
		index.FieldTerms(index.TagText(r.Tags)),
		index.FieldTerms(r.Title),
		index.FieldTerms(r.Description),
		index.FieldTerms(r.Body),
	}
}

// minMillis is the Unix millisecond of the earliest time a file can hold
// (year 1), so timeSeq is positive for every record.
var minMillis = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()

// seqShift leaves 2^15 numbers below each millisecond for the writes
// within it (more spill into the next millisecond's, in order); year 9999
// still fits 64 bits.
const seqShift = 15

// timeSeq is the first seq of t's millisecond.
func timeSeq(t time.Time) uint64 { return (uint64(t.UnixMilli()-minMillis) + 1) << seqShift }

// fileSeq is the seq of a record read from a file: before's (the realm's
// doc of the same file, or nil) when the file's update time is unchanged,
// so an edit that leaves it keeps the record's place, else its update
// time's.
func fileSeq(r *sdk.Record, before *doc) uint64 {
	if before != nil && before.rec.UpdatedAt.Equal(r.UpdatedAt) {
		return before.seq
	}
	return timeSeq(r.UpdatedAt)
}

// writeSeq answers the seq of a record written now whose update time is
// at: after every seq the realm holds, and no earlier than at's, so it
// stays near what a reopen from the files alone gives it. The caller
// holds idx.
func (ri *realmIndex) writeSeq(at time.Time) uint64 {
	ri.lastSeq = max(ri.lastSeq+1, timeSeq(at))
	return ri.lastSeq
}

func expiresMs(r *sdk.Record) int64 {
	if r.ExpiresAt.IsZero() {
		return 0
	}
	if ms := r.ExpiresAt.UnixMilli(); ms != 0 {
		return ms
	}
	return -1 // the epoch itself: 0 would read as "never expires"
}

// engineDoc is the engine's document for an active record with fields.
func engineDoc(r *sdk.Record, seq uint64, fields [][]string) index.Doc {
	d := index.Doc{ID: r.ID, Realm: r.Realm, Scope: string(r.Scope), Tags: r.Tags, Fields: fields,
		ExpiresMs: expiresMs(r), WhenMs: r.When().UnixMilli(), Seq: seq}
	if r.Thread != nil {
		d.Thread, d.ThreadSeq = r.Thread.ID, r.Thread.Seq
	}
	return d
}

// sameInEngine reports whether a and b are the same engine document, so a
// metadata-only change (trust, use count) leaves it alone. The time a
// window reads (occurred, else created) is the document's.
func sameInEngine(a, b *sdk.Record) bool {
	if a.Status != b.Status || a.Scope != b.Scope || a.Title != b.Title || a.Description != b.Description ||
		a.Body != b.Body || !a.UpdatedAt.Equal(b.UpdatedAt) || !a.ExpiresAt.Equal(b.ExpiresAt) || !a.When().Equal(b.When()) || len(a.Tags) != len(b.Tags) {
		return false
	}
	for i := range a.Tags {
		if a.Tags[i] != b.Tags[i] {
			return false
		}
	}
	switch {
	case a.Thread == nil || b.Thread == nil:
		return a.Thread == b.Thread
	default:
		return *a.Thread == *b.Thread
	}
}

// put enters d, replacing the record of the same id. fields are
// recordFields(&d.rec), cut by the caller outside the lock. A d without
// a seq keeps the replaced record's (a rewrite of ours), or takes its
// update time's.
func (ri *realmIndex) put(d *doc, fields [][]string) {
	old := ri.byID[d.rec.ID]
	if d.seq == 0 {
		d.seq = timeSeq(d.rec.UpdatedAt)
		if old != nil {
			d.seq = old.seq
		}
	}
	ri.lastSeq = max(ri.lastSeq, d.seq)
	if old != nil {
		ri.unlink(old)
	}
	ri.link(d)
	if old != nil && old.seq == d.seq && sameInEngine(&old.rec, &d.rec) {
		return
	}
	if fields == nil {
		ri.ix.Delete(ri.name, d.rec.ID)
		return
	}
	if err := ri.ix.Put(engineDoc(&d.rec, d.seq, fields)); err != nil {
		panic(err) // ids and realms are validated and the field count is ours
	}
	if old != nil && textDigest(&old.rec) != textDigest(&d.rec) {
		// The engine keeps a document's vector across a put; this one's
		// text changed (a hand edit), so its vector no longer describes it.
		ri.ix.DeleteVector(ri.name, d.rec.ID)
	}
}

// remove drops the record with id, if held.
func (ri *realmIndex) remove(id string) {
	if d := ri.byID[id]; d != nil {
		ri.unlink(d)
		ri.ix.Delete(ri.name, id)
	}
}

// link enters d into the lookup maps.
func (ri *realmIndex) link(d *doc) {
	ri.byID[d.rec.ID] = d
	ids := ri.byScope[d.rec.Scope]
	if ids == nil {
		ids = map[string]*doc{}
		ri.byScope[d.rec.Scope] = ids
	}
	ids[d.rec.ID] = d
	k := contentKey{d.rec.Scope, d.rec.ContentHash}
	ri.byContent[k] = append(ri.byContent[k], d)
}

func (ri *realmIndex) unlink(d *doc) {
	delete(ri.byID, d.rec.ID)
	if ids := ri.byScope[d.rec.Scope]; ids != nil {
		delete(ids, d.rec.ID)
		if len(ids) == 0 {
			delete(ri.byScope, d.rec.Scope)
		}
	}
	k := contentKey{d.rec.Scope, d.rec.ContentHash}
	ds := ri.byContent[k]
	for i, x := range ds {
		if x == d {
			// A new slice: callers may be reading the old one.
			ds = append(ds[:i:i], ds[i+1:]...)
			break
		}
	}
	if len(ds) == 0 {
		delete(ri.byContent, k)
	} else {
		ri.byContent[k] = ds
	}
}

// indexPlaces answers places as the engine names them.
func indexPlaces(places []sdk.ThreadPlace) []index.Place {
	out := make([]index.Place, len(places))
	for i, p := range places {
		out[i] = index.Place{Scope: string(p.Scope), Thread: p.Thread, Seq: p.Seq}
	}
	return out
}
