package guide

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"golang.org/x/text/unicode/norm"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
	"github.com/memhost/memhost/sdk/tokenize"
)

// Filter defaults and limits.
const (
	DefaultTopK = 5
	MaxTopK     = 100
	// overFetch is how many candidates per wanted entry the first recall
	// asks for while a filter is on; refetch is the second, larger recall
	// when the filters starve the answer.
	overFetch = 3
	refetch   = 10
)

// Filters narrow what a guide injects. The zero value asks for the top
// DefaultTopK records with no filter.
type Filters struct {
	// TopK is how many records to inject; 0 means DefaultTopK.
	TopK int `json:"top_k,omitempty"`
	// MinScore in [0, 1] drops records whose Score is lower; 0 is off.
	MinScore float64 `json:"min_score,omitempty"`
	// RequiredTags must all be on a record; ExcludedTags none of them.
	// Tags compare case-folded.
	RequiredTags []string `json:"required_tags,omitempty"`
	ExcludedTags []string `json:"excluded_tags,omitempty"`
}

// Validate reports the first bad filter; the error wraps sdk.ErrInvalid.
func (f Filters) Validate() error {
	bad := func(field, problem string) error {
		return &sdk.FieldError{Field: field, Problem: problem, Err: sdk.ErrInvalid}
	}
	if f.TopK < 0 || f.TopK > MaxTopK {
		return bad("top_k", fmt.Sprintf("%d is outside 0..%d", f.TopK, MaxTopK))
	}
	if math.IsNaN(f.MinScore) || f.MinScore < 0 || f.MinScore > 1 {
		return bad("min_score", fmt.Sprintf("%v is outside [0, 1]", f.MinScore))
	}
	for field, tags := range map[string][]string{"required_tags": f.RequiredTags, "excluded_tags": f.ExcludedTags} {
		if len(tags) > sdk.MaxTags {
			return bad(field, fmt.Sprintf("%d tags, the limit is %d", len(tags), sdk.MaxTags))
		}
		// A stored tag's rules, so a NUL or invalid UTF-8 never reaches
		// a store.
		if err := sdk.ValidateTagFilter(field, tags); err != nil {
			return err
		}
	}
	return nil
}

// normalized fills the default top_k and case-folds, sorts and
// deduplicates the tags, so equal filters compare equal.
func (f Filters) normalized() Filters {
	if f.TopK == 0 {
		f.TopK = DefaultTopK
	}
	f.RequiredTags = foldTags(f.RequiredTags)
	f.ExcludedTags = foldTags(f.ExcludedTags)
	return f
}

func foldTags(tags []string) []string {
	if len(tags) == 0 {
		return nil
	}
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		// In NFC, as stores compare tags (sdk.SameTag), and with the
		// spaces around it, which stores keep: " sp " is not "sp".
		out = append(out, strings.ToLower(norm.NFC.String(t)))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// active reports whether any filter can drop a record.
func (f Filters) active() bool {
	return f.MinScore > 0 || len(f.RequiredTags) > 0 || len(f.ExcludedTags) > 0
}

// keeps reports whether a record passes the tag filters.
func (f Filters) keeps(r *sdk.Record) bool {
	for _, t := range f.RequiredTags {
		if !r.HasTag(t) {
			return false
		}
	}
	for _, t := range f.ExcludedTags {
		if r.HasTag(t) {
			return false
		}
	}
	return true
}

// Score is the share of the query's distinct terms found among a record's
// terms (title, description, body and tags), in [0, 1]. Terms come from
// the shared tokenizer: whole words (never substrings) of any script, CJK
// as bigrams, stopwords dropped. A query without terms scores 0.
func Score(queryTerms []string, r *sdk.Record) float64 {
	if len(queryTerms) == 0 {
		return 0
	}
	have := make(map[string]struct{}, 64)
	add := func(s string) {
		for _, t := range tokenize.Tokens(s) {
			have[t] = struct{}{}
		}
	}
	add(r.Title)
	add(r.Description)
	add(r.Body)
	add(index.TagText(r.Tags)) // memhost's own tags are markers, not text
	found := 0
	for _, t := range queryTerms {
		if _, ok := have[t]; ok {
			found++
		}
	}
	return float64(found) / float64(len(queryTerms))
}
