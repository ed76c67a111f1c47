package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

const testModel = "test-model"

// vectorRows counts the vectors table's rows of realm.
func vectorRows(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), "SELECT count(*) FROM vectors WHERE realm = $1", realm).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestVectorsAcrossStores: a vector put on one store ranks the other
// store's recall with a query vector (its replica follows the change
// log); a batch that changes the model's length for every record it
// holds is applied by the other replica too; a superseded record's vector
// leaves the table and the other replica.
func TestVectorsAcrossStores(t *testing.T) {
	var plansB planLog
	a, b := twoStores(t, &plansB)
	ctx := context.Background()
	ids, err := a.Remember(ctx, realm, []sdk.Record{note("evening", "I usually read before bed"), note("morning", "coffee at seven")})
	if err != nil {
		t.Fatal(err)
	}
	recallB := func(v []float32) []string {
		t.Helper()
		hits, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, QueryVector: v, VectorModel: testModel})
		if err != nil {
			t.Fatal(err)
		}
		if plan := plansB.last(); plan != "replica" {
			t.Errorf("recall with a query vector answered by %q, want the replica", plan)
		}
		return hitIDs(hits)
	}
	if got := recallB([]float32{1, 0, 0}); len(got) != 0 {
		t.Errorf("before any vector, a query vector without text recalls %v", got)
	}
	if err := a.PutVectors(ctx, realm, []sdk.RecordVector{
		{ID: ids[0], Model: testModel, Vector: []float32{1, 0, 0}},
		{ID: ids[1], Model: testModel, Vector: []float32{0, 1, 0}},
	}); err != nil {
		t.Fatal(err)
	}
	if got := recallB([]float32{0.9, 0.1, 0}); len(got) != 2 || got[0] != ids[0] {
		t.Errorf("a vector near the first record's recalls %v on the other store, want %s first", got, ids[0])
	}
	if got := recallB([]float32{0.1, 0.9, 0}); len(got) != 2 || got[0] != ids[1] {
		t.Errorf("a vector near the second record's recalls %v on the other store, want %s first", got, ids[1])
	}
	// Both vectors change length in one batch: the other replica drops
	// both before putting either, or it would refuse the first.
	if err := a.PutVectors(ctx, realm, []sdk.RecordVector{
		{ID: ids[0], Model: testModel, Vector: []float32{0, 1}},
		{ID: ids[1], Model: testModel, Vector: []float32{1, 0}},
	}); err != nil {
		t.Fatal(err)
	}
	if got := recallB([]float32{0.1, 0.9}); len(got) != 2 || got[0] != ids[0] {
		t.Errorf("after both vectors changed length, a vector near the first's recalls %v, want %s first", got, ids[0])
	}
	if _, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, QueryVector: []float32{1, 0, 0}, VectorModel: testModel}); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("a query vector of the old length: %v, want ErrInvalid", err)
	}
	newID, err := a.Supersede(ctx, realm, ids[0], note("evening, corrected", "I read before sleeping"))
	if err != nil {
		t.Fatal(err)
	}
	if n := vectorRows(t, a); n != 1 {
		t.Errorf("after a supersede the table holds %d vectors, want 1 (the superseded record's is dropped)", n)
	}
	if got := recallB([]float32{0.1, 0.9}); slices.Contains(got, ids[0]) {
		t.Errorf("the superseded record %s is still recalled by its vector: %v", ids[0], got)
	}
	missing, err := b.MissingVectors(ctx, realm, testModel, "", 0)
	if err != nil || !slices.Equal(missing, []string{newID}) {
		t.Errorf("MissingVectors after a supersede: %v, %v; want only the replacement %s", missing, err, newID)
	}
	// A store opened now loads the stored vectors with the records.
	var plansC planLog
	c := openStoreWith(t, configJSON(schemaFor(t, t.Name()), "replica", replicaCfg("10s")), plansC.hook)
	waitServing(t, c)
	hits, err := c.Recall(ctx, sdk.RecallQuery{Realm: realm, QueryVector: []float32{1, 0.1}, VectorModel: testModel})
	if err != nil || len(hits) != 1 || hits[0].Record.ID != ids[1] || plansC.last() != "replica" {
		t.Errorf("a freshly loaded replica recalls %v, %v; want only %s (the one record with a vector), from the replica", hitIDs(hits), err, ids[1])
	}
}

// TestVectorsWithoutReplica: with the replica off, a recall with a query
// vector answers the lexical ranking from SQL (the vector ignored), still
// refuses a query vector the stored ones cannot be compared with, and
// answers nothing for a query vector without text.
func TestVectorsWithoutReplica(t *testing.T) {
	var plans planLog
	s := openStoreWith(t, configJSON(schemaFor(t, t.Name()), "replica", sqlOnly), plans.hook)
	ctx := context.Background()
	ids, err := s.Remember(ctx, realm, []sdk.Record{note("heron", "grey heron heron"), note("owl", "owl and a heron")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutVectors(ctx, realm, []sdk.RecordVector{
		{ID: ids[0], Model: testModel, Vector: []float32{1, 0}},
		{ID: ids[1], Model: testModel, Vector: []float32{0, 1}},
	}); err != nil {
		t.Fatal(err)
	}
	// The vector favours the owl; the lexical ranking the heron.
	hits, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "heron", QueryVector: []float32{0, 1}, VectorModel: testModel,
		Fusion: sdk.Fusion{Semantic: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if got := hitIDs(hits); !slices.Equal(got, ids) {
		t.Errorf("recall from SQL with a query vector: %v, want the lexical order %v", got, ids)
	}
	if plan := plans.last(); plan == "replica" || plan == "" {
		t.Errorf("answered by %q, want SQL", plan)
	}
	hits, err = s.Recall(ctx, sdk.RecallQuery{Realm: realm, QueryVector: []float32{0, 1}, VectorModel: testModel})
	if err != nil || len(hits) != 0 {
		t.Errorf("a query vector without text from SQL: %v, %v; want nothing", hitIDs(hits), err)
	}
	for _, q := range []sdk.RecallQuery{
		{Realm: realm, Query: "heron", QueryVector: []float32{0, 1, 0}, VectorModel: testModel},
		{Realm: realm, Query: "heron", QueryVector: []float32{0, 1}, VectorModel: "other-model"},
	} {
		if _, err := s.Recall(ctx, q); !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("recall from SQL with query vector %v by %s: %v, want ErrInvalid", q.QueryVector, q.VectorModel, err)
		}
	}
}

// TestPutVectorsLength: one model's vectors in a realm have one length.
// A batch of two lengths is refused whole; a vector of another length
// than the model's other stored vectors is refused; replacing the only
// vector, or every vector of the model in one batch, may change it.
func TestPutVectorsLength(t *testing.T) {
	s := openStoreWith(t, configJSON(schemaFor(t, t.Name()), "replica", sqlOnly))
	ctx := context.Background()
	ids, err := s.Remember(ctx, realm, []sdk.Record{note("one", "first"), note("two", "second"), note("three", "third")})
	if err != nil {
		t.Fatal(err)
	}
	vec := func(id string, v ...float32) sdk.RecordVector {
		return sdk.RecordVector{ID: id, Model: testModel, Vector: v}
	}
	steps := []struct {
		name  string
		batch []sdk.RecordVector
		ok    bool
		rows  int
	}{
		{"two lengths in a batch", []sdk.RecordVector{vec(ids[0], 1, 0), vec(ids[1], 1, 0, 0)}, false, 0},
		{"unknown id skipped", []sdk.RecordVector{vec(ids[0], 1, 0), vec("r-no-such-record", 1, 0, 0)}, true, 1},
		{"the only vector changes length", []sdk.RecordVector{vec(ids[0], 1, 0, 0)}, true, 1},
		{"a second of that length", []sdk.RecordVector{vec(ids[1], 0, 1, 0)}, true, 2},
		{"shorter than the others", []sdk.RecordVector{vec(ids[2], 1, 0)}, false, 2},
		{"longer than the others", []sdk.RecordVector{vec(ids[2], 1, 0, 0, 0)}, false, 2},
		{"one of two changes length", []sdk.RecordVector{vec(ids[0], 1, 0)}, false, 2},
		{"every vector changes length", []sdk.RecordVector{vec(ids[0], 1, 0), vec(ids[1], 0, 1), vec(ids[2], 1, 1)}, true, 3},
		{"a zero vector, called directly", []sdk.RecordVector{vec(ids[2], 0, 0)}, false, 3},
		{"a non-finite vector, called directly", []sdk.RecordVector{vec(ids[2], 1, float32(math.NaN()))}, false, 3},
		{"another model, another length", []sdk.RecordVector{{ID: ids[0], Model: "other-model", Vector: []float32{1, 2, 3, 4}}}, true, 3},
	}
	for _, st := range steps {
		err := s.PutVectors(ctx, realm, st.batch)
		if st.ok && err != nil || !st.ok && !errors.Is(err, sdk.ErrInvalid) {
			t.Errorf("%s: %v, want ok %v", st.name, err, st.ok)
		}
		if n := vectorRows(t, s); n != st.rows {
			t.Errorf("%s: %d rows, want %d", st.name, n, st.rows)
		}
	}
	// A record holds one vector: the other model's replaced the first's.
	missing, err := s.MissingVectors(ctx, realm, testModel, "", 0)
	if err != nil || !slices.Equal(missing, []string{ids[0]}) {
		t.Errorf("MissingVectors of the first model: %v, %v; want %s", missing, err, ids[0])
	}
}

// BenchmarkPutVectors measures the embedding backlog's drain through
// PutVectors: batches of 256 vectors of 100 dimensions into a realm of
// 5,000 records, with a replica following (each batch is a change it
// applies). One op is one vector; the replica has applied every batch
// when the timer stops.
func BenchmarkPutVectors(b *testing.B) {
	const records, batch, dims = 5000, 256, 100
	s := openStoreWith(b, configJSON(schemaFor(b, b.Name())))
	waitServing(b, s)
	ctx := context.Background()
	var ids []string
	for i := 0; i < records; i += batch {
		got, err := s.Remember(ctx, realm, benchRecords(i, min(batch, records-i)))
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, got...)
	}
	// As after a bulk load in production (autovacuum would analyze).
	if _, err := s.pool.Exec(ctx, "ANALYZE"); err != nil {
		b.Fatal(err)
	}
	vecs := make([]sdk.RecordVector, len(ids))
	for i, id := range ids {
		v := make([]float32, dims)
		for d := range v {
			v[d] = float32((i*31+d*7)%97) + 1
		}
		vecs[i] = sdk.RecordVector{ID: id, Model: testModel, Vector: v}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i += batch {
		from := i % len(vecs)
		to := min(from+batch, len(vecs), from+b.N-i)
		if err := s.PutVectors(ctx, realm, vecs[from:to]); err != nil {
			b.Fatal(err)
		}
	}
	if !s.replica.waitApplied(ctx, s.replica.acked.Load(), time.Now().Add(time.Minute)) {
		b.Fatal("the replica did not apply the puts within a minute")
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "vectors/s")
}

// TestPutVectorsRace: two stores giving a new model its first vectors at
// once, of two lengths, to two records: the per-realm lock makes one
// wait and see the other's, so never both are stored.
func TestPutVectorsRace(t *testing.T) {
	var plans planLog
	a, b := twoStores(t, &plans)
	ctx := context.Background()
	ids, err := a.Remember(ctx, realm, []sdk.Record{note("one", "first"), note("two", "second")})
	if err != nil {
		t.Fatal(err)
	}
	for round := range 20 {
		model := fmt.Sprintf("race-model-%d", round)
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, s := range []*Store{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v := make([]float32, 2+i)
				v[0] = 1
				errs[i] = s.PutVectors(ctx, realm, []sdk.RecordVector{{ID: ids[i], Model: model, Vector: v}})
			}()
		}
		wg.Wait()
		if errs[0] == nil && errs[1] == nil {
			t.Fatalf("round %d: vectors of two lengths stored for one model at once", round)
		}
		for _, err := range errs {
			if err != nil && !errors.Is(err, sdk.ErrInvalid) {
				t.Fatalf("round %d: %v, want ErrInvalid or success", round, err)
			}
		}
	}
}
