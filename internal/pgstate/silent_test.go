package pgstate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/sdk"
)

// TestStateRecoversFromSilentConnections: after a failover or a network
// cut the pooled connections die without a word. A call on one gives up
// at its caller's deadline; pgx then kept that connection's place in the
// pool while it closed it (up to 15 s), so with every place so kept every
// state call of the host (turns' session visits, traces, compactions,
// the console) failed for 15 s though the server took new connections
// again. Once each dead connection has failed one call, the next call
// must go through on a new one: after a failover at once, after a cut
// once it heals.
func TestStateRecoversFromSilentConnections(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Shared(t)
	const poolSize = 2
	key := coordinator.SessionKey{Realm: "r", Identity: "i", Session: "s"}
	ckey := compaction.Key{Realm: "r", Identity: "i", Conversation: "c"}
	calls := []struct {
		name string
		call func(ctx context.Context, db *DB) error
	}{
		{"session visit", func(ctx context.Context, db *DB) error {
			return NewSessions(db, SessionOptions{}).Update(ctx, key, func(st *coordinator.SessionState) bool { st.InjectedBytes++; return true })
		}},
		{"compaction load", func(ctx context.Context, db *DB) error { _, _, err := NewCompaction(db).Load(ctx, ckey); return err }},
		{"trace append", func(ctx context.Context, db *DB) error {
			return NewTraces(db).Append(ctx, []coordinator.TurnTrace{{Realm: "r", Identity: "i", Session: "s", At: time.Now()}})
		}},
		{"proposal list", func(ctx context.Context, db *DB) error {
			_, _, err := NewProposals(db).List(ctx, "r", proposal.Cursor{}, 10)
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
				dsn := c.NewDatabase(t)
				cfg, err := pgx.ParseConfig(dsn)
				if err != nil {
					t.Fatal(err)
				}
				proxy := c.SilentProxy(t)
				db, err := Open(ctx, proxy.DSN(cfg.Database), Options{PoolSize: poolSize})
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				// Every place of the pool holds an open connection.
				for range 2 {
					conns := make([]interface{ Release() }, poolSize)
					for i := range conns {
						cn, err := db.pool.Acquire(ctx)
						if err != nil {
							t.Fatal(err)
						}
						conns[i] = cn
					}
					for _, cn := range conns {
						cn.Release()
					}
				}
				if err := tc.call(ctx, db); err != nil {
					t.Fatalf("before the fault: %v", err)
				}
				// Each dead connection fails one call at most, at its
				// caller's deadline.
				fault.stage(proxy, func() {
					for range poolSize {
						short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
						err := tc.call(short, db)
						cancel()
						if err != nil && !errors.Is(err, sdk.ErrDeadline) {
							t.Fatalf("on a dead connection: %v, want the caller's deadline", err)
						}
					}
				})
				// A turn's deadline, well short of the 15 s pgx took.
				turn, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				if err := tc.call(turn, db); err != nil {
					t.Errorf("after the dead connections failed: %v, want it run on a new connection", err)
				}
			})
		}
	}
}
