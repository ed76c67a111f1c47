package bleve

import (
	"fmt"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// BenchmarkRecallBesideACrowdedPlace is a recall with neighbours whose hit
// sits beside a place crowded by 20,000 records (a flood by anyone who may
// write to the scope): the neighbours' read is bounded by
// sdk.MaxPlaceReads records, not by the flood.
func BenchmarkRecallBesideACrowdedPlace(b *testing.B) {
	p := newProvider(b, b.TempDir())
	center := rec("realm", "Turn", "the pottery class on saturday")
	center.Thread = &sdk.Thread{ID: "chat", Seq: 0}
	remember(b, p, realm, center)
	const flood = 20000
	for i := 0; i < flood; i += sdk.MaxBatch {
		var batch []sdk.Record
		for j := i; j < min(flood, i+sdk.MaxBatch); j++ {
			r := rec("realm", "Flood", fmt.Sprint("flood record ", j))
			r.Thread = &sdk.Thread{ID: "chat", Seq: 1}
			batch = append(batch, r)
		}
		remember(b, p, realm, batch...)
	}
	q := sdk.RecallQuery{Realm: realm, Query: "pottery saturday", Limit: 1, Neighbours: 1}
	for b.Loop() {
		hits, err := p.Recall(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		if err := sdk.AttachNeighbours(ctx, p, q, hits, time.Now()); err != nil {
			b.Fatal(err)
		}
		if len(hits) != 1 || len(hits[0].Neighbours) != sdk.MaxPlaceRecords {
			b.Fatalf("hits %d, neighbours %d", len(hits), len(hits[0].Neighbours))
		}
	}
}
