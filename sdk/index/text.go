package index

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk/tokenize"
)

// These cut text into terms exactly as the sqlite provider feeds FTS5, so
// an index built from them ranks as its bm25() does.

const (
	// MaxTermBytes truncates (at a rune boundary) the rare giant token, a
	// pasted hash or blob, on both the document and the query side.
	MaxTermBytes = 64
	// MaxQueryTerms bounds the work one query can ask for: its first
	// distinct terms are used, the rest ignored.
	MaxQueryTerms = 64
	// MaxQueryBytes bounds the text a query's terms are read from, its
	// first bytes (cut at a rune boundary): a query pasted as a whole
	// document of few distinct words would otherwise be cut in full,
	// by the host and again by its provider, on every recall.
	MaxQueryBytes = 64 << 10
)

// ContextWeight is the thread context weight providers index with
// (Options.ContextWeight): a neighbour's term counts 3/8 of a body term
// (a dyadic fraction, so weighted frequencies stay exact in float32).
//
// The context is a field apart from the record's own terms, with its own
// saturation and length: a term counts in it at most ContextTermCap times
// and it adds at most ContextLengthCap terms to the document's BM25
// length. So context lifts a short turn whose neighbours name its topic
// without drowning a long turn among long neighbours, whose context would
// otherwise repeat every term of the session and swell its length.
// Chosen on the LoCoMo and LongMemEval-S development splits together
// (LoCoMo samples 0-4; docs/benchmarks.md says what else was tried).
const ContextWeight = 0.375

// ContextTermCap is how many occurrences of one term the context field
// counts (ContextWeight each).
const ContextTermCap = 2

// ContextLengthCap is the most terms the context adds to a document's
// BM25 length.
const ContextLengthCap = 48

// ContextFrequency answers what n occurrences of a term in the context
// add to its weighted frequency at context weight w.
func ContextFrequency(w float64, n int) float64 { return w * float64(min(n, ContextTermCap)) }

// ContextLength answers what a context of n terms adds to a document's
// BM25 length.
func ContextLength(n int) int { return min(n, ContextLengthCap) }

// ContextSpan is how far thread context reaches: a document's context
// holds the documents from ThreadSeq-ContextSpan to ThreadSeq+ContextSpan
// but itself. 2 ranked better than 1 on the development split.
const ContextSpan = 2

// Neighbours answers the places within ContextSpan of seq, itself left out.
// A seq may be any int64: places past either end of the range are none
// (seq±d must not wrap around).
func Neighbours(seq int64) []int64 {
	out := make([]int64, 0, 2*ContextSpan)
	for d := int64(-ContextSpan); d <= ContextSpan; d++ {
		if s := seq + d; d != 0 && (d > 0) == (s > seq) {
			out = append(out, s)
		}
	}
	return out
}

// SystemTagPrefix opens the tags memhost gives records itself: a
// conversation turn's speaker (memhost:user, memhost:assistant), a
// proposal (memhost:proposal). They filter as any tag does, but they are
// markers, not what the record says: every turn the user spoke carries
// "memhost:user", so were it text a query's "user" would lift them all.
// Providers index a record's tags field from TagText, which leaves them
// out. Compared as tags are, case-folded (FoldTag).
const SystemTagPrefix = "memhost:"

var foldedSystemTagPrefix = FoldTag(SystemTagPrefix)

// IsSystemTag reports whether tag is in the SystemTagPrefix namespace:
// whether FoldTag(tag) starts with the folded prefix, folding only as many
// runes as the prefix holds (a write checks every tag of every record).
func IsSystemTag(tag string) bool {
	for _, want := range foldedSystemTagPrefix {
		r, size := utf8.DecodeRuneInString(tag)
		if size == 0 || leastFold(r) != want {
			return false
		}
		tag = tag[size:]
	}
	return true
}

// TagText answers the text of a record's tags field: its tags but the
// system tags, space-separated.
func TagText(tags []string) string {
	if !slices.ContainsFunc(tags, IsSystemTag) {
		return strings.Join(tags, " ")
	}
	var b strings.Builder
	for _, t := range tags {
		if !IsSystemTag(t) {
			if b.Len() > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(t)
		}
	}
	return b.String()
}

// FieldTerms answers the terms of one field's text, repeats included.
func FieldTerms(text string) []string {
	toks := tokenize.Tokens(text)
	for i, t := range toks {
		toks[i] = truncateTerm(t)
	}
	return toks
}

// FieldHolds reports whether one of text's terms (FieldTerms) is in
// terms, cutting text only as far as the first found.
func FieldHolds(text string, terms map[string]bool) bool {
	for t := range tokenize.All(text) {
		if terms[truncateTerm(t)] {
			return true
		}
	}
	return false
}

// QueryTerms answers the distinct terms of a query in first-seen order, at
// most MaxQueryTerms of them, read from its first MaxQueryBytes.
func QueryTerms(text string) []string {
	text = queryText(text)
	var out []string
	seen := map[string]bool{}
	// Cut only as far as the first MaxQueryTerms terms: a query may be a
	// whole pasted document.
	for t := range tokenize.All(text) {
		t = truncateTerm(t)
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
			if len(out) == MaxQueryTerms {
				break
			}
		}
	}
	return out
}

// queryText answers the first MaxQueryBytes of a query, less a word the
// cut falls inside: its first letters would be a term the query never
// held. A word too long for a term to hold whole keeps its prefix, which
// is its term anyway.
func queryText(text string) string {
	cut := truncateText(text, MaxQueryBytes)
	if r, _ := utf8.DecodeRuneInString(text[len(cut):]); len(cut) == len(text) || !inWord(r) {
		return cut
	}
	for i := len(cut); i > 0 && len(cut)-i <= MaxTermBytes; {
		r, size := utf8.DecodeLastRuneInString(cut[:i])
		if !inWord(r) {
			return cut[:i]
		}
		i -= size
	}
	return cut
}

// inWord reports whether r may stand inside a term: a letter, digit or
// combining mark (tokenize's word runes and CJK runs), or a format
// character or variation selector, which a word goes on across.
func inWord(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r) ||
		unicode.Is(unicode.Cf, r) && r != '\u200b' || unicode.Is(unicode.Variation_Selector, r)
}

func truncateTerm(t string) string { return truncateText(t, MaxTermBytes) }

// truncateText answers the first n bytes of s or fewer, cut at a rune
// boundary.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
