package httpapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/memhost/memhost/internal/redact"
	"github.com/memhost/memhost/sdk"
)

// readyCheckTimeout bounds each ReadyCheck.
const readyCheckTimeout = 2 * time.Second

// readyCheckEvery is how long one run of the ReadyChecks answers the
// probes that follow it.
var readyCheckEvery = time.Second

// readiness shares the ReadyChecks' runs among GET /readyz requests: one
// run at a time, its answer reused for readyCheckEvery. Probes carry no
// token, so without it any number of unauthenticated requests would each
// hold a connection of the shared database every tenant's turns use.
type readiness struct {
	mu      sync.Mutex
	at      time.Time // when the last run ended
	failed  []map[string]string
	running chan struct{} // closed when the run under way ends; nil when none
}

// readyFailures answers the checks that failed in the latest run, running
// them when the last run is older than readyCheckEvery, or waiting
// (within ctx) for the run under way. A caller that stops waiting gets
// the run before.
func (s *Server) readyFailures(ctx context.Context) []map[string]string {
	rd := &s.readiness
	rd.mu.Lock()
	if !rd.at.IsZero() && time.Since(rd.at) < readyCheckEvery {
		defer rd.mu.Unlock()
		return rd.failed
	}
	if ch := rd.running; ch != nil {
		rd.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		rd.mu.Lock()
		defer rd.mu.Unlock()
		return rd.failed
	}
	ch := make(chan struct{})
	rd.running = ch
	rd.mu.Unlock()
	var failed []map[string]string
	ran := false
	// Deferred, so a check that panics ends the run as well: else every
	// later probe would wait for it, and no check run again.
	defer func() {
		rd.mu.Lock()
		if ran {
			rd.failed, rd.at = failed, time.Now()
		}
		rd.running = nil
		rd.mu.Unlock()
		close(ch)
	}()
	// Not the probe's own context: its run serves the probes waiting on
	// it, and one that goes away must not fail theirs.
	failed, ran = s.runReadyChecks(context.WithoutCancel(ctx)), true
	return failed
}

// runReadyChecks runs every ReadyCheck, each within readyCheckTimeout, and
// answers those that failed (see ReadyCheck: an outage is no failure).
func (s *Server) runReadyChecks(ctx context.Context) []map[string]string {
	var failed []map[string]string
	for _, c := range s.opts.ReadyChecks {
		ctx, cancel := context.WithTimeout(ctx, readyCheckTimeout)
		err := c.Check(ctx)
		cancel()
		if err != nil && !errors.Is(err, sdk.ErrUnavailable) && !errors.Is(err, sdk.ErrDeadline) {
			msg, _ := redact.Message(err.Error())
			failed = append(failed, map[string]string{"name": c.Name, "error": msg})
		}
	}
	return failed
}
