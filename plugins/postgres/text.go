package postgres

import (
	"strings"
	"unicode"

	"github.com/memhost/memhost/sdk"
	sdkindex "github.com/memhost/memhost/sdk/index"
)

// Text is indexed and queried as sdk/index terms (sdk/tokenize, truncated
// and capped by sdk/index), the terms the host and the sqlite provider cut,
// so the two providers rank over the same terms.

// fieldWeights: a term in a tag counts five times a term in the body, in
// the title four times, in the description twice (as in the sqlite
// provider).
var fieldWeights = [4]float64{5, 4, 2, 1}

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
		for _, t := range sdkindex.FieldTerms(text) {
			d.tf[t] += fieldWeights[i]
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
