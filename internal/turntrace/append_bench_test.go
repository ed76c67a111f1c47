package turntrace

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/statedb"
)

// BenchmarkAppend writes what the recorder writes at 2,000 turns a second
// with its 10 ms linger: batches of 20 traces of eight injected and two
// left-out records each; ns/op is per batch, ns/trace per trace.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	db, err := statedb.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	s, err := NewSQLStore(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	const batch = 20
	traces := make([]coordinator.TurnTrace, batch)
	for i := range traces {
		t := tr("realm", fmt.Sprintf("session-%d", i), time.Now().UTC())
		t.QueryBytes, t.Bytes, t.Budget = 80, 6000, 20480
		for j := range 10 {
			rec := coordinator.TraceRecord{ID: fmt.Sprintf("01J%023d", i*10+j), Title: "user", Scope: "identity:lme42", Trust: "user", Bytes: 700, Score: 12.5 - float64(j)}
			if j < 8 {
				t.Included = append(t.Included, rec)
			} else {
				rec.Reason = "entries"
				t.Excluded = append(t.Excluded, rec)
			}
		}
		traces[i] = t
	}
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if err := s.Append(ctx, traces); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N*batch), "ns/trace")
}

// BenchmarkForget forgets one record in a realm holding the default
// 10,000 traces, of which the record is named by one: ns/op is a forget.
func BenchmarkForget(b *testing.B) {
	ctx := context.Background()
	db, err := statedb.Open(ctx, b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	s, err := NewSQLStore(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 10000 / 100 {
		batch := make([]coordinator.TurnTrace, 100)
		for j := range batch {
			n := i*100 + j
			t := tr("realm", fmt.Sprintf("session-%d", n%50), time.Now().UTC())
			for k := range 10 {
				rec := coordinator.TraceRecord{ID: fmt.Sprintf("r%d-%d", n, k), Title: "a title", Scope: "identity:alice", Bytes: 700}
				if k < 8 {
					t.Included = append(t.Included, rec)
				} else {
					rec.Reason = "entries"
					t.Excluded = append(t.Excluded, rec)
				}
			}
			batch[j] = t
		}
		if err := s.Append(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
	n := 0
	for b.Loop() {
		if err := s.Forget(ctx, "realm", []string{fmt.Sprintf("r%d-3", n%10000)}); err != nil {
			b.Fatal(err)
		}
		n++
	}
}
