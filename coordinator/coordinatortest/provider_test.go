package coordinatortest_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// TestProviderImplementsEveryCapability: the double declares every
// capability the SDK knows when asked to, truthfully, so AllCapabilities
// cannot fall behind the SDK.
func TestProviderImplementsEveryCapability(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	if err := sdk.CheckPlugin(p); err != nil {
		t.Fatal(err)
	}
	if got := host.ProviderOf(p).Capabilities(); !slices.Equal(got, sdk.AllCapabilities()) {
		t.Fatalf("the host reads %v, want every capability %v", got, sdk.AllCapabilities())
	}
}

func TestProviderArchiveRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	src.MustAdd("default", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "one"},
		sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "two"},
		sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "three"})
	var all []sdk.Record
	for after := ""; ; {
		page, err := src.Export(ctx, "default", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Records...)
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	if len(all) != 3 || !slices.IsSortedFunc(all, func(a, b sdk.Record) int { return strings.Compare(a.ID, b.ID) }) {
		t.Fatalf("export answered %d records, want 3 in id order", len(all))
	}
	dst := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	res, err := dst.Import(ctx, "default", all)
	if err != nil || res != (sdk.ImportResult{Imported: 3}) {
		t.Fatalf("Import = %+v, %v", res, err)
	}
	if res, err := dst.Import(ctx, "default", all); err != nil || res != (sdk.ImportResult{Skipped: 3}) {
		t.Fatalf("repeated Import = %+v, %v; want all skipped", res, err)
	}
	if n, err := dst.Reindex(ctx, "default", nil); err != nil || n != 3 {
		t.Fatalf("Reindex = %d, %v", n, err)
	}
	hits, err := dst.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "two"})
	if err != nil || len(hits) != 1 || hits[0].Record.Title != "two" {
		t.Fatalf("Recall after import = %+v, %v", hits, err)
	}
}
