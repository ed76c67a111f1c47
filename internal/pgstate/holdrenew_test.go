package pgstate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
// pooled connection that died without a word (a failover, a dropped NAT
// entry) used to wait on it until the compaction's own deadline, renewing
// nothing meanwhile, so the hold lapsed a lease later and another host
// started the same compaction while this one still ran. Each renewal has
// its tick to answer; the next goes on a fresh connection.
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
		// Not one connection: pgx holds a dead connection's place in the
		// pool while it cancels its query, up to 15 s.
		{"the default pool", 0},
		{"four connections", 4},
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
			a, b := NewCompaction(dbA), NewCompaction(dbB)
			key := compaction.Key{Realm: "r", Identity: "erin", Conversation: tc.name}
			running, cancel := context.WithTimeout(ctx, time.Minute) // the compaction's request
			defer cancel()
			_, release, err := a.Hold(running, key)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			proxy.freeze()
			// B waits three leases: a hold kept by its renewals is still A's.
			waiting, cancelWaiting := context.WithTimeout(ctx, 3*holdLease)
			defer cancelWaiting()
			if _, took, err := b.Hold(waiting, key); err == nil {
				took()
				t.Fatal("another host took the conversation while its compaction still ran: the renewals stopped on a dead connection")
			} else if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("another host's hold = %v, want it to wait for the running compaction", err)
			}
		})
	}
}
