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
			now := time.Now().UTC()
			expired := now.Add(-time.Hour).Truncate(time.Millisecond)
			at := now.Add(-48 * time.Hour).Truncate(time.Millisecond)
			imported := func(id string, status sdk.Status, tags []string, expires time.Time) sdk.Record {
				r := rec(string(sdk.RealmScope), "Side door", "The side door code is 4711.", tags...)
				r.ID, r.Status, r.Trust, r.ExpiresAt = id, status, sdk.TrustAgentObserved, expires
				r.CreatedAt, r.UpdatedAt = at, at
				return r
			}
			p := newProvider(t, "")
			holder := imported("old", sdk.StatusActive, nil, expired)
			proposal := imported("prop", sdk.StatusQuarantined, []string{"memhost:proposal"}, time.Time{})
			batches := [][]sdk.Record{{holder}, {proposal}}
			if tc.sameBatch {
				batches = [][]sdk.Record{{holder, proposal}}
			}
			var skipped int
			for _, b := range batches {
				res, err := p.Import(ctx, realm, b)
				if err != nil {
					t.Fatal(err)
				}
				skipped += res.Skipped
			}
			if skipped != 1 {
				t.Errorf("imports skipped %d records, want the proposal skipped", skipped)
			}
			got, err := p.Get(ctx, realm, []string{"old", "prop"})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].ID != "old" {
				t.Fatalf("stored records = %+v, want the expired holder alone", got)
			}
			if !got[0].ExpiresAt.Equal(expired) || !got[0].UpdatedAt.Equal(at) {
				t.Errorf("the holder now expires %v, updated %v; want %v, %v: the proposal changed it", got[0].ExpiresAt, got[0].UpdatedAt, expired, at)
			}
			q := sdk.RecallQuery{Query: "side door code", Scopes: []sdk.Scope{sdk.RealmScope}}
			if ids := recallIDs(t, p, q); len(ids) != 0 {
				t.Errorf("recall after the proposal's import = %v, want nothing before review", ids)
			}
		})
	}
}
