package bleve

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/blevesearch/bleve/v2/document"
	index "github.com/blevesearch/bleve_index_api"
	"github.com/memhost/memhost/sdk"
	memindex "github.com/memhost/memhost/sdk/index"
)

// Field weights, scaled by weightScale so every weighted frequency is an
// integer (a posting's frequency is one): a term in a tag counts five
// body terms, in the title four, in the description two, and a thread
// neighbour's term 3/8 of one, as in the sqlite provider's sdk/index
// (bm25(5,4,2,1) and memindex.ContextWeight). Recall divides the scale
// out again.
const (
	weightScale   = 8
	weightTags    = 5 * weightScale
	weightTitle   = 4 * weightScale
	weightDesc    = 2 * weightScale
	weightBody    = 1 * weightScale
	weightContext = 3 // memindex.ContextWeight * weightScale; TestWeightsMatchIndex checks it
)

// termsField is the one searched field of a record: each distinct term
// with its weighted frequency, and the record's BM25 length (the count of
// its terms and of its context's up to memindex.ContextLengthCap,
// unweighted, as sdk/index counts it).
// It implements bleve's field interfaces directly, so no analyzer runs at
// write time: the terms are cut once, by sdk/index.FieldTerms.
type termsField struct {
	freqs  index.TokenFrequencies
	length int
}

var _ document.Field = (*termsField)(nil)

var termsFieldSize = int(reflect.TypeOf(termsField{}).Size())

func (f *termsField) Name() string                                     { return fieldTerms }
func (f *termsField) ArrayPositions() []uint64                         { return nil }
func (f *termsField) Options() index.FieldIndexingOptions              { return index.IndexField }
func (f *termsField) Analyze()                                         {}
func (f *termsField) Value() []byte                                    { return nil }
func (f *termsField) NumPlainTextBytes() uint64                        { return 0 }
func (f *termsField) EncodedFieldType() byte                           { return 't' }
func (f *termsField) AnalyzedLength() int                              { return f.length }
func (f *termsField) AnalyzedTokenFrequencies() index.TokenFrequencies { return f.freqs }
func (f *termsField) Size() int                                        { return termsFieldSize + f.freqs.Size() }

// weighTerms adds weight to the frequency of each term in terms.
func weighTerms(freqs index.TokenFrequencies, terms []string, weight int) {
	for _, t := range terms {
		tf := freqs[t]
		if tf == nil {
			tf = &index.TokenFreq{Term: []byte(t)}
			freqs[t] = tf
		}
		tf.SetFrequency(tf.Frequency() + weight)
	}
}

// weighContext adds the thread context's terms as sdk/index weighs its
// context field: weightContext per occurrence, up to
// memindex.ContextTermCap occurrences of a term.
func weighContext(freqs index.TokenFrequencies, context []string) {
	n := map[string]int{}
	for _, t := range context {
		n[t]++
	}
	for _, t := range context {
		if c := n[t]; c > 0 {
			weighTerms(freqs, []string{t}, weightContext*min(c, memindex.ContextTermCap))
			n[t] = 0
		}
	}
}

// keywordOptions index a keyword as one term, without frequency or norm.
const keywordOptions = index.IndexField | index.SkipFreqNorm

func keywordField(name, value string, pos int) *document.TextField {
	return document.NewTextFieldCustom(name, []uint64{uint64(pos)}, []byte(value), keywordOptions, nil)
}

// buildDocument answers the index document of a record with usage key key
// and thread context terms context, and its catalog entry. Absent fields
// index nothing, which the queries rely on.
func buildDocument(r *sdk.Record, key float64, context []string) (*document.Document, catEntry, error) {
	raw, err := json.Marshal(r)
	if err != nil {
		return nil, catEntry{}, fmt.Errorf("bleve: encode record %s: %w", r.ID, err)
	}
	doc := document.NewDocument(r.ID)
	doc.AddField(keywordField(fieldScope, string(r.Scope), 0))
	for i, t := range r.Tags {
		doc.AddField(keywordField(fieldTag, foldTag(t), i))
	}
	length := 0
	if r.Status == sdk.StatusActive {
		freqs := index.TokenFrequencies{}
		for _, part := range []struct {
			text   string
			weight int
		}{{memindex.TagText(r.Tags), weightTags}, {r.Title, weightTitle}, {r.Description, weightDesc}, {r.Body, weightBody}} {
			terms := memindex.FieldTerms(part.text)
			weighTerms(freqs, terms, part.weight)
			length += len(terms)
		}
		if r.Thread != nil {
			doc.AddField(keywordField(fieldPlace, placeKey(r.Scope, r.Thread.ID, r.Thread.Seq), 0))
			weighContext(freqs, context)
			length += memindex.ContextLength(len(context))
		}
		if len(freqs) > 0 {
			doc.AddField(&termsField{freqs: freqs, length: length})
		}
	}
	if answersDuplicates(r.Status) {
		doc.AddField(keywordField(fieldDedup, dedupKey(r.Scope, r.ContentHash), 0))
	}
	e := entryOf(r, key)
	e.length = uint32(length)
	doc.AddField(document.NewTextFieldWithIndexingOptions(fieldRecord, nil, raw, index.StoreField))
	doc.AddField(document.NewTextFieldWithIndexingOptions(fieldCatalog, nil, []byte(encodeCatalog(e)), index.StoreField))
	return doc, e, nil
}

// recordTerms answers the terms a record contributes to its neighbours'
// context: those of its text fields.
func recordTerms(r *sdk.Record) []string {
	out := memindex.FieldTerms(memindex.TagText(r.Tags))
	for _, s := range [3]string{r.Title, r.Description, r.Body} {
		out = append(out, memindex.FieldTerms(s)...)
	}
	return out
}
