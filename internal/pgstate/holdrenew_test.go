package pgstate

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/pgtest"
)

// A compaction's hold is renewed while it runs. A renewal sent on a
// connection that died without a word (a failover, a dropped NAT entry)
// used to wait on it until the compaction's own deadline, renewing nothing
// meanwhile, so the hold lapsed a lease later and another host started
// the same compaction while this one still ran. Each renewal has its tick
// to answer, and renewals go on a connection of their own: the pool's
// places may all be kept by dead connections, which pgx keeps while it
// closes them (up to 15 s), so renewals on the pool could not run at all.
// Here the test takes every place of the pool (connections it then
// freezes) for the rest of the compaction, and the renewals' own
// connection is frozen too: the hold's row must still be renewed.
func TestCompactionHoldOutlivesADeadConnection(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Shared(t)
	dsn := c.NewDatabase(t)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := c.SilentProxy(t)
	viaProxy := proxy.DSN(cfg.Database)
	holdLease = 2 * time.Second
	t.Cleanup(func() { holdLease = 5 * time.Second })
	for _, tc := range []struct {
		name     string
		poolSize int
	}{
		{"the default pool", 0},
		{"four connections", 4},
		{"one connection", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dbA, err := Open(ctx, viaProxy, Options{PoolSize: tc.poolSize})
			if err != nil {
				t.Fatal(err)
			}
			defer dbA.Close()
			dbB, err := Open(ctx, dsn, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer dbB.Close()
			a := NewCompaction(dbA)
			key := compaction.Key{Realm: "r", Identity: "erin", Conversation: tc.name}
			running, cancel := context.WithTimeout(ctx, 20*time.Second) // the compaction's request
			defer cancel()
			held, release, err := a.Hold(running, key)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			// until answers the hold's until_ms, read by another host,
			// and fails the test if the hold is no longer A's.
			var holder string
			until := func() int64 {
				t.Helper()
				var ms int64
				var h string
				if err := dbB.pool.QueryRow(ctx, dbB.q(`SELECT holder, until_ms FROM compaction_holds WHERE realm = $1 AND identity = $2 AND conversation = $3`),
					key.Realm, key.Identity, key.Conversation).Scan(&h, &ms); err != nil {
					t.Fatal(err)
				}
				if holder == "" {
					holder = h
				} else if h != holder {
					t.Fatal("another host took the conversation while its compaction still ran")
				}
				return ms
			}
			// renewed waits for a renewal past since and answers the new
			// until_ms; a renewal that cannot run fails the test when the
			// compaction's request ends.
			renewed := func(since int64) int64 {
				t.Helper()
				for {
					if ms := until(); ms > since {
						return ms
					}
					select {
					case <-held.Done():
						t.Fatalf("the hold was not renewed: %v", context.Cause(held))
					case <-time.After(holdPoll):
					}
				}
			}
			// A renewal before the freeze: its connection is open then.
			renewed(until())
			// Every place of the pool kept by a connection that dies.
			conns := make([]*pgxpool.Conn, dbA.pool.Config().MaxConns)
			for i := range conns {
				if conns[i], err = dbA.pool.Acquire(ctx); err != nil {
					t.Fatal(err)
				}
			}
			defer func() {
				for _, cn := range conns {
					cn.Hijack().PgConn().Conn().Close()
				}
			}()
			proxy.Silence()
			// One renewal may have reached the server as the connections
			// froze; a second was sent on a connection opened after.
			renewed(renewed(until()))
		})
	}
}
