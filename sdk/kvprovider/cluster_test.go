package kvprovider

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// loaded is a Store that answers a fixed set of records.
type loaded []sdk.Record

func (l loaded) Load(context.Context) ([]sdk.Record, error) { return l, nil }
func (loaded) Put(context.Context, []sdk.Record) error      { return nil }
func (loaded) Delete(context.Context, []Key) error          { return nil }

// TestLoadRenumbersByScope: the records a provider loads at Configure, and
// those a Reindex reads, are indexed in scope order (index.Cluster), so a
// query of one scope passes over the others' postings.
func TestLoadRenumbersByScope(t *testing.T) {
	ctx := context.Background()
	var recs loaded
	now := time.Now()
	for i := range 9000 {
		scope := sdk.RealmScope
		if i%10 < 7 {
			scope = sdk.IdentityScope(fmt.Sprintf("u%02d", i*7%20))
		}
		r := sdk.Record{Scope: scope, Kind: sdk.KindFact, Title: fmt.Sprintf("note %d", i), Body: "harbor keeper"}
		if err := r.Prepare("default", now); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	p := New(Options{Info: sdk.Info{Name: "loaded", Version: "0.1.0"},
		Open: func(context.Context, json.RawMessage) (Store, error) { return recs, nil }})
	if err := p.Configure(ctx, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if out := p.ix.Unclustered("default"); out != 0 {
		t.Fatalf("%d of 9,000 loaded records out of scope order", out)
	}
	if _, err := p.Reindex(ctx, "", nil); err != nil {
		t.Fatal(err)
	}
	if out := p.ix.Unclustered("default"); out != 0 {
		t.Fatalf("%d of 9,000 reindexed records out of scope order", out)
	}
	hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "note 4242 harbor", Scopes: []sdk.Scope{sdk.IdentityScope("u14")}})
	if err != nil || len(hits) == 0 || hits[0].Record.Title != "note 4242" {
		t.Fatalf("Recall = %v, %v; want note 4242 first", hits, err)
	}
}
