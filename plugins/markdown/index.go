package markdown

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/tokenize"
)

// The index keeps every record of a realm in memory with an inverted index
// over two kinds of words:
//
//   - terms, exactly as sdk/tokenize cuts them, for the exact-match rules
//     (tag +5, title +4, body +2);
//   - text words: the maximal runs of letters, digits and CJK characters,
//     lower-cased, stopwords included, for the substring rules (+1).
//
// A query term is itself a run of such characters, so it occurs in a text
// exactly when it occurs inside one of the text's words. That turns "which
// records contain this substring" into "which vocabulary words contain it",
// answered through an n-gram index over the vocabulary (tens of thousands
// of short words) instead of a scan of every body. The substring rule is
// therefore exact, and a record that only reaches the score threshold
// through two +1 substring matches is found like any other.

// fieldFlags say where a word occurs in one record.
type fieldFlags uint8

const (
	inTagTerms   fieldFlags = 1 << iota // a term of one of the tags
	inTitleTerms                        // a term of the title
	inBodyTerms                         // a term of the description or body
	inTitleText                         // a text word of the title
	inBodyText                          // a text word of the description or body

	termFlags = inTagTerms | inTitleTerms | inBodyTerms
	textFlags = inTitleText | inBodyText
	touched   = fieldFlags(1 << 7) // scratch marker, never stored
)

// Scores of DESIGN section 8, per query term.
const (
	scoreTag           = 5
	scoreTitleTerm     = 4
	scoreTitleSub      = 1
	scoreBodyTerm      = 2
	scoreBodySub       = 1
	minTitleSubBytes   = 5 // a title substring counts only for terms this long
	minRecallScore     = 2
	compactMinDead     = 1024
	compactDeadPerLive = 2 // compact when dead slots exceed live/2
)

// termScore applies the scoring rules to where one query term was found.
func termScore(m fieldFlags, termBytes int) int32 {
	var s int32
	if m&inTagTerms != 0 {
		s += scoreTag
	}
	switch {
	case m&inTitleTerms != 0:
		s += scoreTitleTerm
	case termBytes >= minTitleSubBytes && m&inTitleText != 0:
		s += scoreTitleSub
	}
	switch {
	case m&inBodyTerms != 0:
		s += scoreBodyTerm
	case m&inBodyText != 0:
		s += scoreBodySub
	}
	return s
}

// recordWords lists every indexed word of r with where it occurs.
// The description is scored as part of the body: it is the record's own
// summary of the body.
func recordWords(r *sdk.Record) map[string]fieldFlags {
	m := make(map[string]fieldFlags, 64)
	for _, tag := range r.Tags {
		for _, t := range tokenize.Terms(tag) {
			m[t] |= inTagTerms
		}
	}
	for _, t := range tokenize.Terms(r.Title) {
		m[t] |= inTitleTerms
	}
	textWords(r.Title, func(w string) { m[w] |= inTitleText })
	for _, s := range [2]string{r.Description, r.Body} {
		for _, t := range tokenize.Terms(s) {
			m[t] |= inBodyTerms
		}
		textWords(s, func(w string) { m[w] |= inBodyText })
	}
	return m
}

// isTextRune matches every rune a tokenizer term can hold, so a term
// never straddles two text words.
func isTextRune(r rune) bool {
	switch {
	case r < utf8.RuneSelf:
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	case r == utf8.RuneError:
		return false
	case r >= firstCJK && tokenize.IsCJK(r):
		return true
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r)
}

// firstCJK is the lowest rune of the scripts tokenize.IsCJK matches
// (Hangul Jamo); checking it first keeps Latin text off the slow path.
const firstCJK = 0x1100

// textWords calls emit with each maximal run of text runes, lower-cased
// rune by rune exactly as the tokenizer lower-cases terms.
func textWords(s string, emit func(string)) {
	var b strings.Builder
	for _, r := range s {
		if isTextRune(r) {
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		if b.Len() > 0 {
			emit(b.String())
			b.Reset()
		}
	}
	if b.Len() > 0 {
		emit(b.String())
	}
}

// doc is one record file as indexed.
type doc struct {
	rec   sdk.Record
	stamp fileStamp
	// digest of the file bytes; a re-read with the same digest is no change.
	digest uint64
	// racy: the stamp was taken so soon after the file's mtime that a
	// later edit could carry the same stamp; re-read before trusting it.
	racy bool
}

// sameText reports whether a and b index to the same words, so a
// metadata-only change (status, trust, times) can keep the postings.
func sameText(a, b *sdk.Record) bool {
	if a.Title != b.Title || a.Description != b.Description || a.Body != b.Body || len(a.Tags) != len(b.Tags) {
		return false
	}
	for i := range a.Tags {
		if a.Tags[i] != b.Tags[i] {
			return false
		}
	}
	return true
}

type posting struct {
	slot  int32
	flags fieldFlags
}

type word struct {
	text     string
	postings []posting
}

type contentKey struct {
	scope sdk.Scope
	hash  string
}

// realmIndex holds one realm. Nothing in it refers to another realm, so
// realm isolation does not depend on filtering. Readers hold the store's
// read lock; all changes happen under its write lock.
//
// Removal is lazy: a removed record's slot is marked dead and its
// postings stay until compaction, so deleting or editing a record costs
// O(1) instead of a walk through every long posting list it appears in.
type realmIndex struct {
	docs    []*doc  // by slot; nil once removed
	scopeOf []int32 // by slot: scope number, -1 once removed
	live    int

	scopeNum   map[sdk.Scope]int32
	byID       map[string]int32
	byScope    map[sdk.Scope]map[string]int32 // scope → id → slot
	byContent  map[contentKey][]int32
	words      []word
	wordNum    map[string]int32
	grams      map[uint32][]int32 // n-gram → words containing it
	scratchMem sync.Pool
}

func newRealmIndex() *realmIndex {
	return &realmIndex{
		scopeNum:  map[sdk.Scope]int32{},
		byID:      map[string]int32{},
		byScope:   map[sdk.Scope]map[string]int32{},
		byContent: map[contentKey][]int32{},
		wordNum:   map[string]int32{},
		grams:     map[uint32][]int32{},
	}
}

func (ri *realmIndex) get(id string) *doc {
	if slot, ok := ri.byID[id]; ok {
		return ri.docs[slot]
	}
	return nil
}

// inScope answers the doc stored under (scope, id), or nil.
func (ri *realmIndex) inScope(scope sdk.Scope, id string) *doc {
	if slot, ok := ri.byScope[scope][id]; ok {
		return ri.docs[slot]
	}
	return nil
}

// sameContent answers the docs of scope whose title and body hash to hash.
func (ri *realmIndex) sameContent(scope sdk.Scope, hash string) []*doc {
	slots := ri.byContent[contentKey{scope, hash}]
	out := make([]*doc, 0, len(slots))
	for _, s := range slots {
		out = append(out, ri.docs[s])
	}
	return out
}

// add indexes d; words is recordWords(&d.rec), computed by the caller
// outside the lock. The id must not be indexed already.
func (ri *realmIndex) add(d *doc, words map[string]fieldFlags) {
	slot := int32(len(ri.docs))
	sn, ok := ri.scopeNum[d.rec.Scope]
	if !ok {
		sn = int32(len(ri.scopeNum))
		ri.scopeNum[d.rec.Scope] = sn
	}
	ri.docs = append(ri.docs, d)
	ri.scopeOf = append(ri.scopeOf, sn)
	ri.live++
	ri.link(slot, d)
	for w, f := range words {
		wn, ok := ri.wordNum[w]
		if !ok {
			wn = ri.newWord(w)
		}
		ri.words[wn].postings = append(ri.words[wn].postings, posting{slot, f})
	}
}

// link enters slot into the lookup maps.
func (ri *realmIndex) link(slot int32, d *doc) {
	ri.byID[d.rec.ID] = slot
	ids := ri.byScope[d.rec.Scope]
	if ids == nil {
		ids = map[string]int32{}
		ri.byScope[d.rec.Scope] = ids
	}
	ids[d.rec.ID] = slot
	k := contentKey{d.rec.Scope, d.rec.ContentHash}
	ri.byContent[k] = append(ri.byContent[k], slot)
}

func (ri *realmIndex) unlink(slot int32, d *doc) {
	delete(ri.byID, d.rec.ID)
	if ids := ri.byScope[d.rec.Scope]; ids != nil {
		delete(ids, d.rec.ID)
		if len(ids) == 0 {
			delete(ri.byScope, d.rec.Scope)
		}
	}
	k := contentKey{d.rec.Scope, d.rec.ContentHash}
	slots := ri.byContent[k]
	for i, s := range slots {
		if s == slot {
			slots = append(slots[:i], slots[i+1:]...)
			break
		}
	}
	if len(slots) == 0 {
		delete(ri.byContent, k)
	} else {
		ri.byContent[k] = slots
	}
}

// remove drops the record with id, if indexed.
func (ri *realmIndex) remove(id string) {
	slot, ok := ri.byID[id]
	if !ok {
		return
	}
	ri.unlink(slot, ri.docs[slot])
	ri.docs[slot] = nil
	ri.scopeOf[slot] = -1
	ri.live--
}

// replaceMeta swaps in d for the record with the same id whose indexed
// text is unchanged (sameText), keeping its postings.
func (ri *realmIndex) replaceMeta(d *doc) {
	slot := ri.byID[d.rec.ID]
	ri.unlink(slot, ri.docs[slot])
	ri.docs[slot] = d
	ri.link(slot, d)
}

func (ri *realmIndex) newWord(w string) int32 {
	wn := int32(len(ri.words))
	ri.words = append(ri.words, word{text: w})
	ri.wordNum[w] = wn
	forEachGram(w, func(g uint32) { ri.grams[g] = append(ri.grams[g], wn) })
	return wn
}

// gramKey packs a 1-3 byte string and its length into a map key.
func gramKey(s string) uint32 {
	k := uint32(len(s)) << 24
	for i := 0; i < len(s); i++ {
		k |= uint32(s[i]) << (16 - 8*i)
	}
	return k
}

// forEachGram calls fn once for each distinct byte bigram and trigram of
// w, and for each ASCII digit in it (the only one-byte terms the tokenizer
// keeps: one-letter Latin words are dropped).
func forEachGram(w string, fn func(uint32)) {
	var seen map[uint32]bool
	if len(w) > 3 {
		seen = make(map[uint32]bool, 2*len(w))
	}
	emit := func(g uint32) {
		if seen != nil {
			if seen[g] {
				return
			}
			seen[g] = true
		}
		fn(g)
	}
	if len(w) <= 3 {
		// Short words: emit each gram once by hand (no map).
		for n := 1; n <= len(w); n++ {
			for i := 0; i+n <= len(w); i++ {
				if n == 1 && (w[i] < '0' || w[i] > '9') {
					continue
				}
				g := gramKey(w[i : i+n])
				dup := false
				for j := 0; j < i; j++ {
					if w[j:j+n] == w[i:i+n] {
						dup = true
						break
					}
				}
				if !dup {
					fn(g)
				}
			}
		}
		return
	}
	for i := 0; i < len(w); i++ {
		if c := w[i]; c >= '0' && c <= '9' {
			emit(gramKey(w[i : i+1]))
		}
		if i+2 <= len(w) {
			emit(gramKey(w[i : i+2]))
		}
		if i+3 <= len(w) {
			emit(gramKey(w[i : i+3]))
		}
	}
}

// wordsContaining answers the vocabulary words that contain t, t itself
// excepted. The answer may alias index memory: read it, never change it.
func (ri *realmIndex) wordsContaining(t string, buf []int32) []int32 {
	self, hasSelf := ri.wordNum[t]
	if len(t) <= 3 {
		// Every word listed under the n-gram t contains t.
		buf = buf[:0]
		for _, wn := range ri.grams[gramKey(t)] {
			if !hasSelf || wn != self {
				buf = append(buf, wn)
			}
		}
		return buf
	}
	// Longer terms: walk the rarest trigram's list and verify.
	var best []int32
	for i := 0; i+3 <= len(t); i++ {
		l, ok := ri.grams[gramKey(t[i:i+3])]
		if !ok {
			return buf[:0]
		}
		if best == nil || len(l) < len(best) {
			best = l
		}
	}
	buf = buf[:0]
	for _, wn := range best {
		if (!hasSelf || wn != self) && strings.Contains(ri.words[wn].text, t) {
			buf = append(buf, wn)
		}
	}
	return buf
}

// scratch is per-query working memory, kept zeroed between queries.
type scratch struct {
	mask      []fieldFlags
	score     []int32
	scored    []int32 // slots with a non-zero score
	termSlots []int32 // slots touched by the current term
	wordBuf   []int32
}

func (ri *realmIndex) getScratch() *scratch {
	sc, _ := ri.scratchMem.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	if n := len(ri.docs); len(sc.mask) < n {
		n += n/4 + 64
		sc.mask = make([]fieldFlags, n)
		sc.score = make([]int32, n)
	}
	return sc
}

// candidate is a slot whose score reached the threshold.
type candidate struct {
	slot  int32
	score int32
}

// search scores every record of the allowed scopes against terms and
// answers those scoring at least minRecallScore, in no order. allowed is
// indexed by scope number; nil allows every scope.
func (ri *realmIndex) search(terms []string, allowed []bool) []candidate {
	sc := ri.getScratch()
	defer ri.scratchMem.Put(sc)
	ok := func(slot int32) bool {
		s := ri.scopeOf[slot]
		return s >= 0 && (allowed == nil || allowed[s])
	}
	for _, t := range terms {
		slots := sc.termSlots[:0]
		mark := func(p posting, keep fieldFlags) {
			if !ok(p.slot) {
				return
			}
			if sc.mask[p.slot] == 0 {
				slots = append(slots, p.slot)
			}
			sc.mask[p.slot] |= touched | p.flags&keep
		}
		if wn, found := ri.wordNum[t]; found {
			for _, p := range ri.words[wn].postings {
				mark(p, termFlags|textFlags)
			}
		}
		sc.wordBuf = ri.wordsContaining(t, sc.wordBuf)
		for _, wn := range sc.wordBuf {
			for _, p := range ri.words[wn].postings {
				if p.flags&textFlags != 0 {
					mark(p, textFlags)
				}
			}
		}
		for _, slot := range slots {
			if s := termScore(sc.mask[slot], len(t)); s > 0 {
				if sc.score[slot] == 0 {
					sc.scored = append(sc.scored, slot)
				}
				sc.score[slot] += s
			}
			sc.mask[slot] = 0
		}
		sc.termSlots = slots[:0]
	}
	var out []candidate
	for _, slot := range sc.scored {
		if s := sc.score[slot]; s >= minRecallScore {
			out = append(out, candidate{slot, s})
		}
		sc.score[slot] = 0
	}
	sc.scored = sc.scored[:0]
	return out
}

// needsCompaction reports whether dead slots have piled up enough to be
// worth a rebuild of the postings.
func (ri *realmIndex) needsCompaction() bool {
	dead := len(ri.docs) - ri.live
	return dead >= compactMinDead && dead*compactDeadPerLive > ri.live
}

// compacted builds a copy of ri without dead slots or unused words. It
// only reads ri, so it may run while readers use ri; the caller swaps it
// in under the write lock.
func (ri *realmIndex) compacted() *realmIndex {
	out := newRealmIndex()
	renum := make([]int32, len(ri.docs))
	for slot, d := range ri.docs {
		if d == nil {
			renum[slot] = -1
			continue
		}
		renum[slot] = int32(len(out.docs))
		sn, ok := out.scopeNum[d.rec.Scope]
		if !ok {
			sn = int32(len(out.scopeNum))
			out.scopeNum[d.rec.Scope] = sn
		}
		out.docs = append(out.docs, d)
		out.scopeOf = append(out.scopeOf, sn)
		out.link(renum[slot], d)
	}
	out.live = len(out.docs)
	for _, w := range ri.words {
		var ps []posting
		for _, p := range w.postings {
			if n := renum[p.slot]; n >= 0 {
				ps = append(ps, posting{n, p.flags})
			}
		}
		if len(ps) > 0 {
			wn := out.newWord(w.text)
			out.words[wn].postings = ps
		}
	}
	return out
}
