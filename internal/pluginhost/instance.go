package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// errBackingOff marks a call refused because a crashed plugin is waiting
// out its restart backoff; it wraps sdk.ErrUnavailable for callers.
var errBackingOff = fmt.Errorf("waiting to restart: %w", sdk.ErrUnavailable)

// errRestarting marks a call that found a restart under way and did not wait.
var errRestarting = fmt.Errorf("restart under way: %w", sdk.ErrUnavailable)

// instance is one supervised plugin process and its kind client.
type instance struct {
	spec  Spec
	entry Entry
	opts  *Options

	mu          sync.Mutex
	conn        *host.Conn
	client      any // the kind's host-side client
	info        sdk.Info
	restarting  chan struct{}
	closed      bool
	restarts    int
	lastErr     error
	backoff     time.Duration
	crashes     int // crashes since the process last stayed up a minute
	nextAttempt time.Time
	upSince     time.Time
}

// launch starts, verifies and configures a fresh process.
func (i *instance) launch(ctx context.Context) error {
	startCtx, cancel := context.WithTimeout(ctx, i.opts.StartTimeout)
	defer cancel()
	opts := i.opts.StartOptions
	opts.Instance = i.spec.Name // the plugin's log lines carry the instance name
	conn, err := Start(startCtx, i.entry, opts)
	if err != nil {
		return fmt.Errorf("%s %q: %w", i.spec.Kind, i.spec.Name, err)
	}
	// Configure opens the plugin's store, which may load a large index
	// (a 50k-file markdown root takes seconds), so it has its own bound.
	configCtx, cancelConfig := context.WithTimeout(ctx, i.opts.ConfigureTimeout)
	defer cancelConfig()
	if err := conn.Configure(configCtx, i.spec.Config); err != nil {
		conn.Close()
		return fmt.Errorf("%s %q: %w", i.spec.Kind, i.spec.Name, err)
	}
	client, err := conn.Dispense(i.spec.Kind)
	if err != nil {
		conn.Close()
		return fmt.Errorf("%s %q: %w", i.spec.Kind, i.spec.Name, err)
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.closed {
		conn.Close()
		return fmt.Errorf("%s %q: host is shutting down: %w", i.spec.Kind, i.spec.Name, sdk.ErrUnavailable)
	}
	i.conn, i.client, i.info, i.lastErr, i.upSince = conn, client, conn.Info(), nil, time.Now()
	return nil
}

// current answers the live client, restarting a dead plugin first when
// its backoff allows. With wait, a call that finds a restart under way
// waits for it (bounded by ctx); otherwise it returns at once.
func (i *instance) current(ctx context.Context, wait bool) (any, *host.Conn, error) {
	for {
		i.mu.Lock()
		switch {
		case i.closed:
			i.mu.Unlock()
			return nil, nil, fmt.Errorf("plugin %s (%s) is shut down: %w", i.spec.Name, i.spec.Plugin, sdk.ErrUnavailable)
		case i.conn != nil:
			c, conn := i.client, i.conn
			i.mu.Unlock()
			return c, conn, nil
		case i.restarting != nil:
			ch := i.restarting
			i.mu.Unlock()
			if !wait {
				return nil, nil, fmt.Errorf("plugin %s (%s): %w", i.spec.Name, i.spec.Plugin, errRestarting)
			}
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, nil, fmt.Errorf("plugin %s (%s) is restarting: %w", i.spec.Name, i.spec.Plugin, sdk.ErrDeadline)
			}
		case time.Now().Before(i.nextAttempt):
			last := i.lastErr
			i.mu.Unlock()
			return nil, nil, fmt.Errorf("plugin %s (%s) crashed (%v), %w", i.spec.Name, i.spec.Plugin, last, errBackingOff)
		}
		ch := make(chan struct{})
		i.restarting = ch
		i.mu.Unlock()

		err := i.launch(context.Background())

		i.mu.Lock()
		i.restarting = nil
		close(ch)
		if err != nil {
			i.lastErr = err
			i.nextAttempt = time.Now().Add(i.backoff)
			i.backoff = min(i.backoff*2, i.opts.MaxBackoff)
			i.mu.Unlock()
			i.opts.Logger.Error("plugin restart failed", "instance", i.spec.Name, "plugin", i.spec.Plugin, "retry_in", i.backoff, "error", err)
			return nil, nil, fmt.Errorf("plugin %s (%s): restart failed: %v: %w", i.spec.Name, i.spec.Plugin, err, sdk.ErrUnavailable)
		}
		i.restarts++
		i.mu.Unlock()
		i.opts.Logger.Warn("plugin restarted", "instance", i.spec.Name, "plugin", i.spec.Plugin, "restarts", i.restarts)
	}
}

// broken retires conn if it is still the live one and is really dead (its
// process exited or it no longer answers a ping). It reports whether conn
// is out of service, so the caller may retry on a fresh process.
func (i *instance) broken(conn *host.Conn) bool {
	dead := conn.Exited() || pingWithin(conn, i.opts.CallTimeout) != nil
	if !dead {
		return false
	}
	i.mu.Lock()
	if i.conn == conn {
		i.conn, i.client = nil, nil
		i.lastErr = errors.New("process exited or stopped answering")
		// The first crash restarts at once; a plugin that keeps crashing
		// waits out a growing backoff until it stays up a minute.
		if time.Since(i.upSince) > time.Minute {
			i.crashes, i.backoff = 0, i.opts.MinBackoff
		}
		if i.crashes == 0 {
			i.nextAttempt = time.Time{}
		} else {
			i.nextAttempt = time.Now().Add(i.backoff)
			i.backoff = min(i.backoff*2, i.opts.MaxBackoff)
		}
		i.crashes++
	}
	i.mu.Unlock()
	conn.Close()
	i.opts.Logger.Warn("plugin is down", "instance", i.spec.Name, "plugin", i.spec.Plugin)
	return true
}

// check is the health probe: it retires a dead or hung process.
func (i *instance) check() {
	i.mu.Lock()
	conn := i.conn
	i.mu.Unlock()
	if conn != nil {
		i.broken(conn)
	}
}

// pingWithin pings with a bound: go-plugin's Ping has no deadline, and a
// stopped process would otherwise hang the health loop.
func pingWithin(conn *host.Conn, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- conn.Ping() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("ping: no answer within %s: %w", d, sdk.ErrDeadline)
	}
}

func (i *instance) shutdown() {
	i.mu.Lock()
	i.closed = true
	conn := i.conn
	i.conn, i.client = nil, nil
	i.mu.Unlock()
	if conn != nil {
		conn.Close()
	}
}

// capabilities answers what the plugin declared in its Info; it is read on
// every request, so it does not build a whole Status.
func (i *instance) capabilities() sdk.Capabilities {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.info.Capabilities
}

func (i *instance) status() Status {
	i.mu.Lock()
	defer i.mu.Unlock()
	st := Status{
		Instance: i.spec.Name, Kind: i.spec.Kind, Plugin: i.spec.Plugin, Version: i.entry.Manifest.Version,
		Kinds: i.entry.Manifest.Kinds, Protocols: i.entry.Manifest.Protocols, Capabilities: i.info.Capabilities,
		Healthy: i.conn != nil && !i.conn.Exited(), Restarts: i.restarts,
	}
	if i.conn != nil {
		st.Pid = i.conn.Pid()
	}
	if i.lastErr != nil {
		st.LastError = i.lastErr.Error()
	}
	return st
}

// call runs f against the live client of kind C under a deadline. When the
// plugin turns out to be dead, a read is retried once on the restarted
// process; a write is not (the caller decides whether to retry it).
func call[C any, T any](ctx context.Context, i *instance, read bool, f func(context.Context, C) (T, error)) (T, error) {
	var zero T
	ctx, cancel := withDeadline(ctx, i.opts.CallTimeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		raw, conn, err := i.current(ctx, true)
		if err != nil {
			return zero, err
		}
		v, err := f(ctx, raw.(C))
		if err == nil || !errors.Is(err, sdk.ErrUnavailable) {
			return v, err
		}
		if !i.broken(conn) || !read || attempt > 0 {
			return zero, fmt.Errorf("plugin %s (%s): %w", i.spec.Name, i.spec.Plugin, err)
		}
	}
}

func withDeadline(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
