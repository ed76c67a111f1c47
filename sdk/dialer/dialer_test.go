package dialer

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// TestATimeoutClosesTheSocket: the first read past its deadline closes
// the socket (the peer reads its end) and every read and write after
// answers that timeout.
func TestATimeoutClosesTheSocket(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			peer <- c
		}
	}()
	var d net.Dialer
	c, err := CloseOnTimeout(d.DialContext)(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p := <-peer
	defer p.Close()
	c.SetReadDeadline(time.Now().Add(-time.Second))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read past its deadline = %v, want a timeout", err)
	}
	c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a write after the timeout = %v, want the timeout again", err)
	}
	p.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := p.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("the peer read %v, want the end of the closed socket", err)
	}
}

// TestASilentAddressIsDialedBriefly: once a connection to an address
// timed out, a dial there has SilentDialTimeout, until one succeeds.
func TestASilentAddressIsDialedBriefly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	addr := ln.Addr().String()
	var deadlines []time.Duration
	var d net.Dialer
	dial := CloseOnTimeout(func(ctx context.Context, network, a string) (net.Conn, error) {
		left := time.Duration(-1)
		if dl, ok := ctx.Deadline(); ok {
			left = time.Until(dl)
		}
		deadlines = append(deadlines, left)
		return d.DialContext(ctx, network, a)
	})
	c, err := dial(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(-time.Second))
	c.Read(make([]byte, 1))
	for range 2 {
		if c, err := dial(t.Context(), "tcp", addr); err != nil {
			t.Fatal(err)
		} else {
			c.Close()
		}
	}
	if len(deadlines) != 3 || deadlines[0] >= 0 || deadlines[1] <= 0 || deadlines[1] > SilentDialTimeout || deadlines[2] >= 0 {
		t.Errorf("the dials' time left %v: want none, then at most %v after the timeout, then none once a dial succeeded", deadlines, SilentDialTimeout)
	}
}
