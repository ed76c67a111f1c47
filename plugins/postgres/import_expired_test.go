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
	s := openStoreWith(t, configJSON(schemaFor(t, t.Name()), "replica", sqlOnly))
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
