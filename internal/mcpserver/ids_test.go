package mcpserver

import (
	"context"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// TestIndexAndRecallIDsAreRendered: a record id is a validated token, but
// a token may spell a marker (an import or a hand-edited file chooses it),
// and the index and recall tools hand ids to the model. They are rendered
// like every other field; an ordinary id reads back unchanged.
func TestIndexAndRecallIDsAreRendered(t *testing.T) {
	cases := []struct{ id, want string }{
		{"memhost_memory_observation", "defanged_memory_observation"},
		{"mem-token", "defanged-mem-token"},
		{"x.M3M-T0K3N", "x.defanged-mem-token"},
		{"Agent.memory.for.identity", "[defanged] Agent.memory.for.identity"},
		{"r0194f3c2a1b07e3c5d2a9f1e", "r0194f3c2a1b07e3c5d2a9f1e"},
	}
	provider := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	want := map[string]bool{}
	for i, tc := range cases {
		provider.MustAdd("default", sdk.Record{ID: tc.id, Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact,
			Title: "coffee", Body: "coffee " + string(rune('a'+i))})
		want[tc.want] = true
	}
	tl := tools{aliceOptions(t, provider)}
	ctx := context.Background()
	_, page, err := tl.index(ctx, nil, IndexInput{})
	if err != nil {
		t.Fatal(err)
	}
	_, rec, err := tl.recall(ctx, nil, RecallInput{Query: "coffee"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range page.Rows {
		got = append(got, r.ID)
	}
	if len(rec.Hits) != len(cases) {
		t.Fatalf("recall answered %d hits, want %d", len(rec.Hits), len(cases))
	}
	for _, h := range rec.Hits {
		got = append(got, h.ID)
	}
	if len(got) != 2*len(cases) {
		t.Fatalf("index listed %d rows, want %d", len(page.Rows), len(cases))
	}
	for _, id := range got {
		if !want[id] {
			t.Errorf("id %q answered; want one of the rendered ids %v", id, want)
		}
	}
}
