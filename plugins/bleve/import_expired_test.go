package bleve

import (
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestImportOfContentAnExpiredCopyHolds: an import holding two active
// copies of one content in a scope, the first expired (markdown can hold
// such a pair), keeps the content recallable: the expired holder takes
// the later copy's expiry, as a write's duplicate does, whether the
// holder came in the same import or was stored before.
func TestImportOfContentAnExpiredCopyHolds(t *testing.T) {
	now := time.Now().UTC()
	imported := func(id, body string, expires time.Time) sdk.Record {
		r := rec("identity:alice", "Harbour crane", body)
		r.ID, r.Status, r.Trust, r.ExpiresAt = id, sdk.StatusActive, sdk.TrustAgentObserved, expires
		r.CreatedAt, r.UpdatedAt = now.Add(-48*time.Hour), now.Add(-48*time.Hour)
		return r
	}
	p := newProvider(t, "")
	q := sdk.RecallQuery{Query: "harbour crane", Scopes: []sdk.Scope{"identity:alice"}}
	body := "The harbour crane is inspected on Mondays."
	res, err := p.Import(ctx, realm, []sdk.Record{imported("exA", body, now.Add(-time.Hour)), imported("exB", body, time.Time{})})
	if err != nil {
		t.Fatal(err)
	}
	if res.Imported != 1 || res.Skipped != 1 {
		t.Fatalf("import = %+v, want one imported and one held already", res)
	}
	if ids := recallIDs(t, p, q); len(ids) != 1 {
		t.Fatalf("recall after the import = %v, want the content recallable", ids)
	}
	// A holder stored by an earlier import.
	other := "The harbour crane was repainted in May."
	if _, err := p.Import(ctx, realm, []sdk.Record{imported("exC", other, now.Add(-time.Hour))}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Import(ctx, realm, []sdk.Record{imported("exD", other, time.Time{})}); err != nil {
		t.Fatal(err)
	}
	if ids := recallIDs(t, p, q); len(ids) != 2 {
		t.Fatalf("recall after a later import = %v, want both contents recallable", ids)
	}
}
