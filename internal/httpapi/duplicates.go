package httpapi

import (
	"context"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// unaddedTags is a duplicate write whose new tags were not stored: the
// provider answered the existing record's id and kept that record as it
// was, so the answer says so rather than dropping the tags in silence.
type unaddedTags struct {
	Index int      `json:"index"`
	ID    string   `json:"id"`
	Tags  []string `json:"tags"`
}

// tagsNotAdded compares the tags asked for with the stored records' and
// answers the records missing some, in request order (nil: none). It
// costs one Get, and only when a record carries tags; a provider that
// cannot fetch is not asked.
func tagsNotAdded(ctx context.Context, p sdk.Provider, realm string, asked []sdk.Record, ids []string) []unaddedTags {
	g, ok := host.ProviderOf(p).Getter()
	if !ok || len(ids) != len(asked) {
		return nil
	}
	var tagged []string
	for i, r := range asked {
		if len(r.Tags) > 0 {
			tagged = append(tagged, ids[i])
		}
	}
	if len(tagged) == 0 {
		return nil
	}
	stored, err := g.Get(ctx, realm, tagged)
	if err != nil {
		return nil // the write succeeded; the note is best effort
	}
	byID := make(map[string]sdk.Record, len(stored))
	for _, r := range stored {
		byID[r.ID] = r
	}
	var out []unaddedTags
	for i, r := range asked {
		have, ok := byID[ids[i]]
		if !ok || len(r.Tags) == 0 {
			continue
		}
		var missing []string
		for _, t := range r.Tags {
			if !hasTag(have.Tags, t) {
				missing = append(missing, t)
			}
		}
		if len(missing) > 0 {
			out = append(out, unaddedTags{Index: i, ID: ids[i], Tags: missing})
		}
	}
	return out
}

// hasTag: tags match as recall filters them.
func hasTag(tags []string, t string) bool {
	for _, have := range tags {
		if sdk.SameTag(have, t) {
			return true
		}
	}
	return false
}
