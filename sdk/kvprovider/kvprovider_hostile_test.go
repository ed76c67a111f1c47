package kvprovider_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/kvprovider"
)

// sliceStore keeps its records in one slice and, as a simple store would,
// answers Load with that slice itself and deletes in place.
type sliceStore struct{ recs []sdk.Record }

func (s *sliceStore) Load(context.Context) ([]sdk.Record, error) { return s.recs, nil }

func (s *sliceStore) Put(_ context.Context, recs []sdk.Record) error {
	for _, r := range recs {
		if i := slices.IndexFunc(s.recs, func(o sdk.Record) bool { return o.Realm == r.Realm && o.ID == r.ID }); i >= 0 {
			s.recs[i] = r
		} else {
			s.recs = append(s.recs, r)
		}
	}
	return nil
}

func (s *sliceStore) Delete(_ context.Context, keys []kvprovider.Key) error {
	s.recs = slices.DeleteFunc(s.recs, func(r sdk.Record) bool {
		return slices.Contains(keys, kvprovider.Key{Realm: r.Realm, ID: r.ID})
	})
	return nil
}

// The provider's memory must not alias what Load answered: a store that
// later changes its own slice in place must not change records the
// provider serves.
func TestLoadedRecordsAreNotAliased(t *testing.T) {
	ctx := context.Background()
	store := &sliceStore{}
	now := time.Now()
	for _, id := range []string{"a", "b", "c"} {
		r := sdk.Record{ID: id, Title: "title " + id, Body: "body " + id, Scope: sdk.RealmScope, Kind: "fact"}
		if err := r.Prepare("default", now); err != nil {
			t.Fatal(err)
		}
		store.recs = append(store.recs, r)
	}
	p := kvprovider.New(kvprovider.Options{
		Info: sdk.Info{Name: "slicekv", Version: "0.1.0"},
		Open: func(context.Context, json.RawMessage) (kvprovider.Store, error) { return store, nil },
	})
	if err := p.Configure(ctx, json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if n, err := p.Forget(ctx, "default", []string{"a"}); err != nil || n != 1 {
		t.Fatalf("forget: %d, %v", n, err)
	}
	got, err := p.Get(ctx, "default", []string{"b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].ID != "b" || got[0].Body != "body b" || got[1].ID != "c" || got[1].Body != "body c" {
		t.Errorf("after forgetting a, get b and c answers %+v", got)
	}
}
