package pgstate

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/sdk/dialer"
)

// TestStateRecoversWhenTheServerMoves: a failover that moves the primary
// to another address (a DNS name now naming the new one) leaves the old
// address answering nothing, not even a connection. pgx closes a
// connection whose call timed out by first sending a cancel request to
// the address it was connected to, for up to 15 s, and the pool keeps the
// connection's place until then: every state call failed for 15 s
// though the new primary took connections. A dial to the address of a
// connection that went silent is bounded short, so the places come free
// at once and the next call runs on a new connection.
func TestStateRecoversWhenTheServerMoves(t *testing.T) {
	ctx := context.Background()
	c := pgtest.Shared(t)
	cfg, err := pgx.ParseConfig(c.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	const poolSize = 2
	oldP, newP := c.SilentProxy(t), c.SilentProxy(t)
	oldAddr := fmt.Sprintf("127.0.0.1:%d", oldP.Port())
	var moved atomic.Bool
	pc, err := pgxpool.ParseConfig(fmt.Sprintf("host=primary.test port=5432 user=postgres dbname=%s sslmode=disable connect_timeout=10", cfg.Database))
	if err != nil {
		t.Fatal(err)
	}
	pc.MaxConns = poolSize
	pc.ConnConfig.LookupFunc = func(ctx context.Context, host string) ([]string, error) {
		if moved.Load() {
			return []string{fmt.Sprintf("127.0.0.1:%d", newP.Port())}, nil
		}
		return []string{oldAddr}, nil
	}
	var d net.Dialer
	pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if moved.Load() && addr == oldAddr {
			<-ctx.Done() // the old primary answers no connection
			return nil, ctx.Err()
		}
		return d.DialContext(ctx, network, addr)
	}
	pc.ConnConfig.DialFunc = dialer.CloseOnTimeout(pc.ConnConfig.DialFunc)
	db, err := openPool(ctx, pc, "memhost")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	call := func(ctx context.Context) error {
		_, err := NewTraces(db).Recent(ctx, "r", nil, 10)
		return err
	}
	// Every place of the pool holds an open connection.
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
	if err := call(ctx); err != nil {
		t.Fatalf("before the failover: %v", err)
	}
	oldP.Silence()
	moved.Store(true)
	// Each dead connection fails one call at most, at its caller's deadline.
	for range poolSize {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		_ = call(short)
		cancel()
	}
	// A turn's deadline, well short of the 15 s pgx took.
	turn, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := call(turn); err != nil {
		t.Errorf("after the dead connections failed: %v, want it run on a new connection", err)
	}
}
