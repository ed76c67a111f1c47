package postgres

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/tokenize"
)

// Text is indexed and queried as sdk/tokenize terms, the terms the host
// and the sqlite provider cut (CJK runs become bigrams), truncated and
// capped the same way, so the two providers rank over the same terms.
const (
	// maxTermBytes truncates (at a rune boundary) the rare giant token.
	maxTermBytes = 64
	// maxQueryTerms bounds one query's work: its first distinct terms.
	maxQueryTerms = 64
)

// fieldWeights: a term in a tag counts five times a term in the body, in
// the title four times, in the description twice (as in the sqlite
// provider).
var fieldWeights = [4]float64{5, 4, 2, 1}

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
	for _, t := range tokenize.Tokens(q) {
		t = truncateTerm(t)
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

// indexDoc is a record as the index sees it: each distinct term with its
// field-weighted frequency, and the record's length in terms.
type indexDoc struct {
	tf   map[string]float64
	ntok int
}

func newIndexDoc(r *sdk.Record) indexDoc {
	d := indexDoc{tf: map[string]float64{}}
	texts := [4]string{strings.Join(r.Tags, " "), r.Title, r.Description, r.Body}
	for i, text := range texts {
		for _, t := range tokenize.Tokens(text) {
			d.tf[truncateTerm(t)] += fieldWeights[i]
			d.ntok++
		}
	}
	return d
}

// foldTag maps a tag to a key two tags share exactly when
// strings.EqualFold holds between them: each rune becomes the smallest
// rune of its simple case-folding orbit.
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

// foldTags answers the folded keys of tags (never nil: the column is NOT
// NULL).
func foldTags(tags []string) []string {
	out := make([]string, len(tags))
	for i, t := range tags {
		out[i] = foldTag(t)
	}
	return out
}
