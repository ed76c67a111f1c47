package sqlite

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/tokenize"
)

// Text is indexed and queried as sdk/tokenize terms, so records and queries
// are cut into terms exactly as the host and the other providers cut them
// (CJK runs become bigrams). The FTS5 columns hold those terms joined by
// single spaces; FTS5's ascii tokenizer splits them back one for one,
// because a term holds only letters, digits and marks, and ascii treats
// every non-ASCII rune as part of a token.

const (
	// maxTermBytes truncates (at a rune boundary) the rare giant token, a
	// pasted hash or blob, on both the record and the query side.
	maxTermBytes = 64
	// maxQueryTerms bounds the work one query can ask for: its first
	// distinct terms are used, the rest ignored.
	maxQueryTerms = 64
)

// field weights for BM25: a term in a tag counts five times a term in the
// body, in the title four times, in the description twice. The order
// matches the FTS5 columns.
var fieldWeights = [4]float64{5, 4, 2, 1}

// tokenTerms appends the (truncated) tokens of s to dst, repeats included.
func tokenTerms(dst []string, s string) []string {
	for _, t := range tokenize.Tokens(s) {
		dst = append(dst, truncateTerm(t))
	}
	return dst
}

func truncateTerm(t string) string {
	if len(t) <= maxTermBytes {
		return t
	}
	cut := maxTermBytes
	for cut > 0 && !utf8.RuneStart(t[cut]) {
		cut--
	}
	return t[:cut]
}

// queryTerms answers the distinct terms of a query, in first-seen order,
// at most maxQueryTerms of them.
func queryTerms(q string) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range tokenTerms(nil, q) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
			if len(out) == maxQueryTerms {
				break
			}
		}
	}
	return out
}

// indexDoc is a record as the recall index sees it.
type indexDoc struct {
	ntok int // tokens over all fields (BM25's document length)
	// colTerms are each field's tokens: tags, title, description, body.
	colTerms [4][]string
}

func newIndexDoc(r *sdk.Record) indexDoc {
	var d indexDoc
	texts := [4]string{strings.Join(r.Tags, " "), r.Title, r.Description, r.Body}
	for i, text := range texts {
		d.colTerms[i] = tokenTerms(nil, text)
		d.ntok += len(d.colTerms[i])
	}
	return d
}

// foldTag maps a tag to a key that two tags share exactly when
// strings.EqualFold holds between them: each rune becomes the smallest rune
// of its simple case-folding orbit.
func foldTag(tag string) string {
	var b strings.Builder
	b.Grow(len(tag))
	for _, r := range tag {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// tagKeys is the stored form of a record's tags for filtering: each folded
// tag wrapped in line feeds (tags hold none), so "\n"+key+"\n" is found in
// it exactly when the record carries the tag.
func tagKeys(tags []string) string {
	if len(tags) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('\n')
	for _, t := range tags {
		b.WriteString(foldTag(t))
		b.WriteByte('\n')
	}
	return b.String()
}
