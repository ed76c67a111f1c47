// Package index is an exact in-memory lexical engine: BM25F over a few
// weighted fields, partitioned by realm, with scope, expiry, id and tag
// filters applied inside the posting walk.
//
// It ranks exactly as SQLite FTS5's bm25() ranks one contentless table
// whose columns are the fields and whose rank call passes the field
// weights: the same document frequencies, lengths and formula, summed in
// query-term order, so the scores are bit-for-bit those FTS5 computes and
// a provider can answer recall from it with the same top k. Ties are
// broken by Doc.Seq, higher first (FTS5's "rowid DESC"), then by id.
//
// The index holds only recallable documents: a caller deletes a record
// that is superseded, quarantined or tombstoned, because such rows are not
// in an FTS5 table either and must not count in its statistics. Expiry is
// the exception, checked at query time against Query.Now, since an expired
// row stays in FTS5 until it is purged.
//
// Thread context: a document may name its place in a thread (Doc.Thread,
// Doc.ThreadSeq). With Options.ContextWeight set, the index gives it one
// more field, after the caller's, holding the terms of the documents at
// ThreadSeq±1…ContextSpan of the same thread in its realm and scope (a
// thread id names nothing across scopes: one scope's writer must not
// reach another's records through their context), and keeps
// that field current as neighbours are put and deleted. The context field
// has its own saturation and length (ContextFrequency, ContextLength): a
// term counts in it at most ContextTermCap times, and it adds at most
// ContextLengthCap terms to the document's length. A place holds one
// document in the usual thread; when more share it, only the
// MaxPlaceDocs of them with the least ids take part (give and get
// context), so a put costs a bounded amount of re-indexing.
//
// An Index is safe for concurrent use: searches share a read lock, writes
// take it exclusively.
package index

import (
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// Stats chooses which documents BM25's collection statistics (document
// count, average length, document frequencies) are taken over.
type Stats int

const (
	// StatsIndex takes them over every realm, as one FTS5 table does.
	// Then one realm's writes move another's scores, and a realm can read
	// another's term counts from its own scores: only for an index whose
	// realms are one tenant's.
	StatsIndex Stats = iota
	// StatsRealm takes them over the query's realm only.
	StatsRealm
)

// ErrInvalid marks a bad option, document or snapshot.
var ErrInvalid = errors.New("index: invalid")

// Options configure an index.
type Options struct {
	// Weights are the field weights, one per field of every Doc.
	// Weighted term frequencies are held as float32, exact when the weights
	// are small integers (FTS5's bm25(…, 5, 4, 2, 1), say).
	Weights []float64
	// K1 and B are BM25's constants; zero means FTS5's 1.2 and 0.75.
	K1, B float64
	Stats Stats
	// ContextWeight is the weight of the thread context field; zero means
	// documents are indexed without their thread neighbours.
	ContextWeight float64
}

// Doc is one document as the index sees it: terms already cut by the
// shared tokenizer.
type Doc struct {
	ID    string
	Realm string
	Scope string
	// Tags filter queries (Query.Tags, Query.ExcludeTags), compared
	// case-folded as strings.EqualFold compares.
	Tags []string
	// Fields hold each field's terms in order, repeats included, one list
	// per Options.Weights entry. Their total count is the BM25 length.
	Fields [][]string
	// ExpiresMs is the expiry in Unix milliseconds; 0 never expires.
	ExpiresMs int64
	// WhenMs is the time Query.SinceMs and UntilMs judge, in Unix
	// milliseconds: the record's sdk.Record.When.
	WhenMs int64
	// Seq orders equal scores, higher first. Zero takes the next number
	// after every Seq the index has seen.
	Seq uint64
	// Thread and ThreadSeq place the document in a thread; an empty
	// Thread means none.
	Thread    string
	ThreadSeq int64
}

// Query asks for the best documents of one realm.
type Query struct {
	Realm string
	// Terms are the distinct query terms, in query order (the order FTS5
	// sums them in, which makes the scores bit-exact).
	Terms []string
	// Scopes limit the search; empty means every scope.
	Scopes     []string
	ExcludeIDs []string
	// Tags a hit must all carry; ExcludeTags a hit must carry none of.
	Tags, ExcludeTags []string
	// NowMs is the time expiry is judged at, in Unix milliseconds.
	NowMs int64
	// SinceMs and UntilMs keep the documents whose WhenMs lies in
	// [SinceMs, UntilMs); 0 leaves that end open (sdk.RecallQuery.WindowMillis
	// answers an end at the epoch as -1).
	SinceMs, UntilMs int64
	// Limit is how many hits to answer at most; it must be positive.
	Limit int
	// Vector, when not nil, is the query's embedding by Model: the hits
	// are ranked by fusing both halves (vector.go), weighed by
	// LexicalWeight and SemanticWeight (both 0: the defaults).
	Vector                        []float32
	Model                         string
	LexicalWeight, SemanticWeight float64
}

// Hit is one answered document; Score is FTS5's bm25() negated (higher is
// better). Seq is the document's Doc.Seq, so a caller that numbers
// documents by its own row key can read the hit by that key.
type Hit struct {
	ID    string
	Score float64
	Seq   uint64
}

// Index is the engine. The zero value is not usable; call New.
type Index struct {
	opts    Options
	nfields int       // the caller's fields
	weights []float64 // theirs, then the context field's when there is one

	mu      sync.RWMutex
	realms  map[string]*realm
	nextSeq uint64
	docs    int   // every realm
	tokens  int64 // every realm

	scratch   sync.Pool    // *scratch
	searching atomic.Int32 // searches under way
}

// New answers an empty index.
func New(opts Options) (*Index, error) {
	if len(opts.Weights) == 0 {
		return nil, fmt.Errorf("%w: at least one field weight is needed", ErrInvalid)
	}
	for i, w := range opts.Weights {
		if !(w > 0) || math.IsInf(w, 0) {
			return nil, fmt.Errorf("%w: weight %d is %v, want a positive number", ErrInvalid, i, w)
		}
	}
	if opts.K1 == 0 {
		opts.K1 = 1.2
	}
	if opts.B == 0 {
		opts.B = 0.75
	}
	if opts.K1 < 0 || opts.B < 0 || opts.B > 1 {
		return nil, fmt.Errorf("%w: k1 %v and b %v are out of range", ErrInvalid, opts.K1, opts.B)
	}
	if opts.Stats != StatsIndex && opts.Stats != StatsRealm {
		return nil, fmt.Errorf("%w: unknown stats mode %d", ErrInvalid, opts.Stats)
	}
	if opts.ContextWeight < 0 || math.IsInf(opts.ContextWeight, 0) || math.IsNaN(opts.ContextWeight) {
		return nil, fmt.Errorf("%w: context weight %v, want zero or a positive number", ErrInvalid, opts.ContextWeight)
	}
	opts.Weights = append([]float64(nil), opts.Weights...)
	weights := opts.Weights
	if opts.ContextWeight > 0 {
		weights = append(slices.Clip(weights), opts.ContextWeight)
	}
	return &Index{opts: opts, nfields: len(opts.Weights), weights: weights, realms: map[string]*realm{}, nextSeq: 1}, nil
}

// Options answers the options ix was made with; a decoded snapshot's are
// those of the index that wrote it, so a provider can tell one made with
// other ranking settings and rebuild.
func (ix *Index) Options() Options {
	o := ix.opts
	o.Weights = slices.Clone(o.Weights)
	return o
}

// Len answers the number of documents in every realm.
func (ix *Index) Len() int {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return ix.docs
}

// Has reports whether realm holds a document id.
func (ix *Index) Has(realm, id string) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	_, _, ok := ix.lookup(realm, id)
	return ok
}

// Locate answers the scope and Seq of document id of realm, and whether
// the index holds it.
func (ix *Index) Locate(realm, id string) (scope string, seq uint64, ok bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	rm, no, ok := ix.lookup(realm, id)
	if !ok {
		return "", 0, false
	}
	return rm.scopeNames[rm.scope[no]], rm.seq[no], true
}

// lookup answers the realm and docno of document id; the caller holds the
// lock.
func (ix *Index) lookup(realm, id string) (*realm, uint32, bool) {
	rm := ix.realms[realm]
	if rm == nil {
		return nil, 0, false
	}
	no, ok := rm.byID[id]
	return rm, no, ok
}

// Put adds d, replacing a document of the same realm and id.
func (ix *Index) Put(d Doc) error {
	if d.ID == "" || d.Realm == "" {
		return fmt.Errorf("%w: a document needs an id and a realm", ErrInvalid)
	}
	if len(d.Fields) != ix.nfields {
		return fmt.Errorf("%w: document %q has %d fields, the index %d", ErrInvalid, d.ID, len(d.Fields), ix.nfields)
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	rm := ix.realms[d.Realm]
	if rm == nil {
		rm = newRealm()
		ix.realms[d.Realm] = rm
	}
	var stale []threadKey // places whose neighbours' context changes
	var vec *docVec
	if no, ok := rm.byID[d.ID]; ok {
		if k, ok := rm.unthread(d.ID); ok {
			stale = append(stale, k)
		}
		vec = rm.dropVector(no)
		ix.remove(rm, no)
	}
	if d.Seq == 0 {
		d.Seq = ix.nextSeq
	}
	ix.nextSeq = max(ix.nextSeq, d.Seq+1)
	var tags []uint32
	for _, t := range d.Tags {
		k := rm.tag(t)
		if !containsU32(tags, k) {
			tags = append(tags, k)
		}
	}
	fields := d.Fields
	if ix.opts.ContextWeight > 0 && d.Thread != "" {
		// The scope's interned name: the key then shares it.
		k := threadKey{rm.scopeNames[rm.scopeID(d.Scope)], d.Thread, d.ThreadSeq}
		rm.enthread(d.ID, k, d.Fields)
		fields = append(slices.Clip(fields), rm.context(d.ID, k))
		stale = append(stale, k)
	} else if ix.opts.ContextWeight > 0 {
		fields = append(slices.Clip(fields), nil)
	}
	ix.add(rm, d.ID, d.Scope, tags, d.ExpiresMs, d.WhenMs, d.Seq, fields)
	rm.setVector(rm.byID[d.ID], vec)
	ix.refresh(rm, d.ID, stale)
	rm.tidy()
	rm.tidyVectors()
	return nil
}

// Delete removes a document; it reports whether it was there.
func (ix *Index) Delete(realm, id string) bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	rm := ix.realms[realm]
	if rm == nil {
		return false
	}
	no, ok := rm.byID[id]
	if !ok {
		return false
	}
	k, threaded := rm.unthread(id)
	ix.remove(rm, no)
	if threaded {
		ix.refresh(rm, id, []threadKey{k})
	}
	rm.tidy()
	rm.tidyVectors()
	return true
}

// MaxPlaceDocs bounds the documents of one thread place that take part
// in thread context.
const MaxPlaceDocs = 4

// refresh re-indexes the participants of the places in stale and beside
// them, other than the document self, so their context field holds what
// is there now (a change at a place may also change who takes part in it).
func (ix *Index) refresh(rm *realm, self string, stale []threadKey) {
	var ids []string
	for _, k := range stale {
		// At k itself, also the first one past the bound: a newcomer may
		// have pushed it out.
		at := rm.threads[k]
		for _, id := range at[:min(len(at), MaxPlaceDocs+1)] {
			if id != self && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		for _, s := range Neighbours(k.seq) {
			for _, id := range rm.participants(threadKey{k.scope, k.id, s}) {
				if id != self && !slices.Contains(ids, id) {
					ids = append(ids, id)
				}
			}
		}
	}
	for _, id := range ids {
		no := rm.byID[id]
		td := rm.threaded[id]
		scope, tags := rm.scopeNames[rm.scope[no]], rm.tags.at(no)
		expires, when, seq := rm.expires[no], rm.when[no], rm.seq[no]
		vec := rm.dropVector(no)
		ix.remove(rm, no)
		fields := make([][]string, 0, ix.nfields+1)
		for _, terms := range td.fields(rm) {
			fields = append(fields, terms)
		}
		fields = append(fields, rm.context(id, td.key))
		ix.add(rm, id, scope, tags, expires, when, seq, fields)
		rm.setVector(rm.byID[id], vec)
	}
}

func (ix *Index) add(rm *realm, id, scope string, tags []uint32, expires, when int64, seq uint64, fields [][]string) {
	no := uint32(len(rm.ids))
	sid := rm.scopeID(scope)
	dl := 0
	order := rm.order[:0]
	for f, terms := range fields {
		w := ix.weights[f]
		context := f == ix.nfields // the thread context field
		if context {
			dl += ContextLength(len(terms))
		} else {
			dl += len(terms)
		}
		for _, t := range terms {
			tid := rm.term(t)
			if int(tid) >= len(rm.freq) {
				rm.freq = append(rm.freq, make([]float64, int(tid)+1-len(rm.freq))...)
				rm.ctxN = append(rm.ctxN, make([]int32, int(tid)+1-len(rm.ctxN))...)
			}
			// Weights are positive, so zero means not seen yet.
			if rm.freq[tid] == 0 && rm.ctxN[tid] == 0 {
				order = append(order, tid)
			}
			if context {
				rm.ctxN[tid]++
			} else {
				rm.freq[tid] += w
			}
		}
	}
	rm.order = order
	for _, tid := range order {
		if n := rm.ctxN[tid]; n > 0 {
			rm.freq[tid] += ContextFrequency(ix.opts.ContextWeight, int(n))
		}
		if rm.lists[tid].df == 0 {
			rm.unheld--
		}
		rm.lists[tid].add(no, float32(rm.freq[tid]), uint32(dl), sid)
		rm.freq[tid], rm.ctxN[tid] = 0, 0
	}
	slices.Sort(order)
	terms := appendTermList(nil, order)
	rm.ids = append(rm.ids, id)
	rm.scope = append(rm.scope, sid)
	rm.dl = append(rm.dl, uint32(dl))
	rm.expires = append(rm.expires, expires)
	rm.anyExpiry = rm.anyExpiry || expires != 0
	rm.when = append(rm.when, when)
	rm.seq = append(rm.seq, seq)
	rm.tags.push(tags)
	for _, t := range tags {
		if rm.tagLive[t] == 0 {
			rm.unheld--
		}
		rm.tagLive[t]++
	}
	rm.terms.push(terms)
	rm.vec = append(rm.vec, nil)
	rm.byID[id] = no
	if rm.clustered > 0 && rm.clustered == int(no) && sid >= rm.lastScope {
		rm.clustered, rm.lastScope = rm.clustered+1, sid // extends Cluster's last run
	}
	rm.gen++
	rm.live++
	rm.tokens += int64(dl)
	ix.docs++
	ix.tokens += int64(dl)
}

func (ix *Index) remove(rm *realm, no uint32) {
	rm.gen++
	rm.scope[no] = deadScope // first: compact below drops dead slots
	for tid := range termList(rm.terms.at(no)) {
		l := &rm.lists[tid]
		l.df--
		l.dead++
		if l.df == 0 {
			rm.unheld++
		}
		if l.dead > 16 && l.dead > l.df {
			l.compact(rm.scope, rm.dl)
		}
	}
	for _, t := range rm.tags.at(no) {
		if rm.tagLive[t]--; rm.tagLive[t] == 0 {
			rm.unheld++
		}
	}
	delete(rm.byID, rm.ids[no])
	rm.dropVector(no)
	dl := int64(rm.dl[no])
	rm.ids[no] = "" // its tags and terms stay in their spans until renumber
	rm.live--
	rm.dead++
	rm.tokens -= dl
	ix.docs--
	ix.tokens -= dl
}

// deadScope is the scope id of a deleted document slot; no query passes it.
const deadScope = 0

// realm is one realm's partition: documents numbered in arrival order
// (docno) until Cluster renumbers them in runs of scope order, and a
// posting list per term sorted by docno.
type realm struct {
	byID map[string]uint32
	// Per docno; a deleted slot has scope deadScope.
	ids     []string
	scope   []uint32
	dl      []uint32
	expires []int64
	when    []int64 // Doc.WhenMs
	seq     []uint64
	tags    spans[uint32]
	terms   spans[byte] // distinct term ids (a termList), for deletes
	vec     []*docVec   // nil: no vector

	termIDs    map[string]uint32
	termNames  []string
	lists      []plist
	scopeIDs   map[string]uint32
	scopeNames []string // [0] is the dead scope
	tagIDs     map[string]uint32
	tagLive    []int32 // by tag id: the live documents that carry it

	live, dead int
	// unheld counts the terms and tags no live document holds (a term
	// list's df is 0, a tag's tagLive), which only renumber sheds; shed
	// is what it was after the last one (a threaded document's context
	// may keep some).
	unheld, shed int
	tokens       int64
	// clustered is how many docnos from the first lie in runs of scope
	// order (cluster.go), and lastScope the last one's scope id.
	clustered int
	lastScope uint32
	// gen counts the realm's changes, so Cluster can tell one made while
	// it built a new numbering.
	gen uint64
	// anyExpiry is set once a document with an expiry arrives: until
	// then a search need not read expires at all.
	anyExpiry bool
	models    map[string]*vecSet // vectors by model

	// Thread context: the ids at each place of a thread (its placeHead
	// least, sorted; a crowded place's others in crowds, place.go), and
	// each threaded document's own fields (terms interned in termNames).
	threads  map[threadKey][]string
	crowds   map[threadKey]*placeRest
	threaded map[string]*threadDoc

	// scratch for add, under the write lock: weighted frequency and
	// context occurrences by term id (zero between calls) and the ids in
	// first-seen order
	freq  []float64
	ctxN  []int32
	order []uint32
}

func newRealm() *realm {
	return &realm{
		byID: map[string]uint32{}, termIDs: map[string]uint32{},
		scopeIDs: map[string]uint32{}, scopeNames: []string{""}, tagIDs: map[string]uint32{},
		threads: map[threadKey][]string{}, threaded: map[string]*threadDoc{},
	}
}

// threadKey is a place in a thread of one scope: records of other scopes
// under the same thread id are no neighbours.
type threadKey struct {
	scope string
	id    string
	seq   int64
}

// threadDoc is a threaded document's place and own fields: each field's
// term count, then its term ids (4 bytes a term, where a string is 16).
type threadDoc struct {
	key   threadKey
	terms []uint32
}

// fields answers the document's own fields.
func (td *threadDoc) fields(rm *realm) iter.Seq2[int, []string] {
	return func(yield func(int, []string) bool) {
		rest := td.terms
		for f := 0; len(rest) > 0; f++ {
			n := rest[0]
			out := make([]string, n)
			for i, t := range rest[1 : 1+n] {
				out[i] = rm.termNames[t]
			}
			if !yield(f, out) {
				return
			}
			rest = rest[1+n:]
		}
	}
}

// appendTerms appends the terms of every own field to out.
func (td *threadDoc) appendTerms(rm *realm, out []string) []string {
	rest := td.terms
	for len(rest) > 0 {
		n := rest[0]
		for _, t := range rest[1 : 1+n] {
			out = append(out, rm.termNames[t])
		}
		rest = rest[1+n:]
	}
	return out
}

// enthread records id at place k with its own fields.
func (rm *realm) enthread(id string, k threadKey, fields [][]string) {
	n := len(fields)
	for _, terms := range fields {
		n += len(terms)
	}
	own := make([]uint32, 0, n)
	for _, terms := range fields {
		own = append(own, uint32(len(terms)))
		for _, t := range terms {
			own = append(own, rm.term(t))
		}
	}
	k.id = strings.Clone(k.id)
	rm.threaded[id] = &threadDoc{key: k, terms: own}
	rm.placeAdd(k, id)
}

// participants answers the ids of place k that take part in context: the
// MaxPlaceDocs least (the place's list is sorted by id).
func (rm *realm) participants(k threadKey) []string {
	ids := rm.threads[k]
	return ids[:min(len(ids), MaxPlaceDocs)]
}

// unthread forgets id's place, answering it.
func (rm *realm) unthread(id string) (threadKey, bool) {
	td := rm.threaded[id]
	if td == nil {
		return threadKey{}, false
	}
	delete(rm.threaded, id)
	rm.placeRemove(td.key, id)
	return td.key, true
}

// context answers the terms of the documents beside place k, other than
// self: its neighbours' own fields, in one list; nothing when self does
// not take part at k.
func (rm *realm) context(self string, k threadKey) []string {
	if !slices.Contains(rm.participants(k), self) {
		return nil
	}
	var out []string
	for _, s := range Neighbours(k.seq) {
		for _, id := range rm.participants(threadKey{k.scope, k.id, s}) {
			if id == self {
				continue
			}
			out = rm.threaded[id].appendTerms(rm, out)
		}
	}
	return out
}

func (rm *realm) term(t string) uint32 {
	if id, ok := rm.termIDs[t]; ok {
		return id
	}
	id := uint32(len(rm.termNames))
	t = strings.Clone(t) // a term may be a slice of a whole record text
	rm.termIDs[t] = id
	rm.termNames = append(rm.termNames, t)
	rm.lists = append(rm.lists, plist{})
	rm.unheld++ // until add gives it a posting
	return id
}

func (rm *realm) scopeID(s string) uint32 {
	if id, ok := rm.scopeIDs[s]; ok {
		return id
	}
	id := uint32(len(rm.scopeNames))
	rm.scopeIDs[s] = id
	rm.scopeNames = append(rm.scopeNames, s)
	return id
}

func (rm *realm) tag(t string) uint32 {
	k := FoldTag(t)
	if id, ok := rm.tagIDs[k]; ok {
		return id
	}
	id := uint32(len(rm.tagIDs))
	rm.tagIDs[k] = id
	rm.tagLive = append(rm.tagLive, 0)
	rm.unheld++ // until add gives it a document
	return id
}

// tidy renumbers once deleted slots outnumber the live documents, or the
// terms and tags no live document holds do: Cluster drops the deleted
// slots of recent documents, so under churn on them the slots never do,
// while every one-off word (a request id, a session tag) stays interned.
// Either count must grow by the live documents between two renumbers,
// each of which costs about what they hold, so writes pay a constant
// share for it.
func (rm *realm) tidy() {
	if (rm.dead > 1024 && rm.dead > rm.live) || rm.unheld-rm.shed > max(rm.live, 1024) {
		rm.renumber()
	}
}

// renumber drops deleted slots, keeping docno order (so posting lists stay
// sorted), and sheds the terms and tags only they held.
func (rm *realm) renumber() {
	remap := make([]uint32, len(rm.ids))
	kept := make([]uint32, 0, rm.live) // the live docnos, in order
	n, clustered := uint32(0), 0
	for i := range rm.ids {
		if rm.scope[i] == deadScope {
			remap[i] = math.MaxUint32
			continue
		}
		if i < rm.clustered {
			clustered++ // the runs' live documents stay first, in order
		}
		remap[i] = n
		kept = append(kept, uint32(i))
		rm.ids[n], rm.scope[n], rm.dl[n] = rm.ids[i], rm.scope[i], rm.dl[i]
		rm.expires[n], rm.seq[n] = rm.expires[i], rm.seq[i]
		rm.when[n], rm.vec[n] = rm.when[i], rm.vec[i]
		if dv := rm.vec[n]; dv != nil {
			dv.set.setOwner(dv.slot, n)
		}
		rm.byID[rm.ids[n]] = n
		n++
	}
	for i := n; i < uint32(len(rm.ids)); i++ {
		rm.ids[i], rm.vec[i] = "", nil
	}
	rm.ids, rm.scope, rm.dl = rm.ids[:n], rm.scope[:n], rm.dl[:n]
	rm.expires, rm.seq = rm.expires[:n], rm.seq[:n]
	rm.tags, rm.terms = rm.tags.permute(kept), rm.terms.permute(kept)
	rm.when, rm.vec = rm.when[:n], rm.vec[:n]
	keep := func(d uint32) (uint32, bool) { return remap[d], remap[d] != math.MaxUint32 }
	for t := range rm.lists {
		rm.lists[t].rewrite(keep, rm.scope, rm.dl)
	}
	rm.dead, rm.clustered = 0, clustered
	rm.gen++
	rm.shedTerms()
	rm.shedTags()
	rm.count()
}

// count sets tagLive, unheld and shed from the live documents: after a
// renumber or a decode, when every slot is one.
func (rm *realm) count() {
	rm.tagLive = make([]int32, len(rm.tagIDs))
	for _, t := range rm.tags.data {
		rm.tagLive[t]++
	}
	rm.unheld = 0
	for t := range rm.lists {
		if rm.lists[t].df == 0 {
			rm.unheld++
		}
	}
	for _, n := range rm.tagLive {
		if n == 0 {
			rm.unheld++
		}
	}
	rm.shed = rm.unheld
}

// shedTerms drops the terms no live document holds and no threaded
// document keeps for its neighbours' context: a realm whose records carry
// one-off words (request ids, hashes) would otherwise keep every word it
// ever saw. Ids stay in their order, so every term list stays sorted. It
// runs in renumber, when no deleted document is left to name a term.
func (rm *realm) shedTerms() {
	used := make([]bool, len(rm.lists))
	n := 0
	for t := range rm.lists {
		if rm.lists[t].n > 0 {
			used[t] = true
			n++
		}
	}
	for _, td := range rm.threaded {
		for rest := td.terms; len(rest) > 0; rest = rest[1+rest[0]:] {
			for _, t := range rest[1 : 1+rest[0]] {
				if !used[t] {
					used[t] = true
					n++
				}
			}
		}
	}
	if n == len(rm.lists) {
		return
	}
	remap := make([]uint32, len(rm.lists))
	names, lists := make([]string, 0, n), make([]plist, 0, n)
	for t := range rm.lists {
		if !used[t] {
			delete(rm.termIDs, rm.termNames[t])
			continue
		}
		remap[t] = uint32(len(names))
		rm.termIDs[rm.termNames[t]] = remap[t]
		names, lists = append(names, rm.termNames[t]), append(lists, rm.lists[t])
	}
	rm.termNames, rm.lists = names, lists
	// The maps shrink only when rebuilt.
	rm.termIDs = maps.Clone(rm.termIDs)
	rm.freq, rm.ctxN = nil, nil
	rm.terms = remapTermLists(&rm.terms, remap)
	for _, td := range rm.threaded {
		for rest := td.terms; len(rest) > 0; rest = rest[1+rest[0]:] {
			ids := rest[1 : 1+rest[0]]
			for i, t := range ids {
				ids[i] = remap[t]
			}
		}
	}
}

// remapTermLists answers the term lists with each id t replaced by
// remap[t], which keeps their order.
func remapTermLists(s *spans[byte], remap []uint32) spans[byte] {
	var out spans[byte]
	out.end = make([]uint32, 0, len(s.end))
	var ids []uint32
	for no := range s.end {
		ids = ids[:0]
		for t := range termList(s.at(uint32(no))) {
			ids = append(ids, remap[t])
		}
		out.data = appendTermList(out.data, ids)
		out.end = append(out.end, uint32(len(out.data)))
	}
	out.data = slices.Clip(out.data)
	return out
}

// shedTags drops the tags no live document carries, as shedTerms does
// terms; a tag filter naming one then finds no id, as for a tag never
// seen. It runs in renumber, when only live documents are left.
func (rm *realm) shedTags() {
	used := make([]bool, len(rm.tagIDs))
	n := 0
	for _, t := range rm.tags.data {
		if !used[t] {
			used[t] = true
			n++
		}
	}
	if n == len(rm.tagIDs) {
		return
	}
	remap := make([]uint32, len(used))
	next := uint32(0)
	for t := range used {
		if used[t] {
			remap[t] = next
			next++
		}
	}
	ids := make(map[string]uint32, n)
	for k, t := range rm.tagIDs {
		if used[t] {
			ids[k] = remap[t]
		}
	}
	rm.tagIDs = ids
	for i, t := range rm.tags.data {
		rm.tags.data[i] = remap[t]
	}
}

// spans holds a list per docno, back to back in one slice, instead of a
// slice (and its header, 24 bytes) per document: docno no's list is
// data[end[no-1]:end[no]]. A deleted document's list stays until the
// realm renumbers.
type spans[T any] struct {
	data []T
	end  []uint32
}

func (s *spans[T]) at(no uint32) []T {
	lo := uint32(0)
	if no > 0 {
		lo = s.end[no-1]
	}
	return s.data[lo:s.end[no]:s.end[no]]
}

// push appends the next docno's list.
func (s *spans[T]) push(v []T) {
	s.data = append(s.data, v...)
	s.end = append(s.end, uint32(len(s.data)))
}

// permute answers the lists of the docnos order names, in its order.
func (s *spans[T]) permute(order []uint32) spans[T] {
	size := 0
	for _, d := range order {
		size += len(s.at(d))
	}
	out := spans[T]{data: make([]T, 0, size), end: make([]uint32, 0, len(order))}
	for _, d := range order {
		out.push(s.at(d))
	}
	return out
}

// FoldTag maps a tag to a key two tags share exactly when sdk.SameTag
// holds between them: the tag in NFC, each rune the least rune of its
// simple case-folding orbit. NFC because the host sends tags in NFC while
// a store keeps the tags written before it did as they came (café as e
// and a combining accent): without it no filter would find those again.
func FoldTag(tag string) string {
	tag = norm.NFC.String(tag)
	var b strings.Builder
	b.Grow(len(tag))
	for _, r := range tag {
		b.WriteRune(leastFold(r))
	}
	return b.String()
}

// leastFold is the least rune of r's case-folding orbit.
func leastFold(r rune) rune {
	least := r
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		least = min(least, f)
	}
	return least
}

// A termList is a document's distinct term ids, ascending, as uvarint
// deltas: about a byte and a half per term instead of four.
func appendTermList(dst []byte, sorted []uint32) []byte {
	prev := uint32(0)
	for _, t := range sorted {
		dst = binary.AppendUvarint(dst, uint64(t-prev))
		prev = t
	}
	return dst
}

// termList iterates the term ids of an encoded list.
func termList(b []byte) iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		t := uint32(0)
		for len(b) > 0 {
			d, n := binary.Uvarint(b)
			t += uint32(d)
			b = b[n:]
			if !yield(t) {
				return
			}
		}
	}
}

func containsU32(list []uint32, v uint32) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// Replace moves src's documents of realm name (of every realm when name
// is "") into ix in place of ix's own, as one change: a search sees the old
// documents or the new ones, never a mix. A provider rebuilds an index
// beside the live one and swaps it in this way. src must have been made
// with the same options; it must not be used afterwards.
func (ix *Index) Replace(src *Index, name string) error {
	if src == ix {
		return fmt.Errorf("%w: an index cannot replace itself", ErrInvalid)
	}
	if !slices.Equal(src.weights, ix.weights) || src.opts.K1 != ix.opts.K1 || src.opts.B != ix.opts.B ||
		src.opts.Stats != ix.opts.Stats || src.opts.ContextWeight != ix.opts.ContextWeight {
		return fmt.Errorf("%w: the replacement index was made with other options", ErrInvalid)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	ix.nextSeq = max(ix.nextSeq, src.nextSeq)
	if name == "" {
		ix.realms, ix.docs, ix.tokens = src.realms, src.docs, src.tokens
		src.realms, src.docs, src.tokens = map[string]*realm{}, 0, 0
		return nil
	}
	if old := ix.realms[name]; old != nil {
		ix.docs -= old.live
		ix.tokens -= old.tokens
		delete(ix.realms, name)
	}
	if rm := src.realms[name]; rm != nil {
		ix.realms[name] = rm
		ix.docs += rm.live
		ix.tokens += rm.tokens
		delete(src.realms, name)
		src.docs -= rm.live
		src.tokens -= rm.tokens
	}
	return nil
}

// MaxPlaceReads bounds the ids AtPlaces answers of one place; it is
// sdk.MaxPlaceReads, the bound of a provider's ThreadReader.
const MaxPlaceReads = 16

// AtPlaces answers the ids of realm's documents at the given places of
// threads (scope, thread id, seq), place by place: of each its
// MaxPlaceReads least, so a place crowded by a flood of writes costs a
// caller a bounded read. The index knows places only while it keeps
// thread context (Options.ContextWeight above 0); with none it answers no
// ids.
func (ix *Index) AtPlaces(realm string, places []Place) []string {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	rm := ix.realms[realm]
	if rm == nil {
		return nil
	}
	var ids []string
	for _, p := range places {
		at := rm.threads[threadKey{p.Scope, p.Thread, p.Seq}] // sorted by id
		ids = append(ids, at[:min(len(at), MaxPlaceReads)]...)
	}
	return ids
}

// Place is a place in a thread of one scope.
type Place struct {
	Scope, Thread string
	Seq           int64
}
