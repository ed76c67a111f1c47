package postgres

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/memhost/memhost/sdk"
)

// TestARealmsFloodDoesNotQueueInFrontOfAnother: with every connection
// taken by one realm's calls and more of its calls waiting, another realm's
// call gets the next connection given up, not the flood's next call (the
// pool alone serves in arrival order). Every call admitted waits on a
// table lock, so what holds the connections is seen in pg_stat_activity
// and does not depend on timing. The store's own background work (the
// schema check, the trim) is put off past the test: queued at the gate
// in a subtest, it took the connection given up, and the count of
// waiters the subtest waits for was never reached.
func TestARealmsFloodDoesNotQueueInFrontOfAnother(t *testing.T) {
	const conns, flood = 2, 4
	watch, trim := schemaWatchInterval, heartbeatInterval
	t.Cleanup(func() { schemaWatchInterval, heartbeatInterval = watch, trim })
	schemaWatchInterval, heartbeatInterval = time.Hour, time.Hour
	schema := schemaFor(t, t.Name())
	s := openStoreWith(t, configJSON(schema, "pool_size", conns, "replica", sqlOnly))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ids := map[string]string{}
	for _, realm := range []string{"flood", "quiet"} {
		got, err := s.Remember(ctx, realm, []sdk.Record{{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "espresso", Body: "espresso without sugar"}})
		if err != nil {
			t.Fatal(err)
		}
		ids[realm] = got[0]
	}
	admin := rawPool(t, schema)
	for _, tc := range []struct {
		name  string
		quiet func() error
	}{
		{"recall", func() error {
			hits, err := s.Recall(ctx, sdk.RecallQuery{Realm: "quiet", Query: "espresso"})
			if err == nil && len(hits) != 1 {
				t.Errorf("recall answered %d hits, want 1", len(hits))
			}
			return err
		}},
		{"get", func() error {
			_, err := s.Get(ctx, "quiet", []string{ids["quiet"]})
			return err
		}},
		{"manifest", func() error {
			_, err := s.Manifest(ctx, sdk.ManifestQuery{Realm: "quiet", Tier: sdk.TierFull})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The calls end once the lock is given up, on failure too.
			var wg sync.WaitGroup
			defer wg.Wait()
			lock, err := admin.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Rollback(ctx)
			if _, err := lock.Exec(ctx, "LOCK TABLE records IN ACCESS EXCLUSIVE MODE"); err != nil {
				t.Fatal(err)
			}
			call := func(ctx context.Context, fn func(context.Context) error) {
				wg.Add(1)
				go func() { defer wg.Done(); fn(ctx) }()
			}
			export := func(ctx context.Context) error { _, err := s.Export(ctx, "flood", "", 10); return err }
			// The flood holds the connections (blocked on the lock) and
			// more of it waits; then the quiet realm's call comes.
			first, cancelFirst := context.WithCancel(ctx)
			defer cancelFirst()
			call(first, export)
			waitQueued(ctx, t, s, 0, 1)
			for range conns - 1 + flood {
				call(ctx, export)
			}
			waitQueued(ctx, t, s, flood, conns)
			call(ctx, func(context.Context) error {
				if err := tc.quiet(); err != nil {
					t.Errorf("%s: %v", tc.name, err)
				}
				return nil
			})
			waitQueued(ctx, t, s, flood+1, conns)
			before := waitBlocked(ctx, t, admin, conns, nil)
			// The first of the flood gives its connection up: the next
			// in takes it and blocks on the lock too.
			cancelFirst()
			after := waitBlocked(ctx, t, admin, conns, before)
			var quiet bool
			for k, query := range after {
				if _, ok := before[k]; !ok {
					quiet = !strings.Contains(query, `COLLATE "C" > $2`) // not the flood's export
				}
			}
			if !quiet {
				t.Errorf("a connection given up went to the flood's next call, not the quiet realm's %s waiting behind it", tc.name)
			}
			if err := lock.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// waitBlocked waits, within ctx, until n statements of the provider wait
// on a lock, one of them not among before when given, and answers their
// queries by backend and start.
func waitBlocked(ctx context.Context, t *testing.T, admin *pgxpool.Pool, n int, before map[string]string) map[string]string {
	t.Helper()
	for ; ; pause(ctx, t, "statements never blocked") {
		got := map[string]string{}
		rows, err := admin.Query(ctx, `SELECT pid::text || ' ' || query_start::text, query FROM pg_stat_activity
			WHERE application_name = 'memhost-postgres' AND wait_event_type = 'Lock'`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var k, q string
			if err := rows.Scan(&k, &q); err != nil {
				t.Fatal(err)
			}
			got[k] = q
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		fresh := 0
		for k := range got {
			if _, ok := before[k]; !ok {
				fresh++
			}
		}
		if len(got) == n && (before == nil || fresh == 1) {
			return got
		}
	}
}

// waitQueued waits, within ctx, until n calls wait for a connection of s
// and held hold one.
func waitQueued(ctx context.Context, t *testing.T, s *Store, n, held int) {
	t.Helper()
	for s.pool.slots.Waiting() != n || s.pool.Stat().AcquiredConns() != int32(held) {
		pause(ctx, t, "calls never queued")
	}
}

// pause waits a millisecond between two looks, failing t with what was
// awaited when ctx ends first.
func pause(ctx context.Context, t *testing.T, awaited string) {
	t.Helper()
	select {
	case <-time.After(time.Millisecond):
	case <-ctx.Done():
		t.Fatal(awaited)
	}
}
