package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// BenchmarkRecallBesideACrowdedPlace is a recall with neighbours whose hit
// sits beside a place crowded by 20,000 records (a flood by anyone who may
// write to the scope): the neighbours' read is bounded by
// sdk.MaxPlaceReads, not by the flood.
func BenchmarkRecallBesideACrowdedPlace(b *testing.B) {
	ctx := context.Background()
	s, _ := open(b, nil)
	center := rec(sdk.RealmScope, "Turn", "the pottery class on saturday")
	center.Thread = &sdk.Thread{ID: "chat", Seq: 0}
	mustRemember(b, s, "r", center)
	const flood = 20000
	for i := 0; i < flood; i += sdk.MaxBatch {
		var batch []sdk.Record
		for j := i; j < min(flood, i+sdk.MaxBatch); j++ {
			r := rec(sdk.RealmScope, "Flood", fmt.Sprint("flood record ", j))
			r.Thread = &sdk.Thread{ID: "chat", Seq: 1}
			batch = append(batch, r)
		}
		mustRemember(b, s, "r", batch...)
	}
	q := sdk.RecallQuery{Realm: "r", Query: "pottery saturday", Limit: 1, Neighbours: 1}
	for b.Loop() {
		hits := mustRecall(b, s, q)
		if err := sdk.AttachNeighbours(ctx, s, q, hits, time.Now()); err != nil {
			b.Fatal(err)
		}
		if len(hits) != 1 || len(hits[0].Neighbours) != sdk.MaxPlaceRecords {
			b.Fatalf("hits %d, neighbours %d", len(hits), len(hits[0].Neighbours))
		}
	}
}
