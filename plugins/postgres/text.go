package postgres

import sdkindex "github.com/memhost/memhost/sdk/index"

// Text is indexed and queried as sdk/index terms (sdk/tokenize, truncated
// and capped by sdk/index), the terms the host and the sqlite provider cut,
// so the two providers rank over the same terms.

// fieldWeights: a term in a tag counts five times a term in the body, in
// the title four times, in the description twice (as in the sqlite
// provider).
var fieldWeights = [4]float64{5, 4, 2, 1}

// indexDoc is a record as the index sees it: each distinct term with its
// weighted frequency, and the record's length in terms (its own and, for
// a threaded record, its context's).
type indexDoc struct {
	tf   map[string]float64
	ntok int
}

// fieldTerms are a record's own terms, field by field: tags, title,
// description, body.
type fieldTerms [4][]string

func recordTerms(tags []string, title, description, body string) fieldTerms {
	var f fieldTerms
	texts := [4]string{sdkindex.TagText(tags), title, description, body}
	for i, text := range texts {
		f[i] = sdkindex.FieldTerms(text)
	}
	return f
}

// buildDoc weighs own terms by field and context terms (the thread
// neighbours' own terms, see thread.go) as sdk/index weighs its context
// field: each term's occurrences capped (ContextFrequency), the field's
// length capped (ContextLength).
func buildDoc(own fieldTerms, context []string) indexDoc {
	d := indexDoc{tf: map[string]float64{}}
	for i, terms := range own {
		for _, t := range terms {
			d.tf[t] += fieldWeights[i]
		}
		d.ntok += len(terms)
	}
	n := map[string]int{}
	for _, t := range context {
		n[t]++
	}
	for t, c := range n {
		d.tf[t] += sdkindex.ContextFrequency(sdkindex.ContextWeight, c)
	}
	d.ntok += sdkindex.ContextLength(len(context))
	return d
}

// foldTags answers the folded keys of tags (never nil: the column is NOT
// NULL).
func foldTags(tags []string) []string {
	out := make([]string, len(tags))
	for i, t := range tags {
		out[i] = sdkindex.FoldTag(t)
	}
	return out
}
