// Package dialer ends a store's network connection at its first timeout.
//
// A database client sets a deadline on its socket when its caller's
// context ends mid-call, and then closes the connection; pgx, for one,
// first waits up to 15 s for the server to end it and sends a cancel
// request to the server's address, its pool keeping the connection's
// place all that time. After a failover or a network cut the server
// answers nothing, so with every place so kept every call fails at its
// deadline though the server takes new connections again.
// CloseOnTimeout closes the socket at once instead, and bounds dials to
// an address that went silent, so the place frees and the next call
// dials anew.
package dialer

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Func dials a connection, as net.Dialer.DialContext does (and pgconn's
// DialFunc).
type Func = func(ctx context.Context, network, addr string) (net.Conn, error)

// SilentDialTimeout bounds a dial to the address of a connection that
// timed out, until a dial there succeeds again: the address of a primary
// a failover moved away from answers nothing, not even a connection.
const SilentDialTimeout = 2 * time.Second

// CloseOnTimeout answers dial, its connections closing their socket the
// moment a read or write on them times out and failing every read and
// write after with that timeout. It suits a client that sets socket
// deadlines only to end a connection it is done with; one that polls
// with a deadline and reads on after it must not use it.
func CloseOnTimeout(dial Func) Func {
	silent := &silentAddrs{}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if silent.has(addr) {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, SilentDialTimeout)
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
			// The address a client sends its cancel request to.
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
