package sqlite

import (
	"strings"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
)

// Text is indexed and queried as sdk/index terms (sdk/tokenize, truncated
// and capped by sdk/index), so records and queries are cut into terms
// exactly as the host and the other providers cut them (CJK runs become
// bigrams).

// field weights for BM25: a term in a tag counts five times a term in the
// body, in the title four times, in the description twice, as FTS5's
// bm25(5,4,2,1) did (the test reference still does).
var fieldWeights = [4]float64{5, 4, 2, 1}

// indexDoc is a record as the recall index sees it.
type indexDoc struct {
	ntok int // tokens over all fields (BM25's document length)
	// colTerms are each field's tokens: tags, title, description, body.
	colTerms [4][]string
}

func newIndexDoc(r *sdk.Record) indexDoc {
	var d indexDoc
	texts := [4]string{index.TagText(r.Tags), r.Title, r.Description, r.Body}
	for i, text := range texts {
		d.colTerms[i] = index.FieldTerms(text)
		d.ntok += len(d.colTerms[i])
	}
	return d
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
		b.WriteString(index.FoldTag(t))
		b.WriteByte('\n')
	}
	return b.String()
}
