package pluginhost

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// These tests drive one instance's supervision by hand, with no process
// and no waiting: each crash or failed start is one call, and the delay it
// chose is read from the instance's Status, the shape /v1/plugins shows.

const (
	testMinBackoff = 100 * time.Millisecond
	testMaxBackoff = time.Second
)

func backoffInstance(t *testing.T) *instance {
	t.Helper()
	opts := &Options{MinBackoff: testMinBackoff, MaxBackoff: testMaxBackoff}
	opts.defaults()
	// An executable that does not exist: every start attempt fails at
	// once, before any process runs.
	e := Entry{Manifest: &host.Manifest{Name: "gone"}, ManifestPath: "gone.plugin.json", Executable: filepath.Join(t.TempDir(), "gone")}
	return newInstance(Spec{Kind: sdk.KindProvider, Name: "main", Plugin: "gone"}, e, opts)
}

// waitOf answers the state and the delay before the next start attempt.
func waitOf(i *instance) (State, time.Duration) {
	st := i.status()
	return st.State, time.Duration(st.BackoffMillis) * time.Millisecond
}

// A plugin that starts but keeps crashing is restarted at once the first
// time, then after a delay that doubles with each crash up to the
// maximum; once a process stayed up over a minute, the next crash again
// restarts at once.
func TestCrashLoopBackoffSequence(t *testing.T) {
	i := backoffInstance(t)
	crash := func(upFor time.Duration) (State, time.Duration) {
		t.Helper()
		conn := new(host.Conn) // stands for a live process: retire compares identity only
		i.mu.Lock()
		i.conn, i.upSince = conn, time.Now().Add(-upFor)
		i.mu.Unlock()
		if !i.retire(conn, errExited) {
			t.Fatal("retire refused the live process")
		}
		return waitOf(i)
	}
	steps := []struct {
		upFor time.Duration
		state State
		wait  time.Duration
	}{
		{time.Second, StateRestarting, 0},
		{time.Second, StateBackoff, testMinBackoff},
		{time.Second, StateBackoff, 2 * testMinBackoff},
		{time.Second, StateBackoff, 4 * testMinBackoff},
		{time.Second, StateBackoff, 8 * testMinBackoff},
		{time.Second, StateBackoff, testMaxBackoff},
		{time.Second, StateBackoff, testMaxBackoff},
		{2 * time.Minute, StateRestarting, 0}, // it had stayed up: the count starts over
		{time.Second, StateBackoff, testMinBackoff},
	}
	for n, s := range steps {
		state, wait := crash(s.upFor)
		if state != s.state || wait != s.wait {
			t.Fatalf("crash %d (up %v): state %s, backoff %v; want %s, %v", n+1, s.upFor, state, wait, s.state, s.wait)
		}
	}
	// The process retired last is queued for the supervising goroutine to
	// kill before it starts another.
	i.mu.Lock()
	dying := len(i.dying)
	i.mu.Unlock()
	if dying != len(steps) {
		t.Fatalf("%d processes queued to be killed, want %d", dying, len(steps))
	}
}

// A plugin that fails to start waits out a delay that doubles with each
// failure up to the maximum, and the supervising goroutine sleeps exactly
// that long before the next attempt.
func TestFailedStartBackoffSequence(t *testing.T) {
	i := backoffInstance(t)
	ctx := context.Background()
	want := []time.Duration{testMinBackoff, 2 * testMinBackoff, 4 * testMinBackoff, 8 * testMinBackoff, testMaxBackoff, testMaxBackoff}
	for n, w := range want {
		next := i.step(ctx)
		state, wait := waitOf(i)
		if state != StateBackoff || wait != w || next != w {
			t.Fatalf("failed start %d: state %s, backoff %v, next step in %v; want backoff, %v", n+1, state, wait, next, w)
		}
		if st := i.status(); st.StartFailures != n+1 || st.LastError == "" {
			t.Fatalf("failed start %d: status %+v, want %d failures and the error", n+1, st, n+1)
		}
		// A step before the attempt is due starts nothing.
		if again := i.step(ctx); again <= 0 || again > w || i.status().StartFailures != n+1 {
			t.Fatalf("step during the backoff after failure %d: next in %v, %d failures; want a wait of at most %v and no attempt", n+1, again, i.status().StartFailures, w)
		}
		// Let the attempt fall due without waiting for it.
		i.mu.Lock()
		i.nextAttempt = time.Time{}
		i.mu.Unlock()
	}
	// A call meanwhile fails at once with the typed error, however long
	// its caller would wait.
	i.mu.Lock()
	i.nextAttempt = time.Now().Add(time.Hour)
	i.mu.Unlock()
	if _, _, err := i.await(ctx); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("await during the backoff: %v, want ErrUnavailable", err)
	}
}
