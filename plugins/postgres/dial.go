package postgres

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// silentDialTimeout bounds the dial to the address of a connection that
// went silent, until a dial there succeeds again.
const silentDialTimeout = 2 * time.Second

// closeOnTimeout makes every connection of cfg close its socket the
// moment a read or write on it times out, and fail every read and write
// after with that timeout. pgx sets a deadline on the socket only when a
// caller's context ends mid-call or while it closes a connection, and
// then closes the connection (memhost polls no notification with a
// timeout), so a timeout means the connection is done with. Left open,
// pgx waited up to 15 s for a server gone silent (a failover, a network
// cut) to end it, and its pool kept the connection's place all that
// time: with every place so kept, every call failed at its deadline
// though the server took new connections again.
//
// pgx also sends a cancel request to the address of a connection it
// closes that way, for up to 15 s, the pool keeping the place meanwhile;
// after a failover that moved the server (a DNS name naming the new
// primary) the old address answers nothing, not even a connection. So a
// dial to the address of a connection that went silent gives up after
// silentDialTimeout, until one there succeeds again.
func closeOnTimeout(cfg *pgconn.Config) {
	dial := cfg.DialFunc
	silent := &silentAddrs{}
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if silent.has(addr) {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, silentDialTimeout)
			defer cancel()
		}
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		silent.clear(addr)
		return &timeoutClosed{Conn: c, silent: silent}, nil
	}
}

// silentAddrs holds the addresses of connections that timed out, until
// a dial there succeeds again.
type silentAddrs struct {
	mu    sync.Mutex
	addrs map[string]bool
}

func (s *silentAddrs) has(addr string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addrs[addr]
}

func (s *silentAddrs) add(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.addrs == nil {
		s.addrs = map[string]bool{}
	}
	s.addrs[addr] = true
}

func (s *silentAddrs) clear(addr string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.addrs, addr)
}

// timeoutClosed is a socket closed at its first timeout.
type timeoutClosed struct {
	net.Conn
	// timedOut holds the first timeout's error once there was one.
	timedOut atomic.Pointer[error]
	// silent learns the socket's address at its first timeout.
	silent *silentAddrs
}

func (c *timeoutClosed) Read(b []byte) (int, error) {
	if err := c.timedOut.Load(); err != nil {
		return 0, *err
	}
	n, err := c.Conn.Read(b)
	return n, c.check(err)
}

func (c *timeoutClosed) Write(b []byte) (int, error) {
	if err := c.timedOut.Load(); err != nil {
		return 0, *err
	}
	n, err := c.Conn.Write(b)
	return n, c.check(err)
}

// check closes the socket when err is a timeout, and answers the first
// timeout's error for any error after it (the socket closed by a read,
// a write under way fails otherwise).
func (c *timeoutClosed) check(err error) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		if c.timedOut.CompareAndSwap(nil, &err) {
			c.Conn.Close()
			// The address pgx sends its cancel request to.
			if a := c.Conn.RemoteAddr(); a != nil && a.Network() != "unix" {
				c.silent.add(a.String())
			}
		}
	}
	if first := c.timedOut.Load(); err != nil && first != nil {
		return *first
	}
	return err
}
