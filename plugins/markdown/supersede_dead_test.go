package markdown

import (
	"errors"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestSupersedeOfATombstonedRecordIsAConflict: from an outside review.
// Supersede of a record no longer active is a conflict (protocol.md), as
// sqlite, postgres and bleve answer for a tombstoned record; markdown
// checked for a superseded one only, so it marked a tombstoned record
// superseded and stored the replacement beside it. Nothing changes now.
func TestSupersedeOfATombstonedRecordIsAConflict(t *testing.T) {
	tp := newTestProvider(t, modes[1])
	at := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	dead := sdk.Record{ID: sdk.NewRecordID(at), Realm: "default", Scope: alice, Kind: sdk.KindFact, Title: "gone", Body: "a retracted fact",
		Trust: sdk.TrustAgentObserved, Status: sdk.StatusTombstoned, CreatedAt: at, UpdatedAt: at}
	if res, err := tp.Import(ctx, "default", []sdk.Record{dead}); err != nil || res.Imported != 1 {
		t.Fatalf("Import = %+v, %v", res, err)
	}
	for _, c := range []struct {
		name string
		rep  sdk.Record
	}{
		{"new content", rec(alice, "gone", "a new fact")},
		{"the same content", rec(alice, "gone", "a retracted fact")},
	} {
		if id, err := tp.Supersede(ctx, "default", dead.ID, c.rep); !errors.Is(err, sdk.ErrConflict) {
			t.Errorf("Supersede of the tombstoned record with %s = %q, %v; want a conflict", c.name, id, err)
		}
		got, err := tp.Get(ctx, "default", []string{dead.ID})
		if err != nil || len(got) != 1 || got[0].Status != sdk.StatusTombstoned {
			t.Fatalf("after Supersede with %s, Get = %+v, %v; want it tombstoned still", c.name, got, err)
		}
	}
	if hits, err := tp.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "fact", Scopes: []sdk.Scope{alice}}); err != nil || len(hits) != 0 {
		t.Fatalf("Recall = %+v, %v; want nothing stored", hits, err)
	}
}
