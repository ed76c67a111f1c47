package postgres

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/sdk"
)

// TestProviderRecoversFromSilentConnections: after a failover or a
// network cut the pooled connections die without a word. A call on one
// gives up at its caller's deadline; pgx then kept that connection's
// place in the pool while it closed it (up to 15 s), so with every place
// so kept every recall and write failed for 15 s though the server took
// new connections again. Once each dead connection has failed one call,
// the next call must go through on a new one: after a failover at once,
// after a cut once it heals.
func TestProviderRecoversFromSilentConnections(t *testing.T) {
	const poolSize = 2
	watch, trim := schemaWatchInterval, heartbeatInterval
	t.Cleanup(func() { schemaWatchInterval, heartbeatInterval = watch, trim })
	schemaWatchInterval, heartbeatInterval = time.Hour, time.Hour // no background work takes the connections
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		name string
		call func(ctx context.Context, s *Store) error
	}{
		{"recall", func(ctx context.Context, s *Store) error {
			_, err := s.Recall(ctx, sdk.RecallQuery{Realm: "r", Query: "espresso"})
			return err
		}},
		{"remember", func(ctx context.Context, s *Store) error {
			_, err := s.Remember(ctx, "r", []sdk.Record{{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "espresso", Body: "espresso without sugar"}})
			return err
		}},
		{"manifest", func(ctx context.Context, s *Store) error {
			_, err := s.Manifest(ctx, sdk.ManifestQuery{Realm: "r", Tier: sdk.TierFull})
			return err
		}},
	}
	for _, fault := range []struct {
		name string
		// during runs the calls that meet the dead connections; it
		// answers once new connections pass.
		stage func(p *pgtest.SilentProxy, during func())
	}{
		{"failover", func(p *pgtest.SilentProxy, during func()) { p.Silence(); during() }},
		{"cut then healed", func(p *pgtest.SilentProxy, during func()) { p.Cut(); p.Silence(); during(); p.Heal() }},
	} {
		for _, tc := range calls {
			t.Run(fault.name+"/"+tc.name, func(t *testing.T) {
				proxy := pgtest.Shared(t).SilentProxy(t)
				const env = "MEMHOST_POSTGRES_SILENT_TEST_DSN"
				t.Setenv(env, proxy.DSN(cfg.Database))
				raw, _ := json.Marshal(map[string]any{"dsn_env": env, "schema": schemaFor(t, t.Name()), "pool_size": poolSize, "replica": sqlOnly})
				s := openStoreWith(t, raw)
				// Every place of the pool holds an open connection.
				conns := make([]interface{ Release() }, poolSize)
				for i := range conns {
					cn, err := s.pool.Acquire(ctx)
					if err != nil {
						t.Fatal(err)
					}
					conns[i] = cn
				}
				for _, cn := range conns {
					cn.Release()
				}
				if err := tc.call(ctx, s); err != nil {
					t.Fatalf("before the fault: %v", err)
				}
				// Each dead connection fails one call at most, at its
				// caller's deadline.
				fault.stage(proxy, func() {
					for range poolSize {
						short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
						err := tc.call(short, s)
						cancel()
						if err != nil && !strings.Contains(err.Error(), "deadline") {
							t.Fatalf("on a dead connection: %v, want the caller's deadline", err)
						}
					}
				})
				// A turn's deadline, well short of the 15 s pgx took.
				turn, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				if err := tc.call(turn, s); err != nil {
					t.Errorf("after the dead connections failed: %v, want it run on a new connection", err)
				}
			})
		}
	}
}
