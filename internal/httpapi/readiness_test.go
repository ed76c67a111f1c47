package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestProbesShareTheReadyChecks: GET /readyz needs no token, and each ran
// the ready checks, a query of the shared database every tenant's turns
// use: a flood of unauthenticated probes held its connections. Probes now
// share one run at a time, and its answer serves the next second's.
func TestProbesShareTheReadyChecks(t *testing.T) {
	defer func(d time.Duration) { readyCheckEvery = d }(readyCheckEvery)
	readyCheckEvery = time.Minute // no run ages out while the test runs
	var runs atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	check := ReadyCheck{Name: "session_store", Check: func(ctx context.Context) error {
		if runs.Add(1) == 1 {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}}
	srv := httptest.NewServer(New(Options{ReadyChecks: []ReadyCheck{check}}).Handler())
	t.Cleanup(srv.Close)
	probe := func() int {
		resp, err := srv.Client().Get(srv.URL + "/readyz")
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	wg.Go(func() { codes <- probe() })
	<-entered
	for range 19 {
		wg.Go(func() { codes <- probe() })
	}
	close(release)
	wg.Wait()
	close(codes)
	for code := range codes {
		if code != http.StatusOK {
			t.Errorf("a probe answered %d, want 200", code)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("20 probes ran the checks %d times, want once", n)
	}
	readyCheckEvery = 0 // the run has aged out
	if code := probe(); code != http.StatusOK || runs.Load() != 2 {
		t.Errorf("a probe after the run aged out = %d with %d runs, want 200 and a second run", code, runs.Load())
	}
}
