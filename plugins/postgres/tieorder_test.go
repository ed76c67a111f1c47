package postgres

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
	sdkindex "github.com/memhost/memhost/sdk/index"
)

// TestSQLTiesOrderAsSDKIndex: records whose BM25 scores tie exactly in
// sdk/index (the sqlite provider's engine) — the same terms with the same
// counts in another order — come out of SQL in the same order, ties
// broken by the later write first, though PostgreSQL sums a record's
// term scores in an order of its own (an ulp apart).
func TestSQLTiesOrderAsSDKIndex(t *testing.T) {
	s := openPath(t, schemaFor(t, t.Name()), "sql", "statistics", "realm")
	ctx := context.Background()
	ref, err := sdkindex.New(sdkindex.Options{Weights: fieldWeights[:], ContextWeight: sdkindex.ContextWeight, Stats: sdkindex.StatsRealm})
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields("kestrel lantern meadow quarry sorrel tundra willow")
	rng := rand.New(rand.NewPCG(5, 9))
	var recs []sdk.Record
	for range 160 {
		var b []string
		for range 3 + rng.IntN(6) {
			b = append(b, words[rng.IntN(len(words))])
		}
		rng.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
		recs = append(recs, sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: b[0], Body: strings.Join(b, " ")})
	}
	ids, err := s.Remember(ctx, realm, recs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		r.ID = ids[i]
		if err := ref.Put(refDoc(r, uint64(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	ties := 0
	for i := range words {
		for j := i + 1; j < len(words); j++ {
			for k := j + 1; k < len(words); k++ {
				query := words[i] + " " + words[j] + " " + words[k]
				got, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: query, Limit: 200})
				if err != nil {
					t.Fatal(err)
				}
				want, err := ref.Search(sdkindex.Query{Realm: realm, Terms: sdkindex.QueryTerms(query), Limit: 200})
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != len(want) {
					t.Fatalf("%q: %d hits from SQL, %d from sdk/index", query, len(got), len(want))
				}
				at := map[string]int{}
				for n, h := range got {
					at[h.Record.ID] = n
				}
				// Records sdk/index scores exactly alike come out of SQL
				// in sdk/index's order (the later record first).
				for n := 1; n < len(want); n++ {
					if want[n].Score != want[n-1].Score {
						continue
					}
					ties++
					if a, b := at[want[n-1].ID], at[want[n].ID]; a >= b {
						t.Errorf("%q: sdk/index ties %s and %s at %.17g and answers them in that order; SQL answers them at %d and %d (%.17g, %.17g)",
							query, want[n-1].ID, want[n].ID, want[n].Score, a, b, got[a].Score, got[b].Score)
					}
				}
			}
		}
	}
	if ties == 0 {
		t.Fatal("no query ties records in sdk/index: the test checks nothing")
	}
}
