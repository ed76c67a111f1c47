// Package dupnotes says what a write of content its scope already held
// left unchanged. A provider answers such a write with the holder's id
// and keeps the holder as it was, so tags, an occurred_at or an
// expires_at asked for with it are not stored; the write's answer says so
// rather than dropping them in silence (HTTP and MCP alike).
package dupnotes

import (
	"context"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// TagsNotAdded is a duplicate write whose new tags were not stored: the
// provider answered the existing record's id and kept that record as it
// was, so the answer says so rather than dropping the tags in silence.
// The same holds for a new occurred_at (OccurredAtNotChanged) and a new
// expires_at (ExpiresAtNotChanged).
type TagsNotAdded struct {
	Index int      `json:"index"`
	ID    string   `json:"id"`
	Tags  []string `json:"tags"`
}

// OccurredAtNotChanged is a duplicate write whose occurred_at differs from
// the stored record's, which was kept: OccurredAt is the stored one (nil:
// it has none).
type OccurredAtNotChanged struct {
	Index      int        `json:"index"`
	ID         string     `json:"id"`
	OccurredAt *time.Time `json:"occurred_at,omitempty"`
}

// ExpiresAtNotChanged is a duplicate write whose expires_at differs from the
// stored record's, which was kept: a write meant to give a record a time
// to live, or to extend it, left the record expiring as before (or never).
// ExpiresAt is the stored one (nil: it has none).
type ExpiresAtNotChanged struct {
	Index     int        `json:"index"`
	ID        string     `json:"id"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Of compares what was asked with the stored records and
// answers, in request order, the records missing some of the tags asked
// for, those whose asked occurred_at the stored record does not hold, and
// those whose asked expires_at it does not hold (nil: none). It costs one
// Get, and only when a record carries tags, an occurred_at or an
// expires_at; a provider that cannot fetch is not asked.
func Of(ctx context.Context, p sdk.Provider, realm string, asked []sdk.Record, ids []string) ([]TagsNotAdded, []OccurredAtNotChanged, []ExpiresAtNotChanged) {
	g, ok := host.ProviderOf(p).Getter()
	if !ok || len(ids) != len(asked) {
		return nil, nil, nil
	}
	var noted []string
	for i, r := range asked {
		if len(r.Tags) > 0 || !r.OccurredAt.IsZero() || !r.ExpiresAt.IsZero() {
			noted = append(noted, ids[i])
		}
	}
	if len(noted) == 0 {
		return nil, nil, nil
	}
	stored, err := g.Get(ctx, realm, noted)
	if err != nil {
		return nil, nil, nil // the write succeeded; the note is best effort
	}
	byID := make(map[string]sdk.Record, len(stored))
	for _, r := range stored {
		byID[r.ID] = r
	}
	var tags []TagsNotAdded
	var occurred []OccurredAtNotChanged
	var expiry []ExpiresAtNotChanged
	for i, r := range asked {
		have, ok := byID[ids[i]]
		if !ok {
			continue
		}
		var missing []string
		for _, t := range r.Tags {
			if !hasTag(have.Tags, t) {
				missing = append(missing, t)
			}
		}
		if len(missing) > 0 {
			tags = append(tags, TagsNotAdded{Index: i, ID: ids[i], Tags: missing})
		}
		if !r.OccurredAt.IsZero() && !sameStoredTime(r.OccurredAt, have.OccurredAt) {
			note := OccurredAtNotChanged{Index: i, ID: ids[i]}
			if !have.OccurredAt.IsZero() {
				at := have.OccurredAt.UTC()
				note.OccurredAt = &at
			}
			occurred = append(occurred, note)
		}
		if !r.ExpiresAt.IsZero() && !sameStoredTime(r.ExpiresAt, have.ExpiresAt) {
			note := ExpiresAtNotChanged{Index: i, ID: ids[i]}
			if !have.ExpiresAt.IsZero() {
				at := have.ExpiresAt.UTC()
				note.ExpiresAt = &at
			}
			expiry = append(expiry, note)
		}
	}
	return tags, occurred, expiry
}

// sameStoredTime reports whether asked is stored as have: stores keep
// milliseconds, and the epoch as the millisecond before it.
func sameStoredTime(asked, have time.Time) bool {
	if have.IsZero() {
		return false
	}
	ms := func(t time.Time) int64 {
		if m := t.UnixMilli(); m != 0 {
			return m
		}
		return -1
	}
	return ms(asked) == ms(have)
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
