package pgstate

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/pgtest"
)

// BenchmarkUpdate measures one session store visit as a turn makes it:
// read-only (the budget read of a turn), a write to a known session (an
// injection), and the first write of a new session, in an empty realm and
// in one of 5,000 sessions (where the realm's count used to be read on
// every new session). fsync is on.
func BenchmarkUpdate(b *testing.B) {
	dsn := pgtest.SharedWith(b, pgtest.Options{Durable: true}).NewDatabase(b)
	db, err := Open(context.Background(), dsn, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	s := NewSessions(db, SessionOptions{})
	ctx := context.Background()
	known := coordinator.SessionKey{Realm: "r", Identity: "i", Session: "known"}
	inject := func(st *coordinator.SessionState) bool {
		st.InjectedBytes += 10
		st.InjectedIDs = append(st.InjectedIDs[:min(len(st.InjectedIDs), 20)], "id")
		return true
	}
	if err := s.Update(ctx, known, inject); err != nil {
		b.Fatal(err)
	}
	if _, err := db.pool.Exec(ctx, db.q(`INSERT INTO sessions (realm, identity, session, state, touched_at)
		SELECT 'big', 'u' || g, 's', '{"bytes":0,"sweep":null}', now() FROM generate_series(1, 5000) g`)); err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		name string
		key  func(i int) coordinator.SessionKey
		fn   func(*coordinator.SessionState) bool
	}{
		{"read", func(int) coordinator.SessionKey { return known }, func(*coordinator.SessionState) bool { return false }},
		{"write-known", func(int) coordinator.SessionKey { return known }, inject},
		{"write-new", func(i int) coordinator.SessionKey {
			return coordinator.SessionKey{Realm: "r", Identity: "i", Session: fmt.Sprint("new-", b.N, "-", i)}
		}, inject},
		{"write-new-in-5k", func(i int) coordinator.SessionKey {
			return coordinator.SessionKey{Realm: "big", Identity: "i", Session: fmt.Sprint("new-", b.N, "-", i)}
		}, inject},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for i := range b.N {
				t0 := time.Now()
				if err := s.Update(ctx, c.key(i), c.fn); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms/p50")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms/p99")
		})
	}
}
