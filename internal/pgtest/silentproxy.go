package pgtest

import (
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
)

// SilentProxy forwards loopback TCP connections to a cluster's socket and
// can stop forwarding without a word, as a failover or a network cut
// looks to a client: its sockets stay open, nothing is answered, nothing
// is reset.
type SilentProxy struct {
	ln     net.Listener
	socket string

	mu sync.Mutex
	// open holds the stop channel of each connection forwarding now.
	open []chan struct{}
	// cut stalls connections made while it is set until Heal.
	cut chan struct{}
}

// SilentProxy starts a proxy in front of c for tb, closed when tb ends.
func (c *Cluster) SilentProxy(tb testing.TB) *SilentProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &SilentProxy{ln: ln, socket: fmt.Sprintf("%s/.s.PGSQL.%d", c.socket, c.port)}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	tb.Cleanup(func() {
		ln.Close()
		p.Heal()
		mu.Lock()
		for _, cn := range conns {
			cn.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("unix", p.socket)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()
			stop := make(chan struct{})
			p.mu.Lock()
			cut := p.cut
			p.open = append(p.open, stop)
			p.mu.Unlock()
			wg.Add(2)
			go func() { defer wg.Done(); pipe(server, client, cut, stop) }()
			go func() { defer wg.Done(); pipe(client, server, cut, stop) }()
		}
	}()
	return p
}

// pipe copies src to dst. While cut is open (nil: never) it forwards
// nothing yet; once stop closes it forwards nothing more, and what src
// sends is read and dropped, so the peer's writes never block.
func pipe(dst io.WriteCloser, src io.ReadCloser, cut, stop chan struct{}) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if cut != nil {
			select {
			case <-cut:
			case <-stop:
			}
		}
		select {
		case <-stop:
			n = 0
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

// Port answers the proxy's loopback port.
func (p *SilentProxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// DSN answers a connection string for database db through the proxy.
func (p *SilentProxy) DSN(db string) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d user=postgres dbname=%s sslmode=disable", p.Port(), db)
}

// Silence stops every connection open now for good, as a failover does:
// they stay open and answer nothing. Connections made later pass, unless
// the proxy is cut.
func (p *SilentProxy) Silence() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, stop := range p.open {
		close(stop)
	}
	p.open = nil
}

// Cut also holds connections made from now on, unanswered, until Heal.
func (p *SilentProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut == nil {
		p.cut = make(chan struct{})
	}
}

// Heal lets connections made since Cut pass.
func (p *SilentProxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut != nil {
		close(p.cut)
		p.cut = nil
	}
}
