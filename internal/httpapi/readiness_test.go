package httpapi

import (
	"context"
	"errors"
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

// TestAPanickingReadyCheckFreesTheRun: a ready check that panicked left
// its run marked under way for good, so every later probe waited for a
// run that never ended (answering, when its client gave up, the answer
// before the panic) and no check ran again.
func TestAPanickingReadyCheckFreesTheRun(t *testing.T) {
	defer func(d time.Duration) { readyCheckEvery = d }(readyCheckEvery)
	readyCheckEvery = 0
	var runs atomic.Int32
	check := ReadyCheck{Name: "session_store", Check: func(ctx context.Context) error {
		if runs.Add(1) == 1 {
			panic("the check's bug")
		}
		return errors.New("the table is missing")
	}}
	h := New(Options{ReadyChecks: []ReadyCheck{check}}).Handler()
	func() {
		defer func() { _ = recover() }() // as net/http recovers a handler's panic
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/readyz", nil))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/readyz", nil).WithContext(ctx))
	if w.Code != http.StatusServiceUnavailable || runs.Load() != 2 {
		t.Errorf("a probe after a check panicked = %d with %d runs (%v), want 503 from a second run", w.Code, runs.Load(), ctx.Err())
	}
}
