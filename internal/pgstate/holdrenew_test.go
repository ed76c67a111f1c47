package pgstate

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/pgtest"
)

// freezingProxy forwards TCP connections to a PostgreSQL Unix socket.
// freeze stops every connection open at that moment, both ways, leaving
// it open, as a connection cut by a failover or a NAT dropping it looks
// to the client: no error, no answer. Connections made later pass.
type freezingProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	frozen []chan struct{}
}

func newFreezingProxy(t *testing.T, socket string) *freezingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &freezingProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("unix", socket)
			if err != nil {
				client.Close()
				continue
			}
			stop := make(chan struct{})
			p.mu.Lock()
			p.frozen = append(p.frozen, stop)
			p.mu.Unlock()
			t.Cleanup(func() { client.Close(); server.Close() })
			go pipe(client, server, stop)
			go pipe(server, client, stop)
		}
	}()
	return p
}

// pipe copies from src to dst until stop closes, then reads and drops
// nothing more: what src sends waits unread.
func pipe(dst io.Writer, src io.Reader, stop chan struct{}) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-stop:
			<-make(chan struct{}) // frozen: never forwards again
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *freezingProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, stop := range p.frozen {
		close(stop)
	}
	p.frozen = nil
}

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
	proxy := newFreezingProxy(t, fmt.Sprintf("%s/.s.PGSQL.%d", cfg.Host, cfg.Port))
	viaProxy := fmt.Sprintf("host=127.0.0.1 port=%d user=%s dbname=%s sslmode=disable", proxy.ln.Addr().(*net.TCPAddr).Port, cfg.User, cfg.Database)
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
			proxy.freeze()
			// One renewal may have reached the server as the connections
			// froze; a second was sent on a connection opened after.
			renewed(renewed(until()))
		})
	}
}
