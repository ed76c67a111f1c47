package postgres

import (
	"context"
	"errors"
	"net"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgconn"
)

// closeOnTimeout makes every connection of cfg close its socket the
// moment a read or write on it times out, and fail every read and write
// after with that timeout. pgx sets a deadline on the socket only when a
// caller's context ends mid-call or while it closes a connection, so a
// timeout means the connection is done with. Left open, pgx waited up to
// 15 s for a server gone silent (a failover, a network cut) to end it,
// and its pool kept the connection's place all that time: with every
// place so kept, every call failed at its deadline though the server took
// new connections again.
func closeOnTimeout(cfg *pgconn.Config) {
	dial := cfg.DialFunc
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &timeoutClosed{Conn: c}, nil
	}
}

// timeoutClosed is a socket closed at its first timeout.
type timeoutClosed struct {
	net.Conn
	// timedOut holds the first timeout's error once there was one.
	timedOut atomic.Pointer[error]
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
		}
	}
	if first := c.timedOut.Load(); err != nil && first != nil {
		return *first
	}
	return err
}
