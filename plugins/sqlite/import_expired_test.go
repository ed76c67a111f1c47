package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestImportOfContentAnExpiredCopyHolds: an import holding two active
// copies of one content in a scope, the first expired (markdown can hold
// such a pair), keeps the content recallable: sqlite keeps one live copy,
// and the expired holder takes the later copy's expiry, as a write's
// duplicate does. An expired copy of content a live record holds changes
// nothing.
func TestImportOfContentAnExpiredCopyHolds(t *testing.T) {
	ctx := context.Background()
	s, c := open(t, nil)
	imported := func(id string, expires time.Time) sdk.Record {
		r := rec(alice, "Harbour crane", "The harbour crane is inspected on Mondays.")
		r.ID, r.Status, r.Trust, r.ExpiresAt = id, sdk.StatusActive, sdk.TrustAgentObserved, expires
		r.CreatedAt, r.UpdatedAt = c.now().Add(-48*time.Hour), c.now().Add(-48*time.Hour)
		return r
	}
	res, err := s.Import(ctx, realm, []sdk.Record{imported("exA", c.now().Add(-time.Hour)), imported("exB", time.Time{})})
	if err != nil {
		t.Fatal(err)
	}
	if res.Imported != 1 || res.Skipped != 1 {
		t.Fatalf("import = %+v, want one imported and one held already", res)
	}
	q := sdk.RecallQuery{Realm: realm, Query: "harbour crane", Scopes: []sdk.Scope{alice}}
	if ids := recallIDs(t, s, q); len(ids) != 1 {
		t.Fatalf("recall after the import = %v, want the content recallable", ids)
	}
	// Days later, an expired copy imported again revives nothing twice
	// and loses nothing.
	c.advance(72 * time.Hour)
	if _, err := s.Import(ctx, realm, []sdk.Record{imported("exC", c.now().Add(-time.Hour))}); err != nil {
		t.Fatal(err)
	}
	if ids := recallIDs(t, s, q); len(ids) != 1 {
		t.Fatalf("recall after an expired copy's import = %v, want the content still recallable", ids)
	}
}
