package bleve

import (
	"cmp"
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/usage"
)

// catalog holds, in memory, what manifests filter and rank on for every
// record of a realm: about 100 bytes a record. Ranking "the newest
// unranked rows of these scopes" inside Bleve means visiting a sort value
// for every matching document through its collector, which costs about a
// second per call at 100k records; a scan of this slice costs a few
// milliseconds. Titles and descriptions stay in the index and are fetched
// by id for the rows chosen.
//
// The catalog is loaded from the index in the background when a realm is
// opened, while its writers wait, and then kept current by every write
// under the same lock (realmIndex.wmu) as the batch it mirrors.
type catalog struct {
	loaded chan struct{} // closed once load has finished
	// loadErr is set before loaded closes.
	loadErr error

	mu       sync.RWMutex
	entries  []catEntry
	pos      map[string]int // id -> index in entries
	scopes   map[sdk.Scope]sdk.Scope
	expiring int // entries with an expiry
	stats    bm25Stats
	// dups maps dedup fingerprints to the id of a record holding one.
	dups map[uint64]string
}

// bm25Stats are the realm's BM25 statistics: its active records, which
// carry the terms field, and the sum of their lengths.
type bm25Stats struct {
	docs, tokens int64
}

func (s *bm25Stats) add(e *catEntry, sign int64) {
	if e.status == sdk.StatusActive {
		s.docs += sign
		s.tokens += sign * int64(e.length)
	}
}

// encode is the stats' stored form: "docs tokens".
func (s bm25Stats) encode() []byte {
	return []byte(strconv.FormatInt(s.docs, 10) + " " + strconv.FormatInt(s.tokens, 10))
}

func decodeStats(b []byte) (bm25Stats, bool) {
	docs, tokens, ok := strings.Cut(string(b), " ")
	if !ok {
		return bm25Stats{}, false
	}
	d, err1 := strconv.ParseInt(docs, 10, 64)
	t, err2 := strconv.ParseInt(tokens, 10, 64)
	if err1 != nil || err2 != nil || d < 0 || t < 0 {
		return bm25Stats{}, false
	}
	return bm25Stats{d, t}, true
}

// catEntry is one record's manifest keys. Times are unix nanoseconds;
// zero expires means never. usageKey is meaningful when useCount > 0.
// length is the record's BM25 length (0 when it carries no terms).
type catEntry struct {
	id       string
	scope    sdk.Scope
	status   sdk.Status
	updated  int64
	expires  int64
	useCount int64
	usageKey float64
	length   uint32
	// dedup is the fingerprint of the record's dedup key (dedupPrint), 0
	// when the record answers no duplicates.
	dedup uint64
}

func newCatalog() *catalog {
	return &catalog{loaded: make(chan struct{}), pos: map[string]int{}, scopes: map[sdk.Scope]sdk.Scope{}, dups: map[uint64]string{}}
}

// nanos is t in unix nanoseconds, 0 for the zero time, clamped to the
// int64 range (year 9999 overflows UnixNano).
func nanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.Before(minNanoTime):
		return math.MinInt64
	case t.After(maxNanoTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

var minNanoTime, maxNanoTime = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)

func entryOf(r *sdk.Record, usageKey float64) catEntry {
	e := catEntry{
		id: r.ID, scope: r.Scope, status: r.Status,
		updated: nanos(r.UpdatedAt), expires: nanos(r.ExpiresAt),
		useCount: r.UseCount, usageKey: usageKey,
	}
	if answersDuplicates(r.Status) {
		e.dedup = dedupPrint(dedupKey(r.Scope, r.ContentHash))
	}
	return e
}

// dedupPrint is a dedup key's 64-bit fingerprint (FNV-1a), never 0.
func dedupPrint(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64() | 1
}

// duplicateOf answers the id of a record whose dedup key has fingerprint fp.
func (c *catalog) duplicateOf(fp uint64) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.dups[fp]
	return id, ok
}

// known answers the ids among ids the catalog lists.
func (c *catalog) known(ids []string) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []string
	for _, id := range ids {
		if _, ok := c.pos[id]; ok {
			out = append(out, id)
		}
	}
	return out
}

func (c *catalog) unlinkDup(e *catEntry) {
	if e.dedup != 0 && c.dups[e.dedup] == e.id {
		delete(c.dups, e.dedup)
	}
}

// usageKeyOf answers the usage key of id (0 when unknown or unused).
func (c *catalog) usageKeyOf(id string) float64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if at, ok := c.pos[id]; ok {
		return c.entries[at].usageKey
	}
	return 0
}

// put inserts or replaces entries.
func (c *catalog) put(entries []catEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range entries {
		if s, ok := c.scopes[e.scope]; ok {
			e.scope = s // share one copy of each scope string
		} else {
			c.scopes[e.scope] = e.scope
		}
		if e.expires != 0 {
			c.expiring++
		}
		c.stats.add(&e, 1)
		if at, ok := c.pos[e.id]; ok {
			if c.entries[at].expires != 0 {
				c.expiring--
			}
			c.stats.add(&c.entries[at], -1)
			c.unlinkDup(&c.entries[at])
			c.entries[at] = e
			if e.dedup != 0 {
				c.dups[e.dedup] = e.id
			}
			continue
		}
		if e.dedup != 0 {
			c.dups[e.dedup] = e.id
		}
		c.pos[e.id] = len(c.entries)
		c.entries = append(c.entries, e)
	}
}

// replace takes over the entries of other (a rebuilt index's) and marks
// the catalog loaded.
func (c *catalog) replace(other *catalog) {
	other.mu.RLock()
	c.mu.Lock()
	c.entries, c.pos, c.scopes, c.expiring, c.stats, c.dups = other.entries, other.pos, other.scopes, other.expiring, other.stats, other.dups
	c.mu.Unlock()
	other.mu.RUnlock()
	select {
	case <-c.loaded:
	default:
		c.finish(nil)
	}
}

// statsAfter answers the BM25 statistics as they will be once entries
// are put and del removed.
func (c *catalog) statsAfter(entries []catEntry, del []string) bm25Stats {
	c.mu.RLock()
	defer c.mu.RUnlock()
	st := c.stats
	seen := make(map[string]bool, len(entries)+len(del))
	for i := range entries {
		e := &entries[i]
		if at, ok := c.pos[e.id]; ok && !seen[e.id] {
			st.add(&c.entries[at], -1)
		}
		seen[e.id] = true
		st.add(e, 1)
	}
	for _, id := range del {
		if at, ok := c.pos[id]; ok && !seen[id] {
			st.add(&c.entries[at], -1)
			seen[id] = true
		}
	}
	return st
}

// remove drops the entries of ids.
func (c *catalog) remove(ids []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range ids {
		at, ok := c.pos[id]
		if !ok {
			continue
		}
		if c.entries[at].expires != 0 {
			c.expiring--
		}
		c.stats.add(&c.entries[at], -1)
		c.unlinkDup(&c.entries[at])
		last := len(c.entries) - 1
		c.entries[at] = c.entries[last]
		c.pos[c.entries[at].id] = at
		c.entries = c.entries[:last]
		delete(c.pos, id)
	}
}

// mayHoldExpiring reports whether any record might carry an expiry (true
// until the catalog has loaded).
func (c *catalog) mayHoldExpiring() bool {
	select {
	case <-c.loaded:
	default:
		return true
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.expiring > 0
}

// wait blocks until the catalog has loaded.
func (c *catalog) wait(ctx context.Context) error {
	select {
	case <-c.loaded:
		return c.loadErr
	case <-ctx.Done():
		return fmt.Errorf("bleve: waiting for the realm catalog to load: %w", ctx.Err())
	}
}

// finish marks the load done.
func (c *catalog) finish(err error) {
	c.loadErr = err
	close(c.loaded)
}

// The catalog field stores a catEntry beside the record, so a load reads
// a few bytes a record and never parses bodies:
//
//	c2 TAB id TAB scope TAB status TAB updated TAB expires TAB use_count TAB usage_key TAB length TAB dedup
//
// with times in unix nanoseconds (0 for none), the usage key in Go's
// shortest exact float form, the record's BM25 length and its dedup
// fingerprint in hex. Ids, scopes and
// statuses are tokens that never hold a tab. The usage key lives only
// here and in the catalog. Format c1 (layout 2 and before) has no length;
// it is read only to rebuild a stale index.
const catalogFormat = "c2"

func encodeCatalog(e catEntry) string {
	var b strings.Builder
	b.Grow(len(e.id) + len(e.scope) + 64)
	for _, part := range []string{catalogFormat, e.id, string(e.scope), string(e.status)} {
		b.WriteString(part)
		b.WriteByte('\t')
	}
	for _, n := range []int64{e.updated, e.expires, e.useCount} {
		b.WriteString(strconv.FormatInt(n, 10))
		b.WriteByte('\t')
	}
	b.WriteString(strconv.FormatFloat(e.usageKey, 'g', -1, 64))
	b.WriteByte('\t')
	b.WriteString(strconv.FormatUint(uint64(e.length), 10))
	b.WriteByte('\t')
	b.WriteString(strconv.FormatUint(e.dedup, 16))
	return b.String()
}

func decodeCatalog(s string) (catEntry, error) {
	parts := strings.Split(s, "\t")
	if !(len(parts) == 10 && parts[0] == catalogFormat) && !(len(parts) == 8 && parts[0] == "c1") {
		return catEntry{}, fmt.Errorf("catalog field %.60q is not in format %s", s, catalogFormat)
	}
	e := catEntry{id: parts[1], scope: sdk.Scope(parts[2]), status: sdk.Status(parts[3])}
	if e.id == "" {
		return catEntry{}, fmt.Errorf("catalog field %.60q has no id", s)
	}
	for i, dst := range []*int64{&e.updated, &e.expires, &e.useCount} {
		n, err := strconv.ParseInt(parts[4+i], 10, 64)
		if err != nil {
			return catEntry{}, fmt.Errorf("catalog field %.60q: %v", s, err)
		}
		*dst = n
	}
	key, err := strconv.ParseFloat(parts[7], 64)
	if err != nil || math.IsNaN(key) || math.IsInf(key, 0) {
		return catEntry{}, fmt.Errorf("catalog field %.60q: usage key %q is not a finite number", s, parts[7])
	}
	e.usageKey = key
	if len(parts) == 10 {
		n, err := strconv.ParseUint(parts[8], 10, 32)
		if err != nil {
			return catEntry{}, fmt.Errorf("catalog field %.60q: length: %v", s, err)
		}
		e.length = uint32(n)
		if e.dedup, err = strconv.ParseUint(parts[9], 16, 64); err != nil {
			return catEntry{}, fmt.Errorf("catalog field %.60q: dedup: %v", s, err)
		}
	}
	return e, nil
}

// load reads every live document's catalog field into the catalog,
// segment by segment (no per-document id lookups). It runs with the
// realm's writers held off, so no write slips between the read and the
// catalog.
func (ri *realmIndex) load(ctx context.Context) error {
	reader, err := ri.reader()
	if err != nil {
		return err
	}
	defer reader.Close()
	snap, ok := reader.(*scorch.IndexSnapshot)
	if !ok {
		return fmt.Errorf("index reader %T is not a scorch snapshot", reader)
	}
	batch := make([]catEntry, 0, 1024)
	for _, seg := range snap.Segments() {
		live := seg.DocNumbersLive().Iterator()
		for live.HasNext() {
			num := uint64(live.Next())
			var e catEntry
			var decodeErr error
			found := false
			err := seg.VisitDocument(num, func(name string, _ byte, val []byte, _ []uint64) bool {
				if name != fieldCatalog {
					return true
				}
				found = true
				e, decodeErr = decodeCatalog(string(val))
				return false
			})
			switch {
			case err != nil:
				return err
			case !found:
				return fmt.Errorf("document %d of segment %d has no %s field", num, seg.Id(), fieldCatalog)
			case decodeErr != nil:
				return fmt.Errorf("document %d of segment %d: %v", num, seg.Id(), decodeErr)
			}
			batch = append(batch, e)
			if len(batch) == cap(batch) {
				if err := ctx.Err(); err != nil {
					return err
				}
				ri.cat.put(batch)
				batch = batch[:0]
			}
		}
	}
	ri.cat.put(batch)
	return nil
}

// pick is one chosen manifest row: an id and its rank (0 when unranked).
type pick struct {
	id   string
	rank float64
}

// workingSet chooses the rows of TierWorkingSet(k) among the recallable
// entries of scopes (all when empty): the top k ranked (used) entries by
// rank, then the newest unranked ones up to 2k rows.
func (c *catalog) workingSet(scopes []sdk.Scope, k int, now time.Time) []pick {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ranked := newTopN(k, func(a, b *catEntry) int {
		return cmp.Or(cmp.Compare(a.usageKey, b.usageKey), newer(a, b))
	})
	unranked := newTopN(2*k, newer)
	c.scan(scopes, now, func(e *catEntry) {
		if e.useCount > 0 {
			ranked.offer(e)
		} else {
			unranked.offer(e)
		}
	})
	top := ranked.sorted()
	rest := unranked.sorted()
	out := make([]pick, 0, min(2*k, len(top)+len(rest)))
	for _, e := range top {
		out = append(out, pick{e.id, usage.Rank(e.usageKey, now)})
	}
	for _, e := range rest {
		if len(out) == 2*k {
			break
		}
		out = append(out, pick{id: e.id})
	}
	return out
}

// full chooses every recallable entry of scopes, newest first, each
// with its rank.
func (c *catalog) full(scopes []sdk.Scope, now time.Time) []pick {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var all []*catEntry
	c.scan(scopes, now, func(e *catEntry) { all = append(all, e) })
	slices.SortFunc(all, func(a, b *catEntry) int { return newer(b, a) })
	out := make([]pick, len(all))
	for i, e := range all {
		out[i] = pick{id: e.id}
		if e.useCount > 0 {
			out[i].rank = usage.Rank(e.usageKey, now)
		}
	}
	return out
}

// newer orders entries by update time, then id: positive when a is newer.
func newer(a, b *catEntry) int {
	return cmp.Or(cmp.Compare(a.updated, b.updated), cmp.Compare(a.id, b.id))
}

// scan calls fn with each recallable entry of scopes. fn must not keep
// the pointer past the read lock.
func (c *catalog) scan(scopes []sdk.Scope, now time.Time, fn func(*catEntry)) {
	nowNano := now.UnixNano()
	for i := range c.entries {
		e := &c.entries[i]
		if e.status != sdk.StatusActive || (e.expires != 0 && nowNano >= e.expires) {
			continue
		}
		if len(scopes) > 0 && !slices.Contains(scopes, e.scope) {
			continue
		}
		fn(e)
	}
}

// topN keeps the n greatest entries offered, by cmp, in a min-heap.
type topN struct {
	n    int
	cmp  func(a, b *catEntry) int
	heap []*catEntry
}

func newTopN(n int, cmp func(a, b *catEntry) int) *topN {
	return &topN{n: n, cmp: cmp, heap: make([]*catEntry, 0, min(n, 1024))}
}

func (t *topN) offer(e *catEntry) {
	h := t.heap
	if len(h) < t.n {
		h = append(h, e)
		for i := len(h) - 1; i > 0; { // sift up
			parent := (i - 1) / 2
			if t.cmp(h[i], h[parent]) >= 0 {
				break
			}
			h[i], h[parent] = h[parent], h[i]
			i = parent
		}
		t.heap = h
		return
	}
	if t.n == 0 || t.cmp(e, h[0]) <= 0 {
		return
	}
	h[0] = e
	for i := 0; ; { // sift down
		least, l, r := i, 2*i+1, 2*i+2
		if l < len(h) && t.cmp(h[l], h[least]) < 0 {
			least = l
		}
		if r < len(h) && t.cmp(h[r], h[least]) < 0 {
			least = r
		}
		if least == i {
			break
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}

// sorted answers the kept entries, greatest first.
func (t *topN) sorted() []*catEntry {
	out := slices.Clone(t.heap)
	slices.SortFunc(out, func(a, b *catEntry) int { return t.cmp(b, a) })
	return out
}
