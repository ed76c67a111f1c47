package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestImportOfContentAnExpiredCopyHolds: an import holding two active
// copies of one content in a scope, the first expired (markdown can hold
// such a pair), keeps the content recallable: the expired holder takes
// the later copy's expiry, as a write's duplicate does.
func TestImportOfContentAnExpiredCopyHolds(t *testing.T) {
	s := openStoreWith(t, configJSON(schemaFor(t.Name()), "replica", sqlOnly))
	ctx := context.Background()
	now := time.Now()
	imported := func(id string, expires time.Time) sdk.Record {
		r := note("Harbour crane", "The harbour crane is inspected on Mondays.")
		r.ID, r.Status, r.Trust, r.ExpiresAt = id, sdk.StatusActive, sdk.TrustAgentObserved, expires
		r.CreatedAt, r.UpdatedAt = now.Add(-48*time.Hour), now.Add(-48*time.Hour)
		return r
	}
	res, err := s.Import(ctx, realm, []sdk.Record{imported("exA", now.Add(-time.Hour)), imported("exB", time.Time{})})
	if err != nil {
		t.Fatal(err)
	}
	if res.Imported != 1 || res.Skipped != 1 {
		t.Fatalf("import = %+v, want one imported and one held already", res)
	}
	hits, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "harbour crane", Scopes: []sdk.Scope{sdk.RealmScope}})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 {
		t.Fatalf("recall after the import = %+v, want the content recallable", hits)
	}
	// An expired copy imported again revives nothing and loses nothing.
	if _, err := s.Import(ctx, realm, []sdk.Record{imported("exC", now.Add(-time.Hour))}); err != nil {
		t.Fatal(err)
	}
	if hits, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "harbour crane", Scopes: []sdk.Scope{sdk.RealmScope}}); err != nil || len(hits) != 1 {
		t.Fatalf("recall after an expired copy's import = %+v, %v, want the content still recallable", hits, err)
	}
}

// TestImportOfAProposalAnExpiredCopyHolds: a quarantined record (a
// pending proposal, as the host stores an agent's write to a shared scope)
// whose content an expired record of its scope holds is skipped and
// changes nothing, whether the holder came in the same import or before:
// only an active record revives an expired holder, so nothing becomes
// recallable before review.
func TestImportOfAProposalAnExpiredCopyHolds(t *testing.T) {
	cases := []struct {
		name      string
		sameBatch bool
	}{{"in a later import", false}, {"in the same import", true}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := openStoreWith(t, configJSON(schemaFor(t.Name()), "replica", sqlOnly))
			ctx := context.Background()
			now := time.Now()
			expired := now.Add(-time.Hour).Truncate(time.Millisecond)
			at := now.Add(-48 * time.Hour).Truncate(time.Millisecond)
			imported := func(id string, status sdk.Status, tags []string, expires time.Time) sdk.Record {
				r := note("Side door", "The side door code is 4711.")
				r.ID, r.Status, r.Trust, r.ExpiresAt, r.Tags = id, status, sdk.TrustAgentObserved, expires, tags
				r.CreatedAt, r.UpdatedAt = at, at
				return r
			}
			holder := imported("old", sdk.StatusActive, nil, expired)
			proposal := imported("prop", sdk.StatusQuarantined, []string{"memhost:proposal"}, time.Time{})
			batches := [][]sdk.Record{{holder}, {proposal}}
			if tc.sameBatch {
				batches = [][]sdk.Record{{holder, proposal}}
			}
			var skipped int
			for _, b := range batches {
				res, err := s.Import(ctx, realm, b)
				if err != nil {
					t.Fatal(err)
				}
				skipped += res.Skipped
			}
			if skipped != 1 {
				t.Errorf("imports skipped %d records, want the proposal skipped", skipped)
			}
			got, err := s.Get(ctx, realm, []string{"old", "prop"})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].ID != "old" {
				t.Fatalf("stored records = %+v, want the expired holder alone", got)
			}
			if !got[0].ExpiresAt.Equal(expired) || !got[0].UpdatedAt.Equal(at) {
				t.Errorf("the holder now expires %v, updated %v; want %v, %v: the proposal changed it", got[0].ExpiresAt, got[0].UpdatedAt, expired, at)
			}
			hits, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "side door code", Scopes: []sdk.Scope{sdk.RealmScope}})
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) != 0 {
				t.Errorf("recall after the proposal's import = %+v, want nothing before review", hits)
			}
		})
	}
}
