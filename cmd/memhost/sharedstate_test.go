package main

import (
	"context"
	"errors"
	"testing"
	"time"
)

// runExpiry keeps calling expire, reports each failure, and returns once
// its context ends.
func TestRunExpiryReportsFailuresAndStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	expire := func(context.Context) (int, error) {
		calls++
		if calls == 3 {
			cancel()
		}
		if calls%2 == 1 {
			return 0, errors.New("disk full")
		}
		return 1, nil
	}
	var reported []error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runExpiry(ctx, expire, time.Millisecond, func(err error) { reported = append(reported, err) })
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("runExpiry did not return after its context ended")
	}
	// The third call ended the context, so neither its failure nor any
	// later one is reported: shutting down is not an expiry failure.
	if calls < 3 || len(reported) != 1 {
		t.Fatalf("%d calls, %d reported failures (%v); want 3 or more and 1", calls, len(reported), reported)
	}
}

// An expiry pass over a hung store ends at its deadline, reported as a
// deadline error, and the loop goes on.
func TestRunExpiryPassOverAHungStoreEndsAtItsDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	expire := func(ctx context.Context) (int, error) {
		calls++
		if calls == 3 {
			cancel()
			return 0, nil
		}
		if _, ok := ctx.Deadline(); !ok {
			return 0, errors.New("an expiry pass without a deadline")
		}
		<-ctx.Done() // the store hangs
		return 0, ctx.Err()
	}
	var reported []error
	runExpiry(ctx, expire, time.Millisecond, func(err error) { reported = append(reported, err) })
	if len(reported) != 2 || !errors.Is(reported[0], context.DeadlineExceeded) || !errors.Is(reported[1], context.DeadlineExceeded) {
		t.Fatalf("reported %v; want two deadline errors, one per hung pass", reported)
	}
}
