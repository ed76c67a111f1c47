package mcpserver

import (
	"context"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// TestIndexListsNoEpisode: memory_index lists what memory holds, not the
// compaction archive's transcript lines, which memory_recall still finds.
func TestIndexListsNoEpisode(t *testing.T) {
	provider := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	alice := sdk.IdentityScope("alice")
	ids := provider.MustAdd("default",
		sdk.Record{Scope: alice, Kind: sdk.KindFact, Title: "Espresso order", Body: "no sugar"},
		sdk.Record{Scope: alice, Kind: sdk.KindEpisode, Title: "user, message 3 of conversation c1", Body: "my gym locker code is 4711"})
	tl := tools{aliceOptions(t, provider)}
	ctx := context.Background()
	_, page, err := tl.index(ctx, nil, IndexInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Rows) != 1 || page.Rows[0].ID != ids[0] {
		t.Fatalf("index %+v, want the fact alone", page.Rows)
	}
	_, rec, err := tl.recall(ctx, nil, RecallInput{Query: "gym locker"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Hits) != 1 || rec.Hits[0].ID != ids[1] {
		t.Fatalf("recall %+v, want the episode", rec.Hits)
	}
}
