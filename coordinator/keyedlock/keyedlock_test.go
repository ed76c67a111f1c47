package keyedlock

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestOneHolderPerKey: a key's second taker waits until the first lets go,
// another key's does not, a waiter whose context ends gives up with its
// error, and no entry outlives its holders and waiters.
func TestOneHolderPerKey(t *testing.T) {
	var l Lock[string]
	ctx := context.Background()
	unlockA, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := l.Lock(ctx, "b")
	if err != nil {
		t.Fatalf("another key waited: %v", err)
	}
	unlockB()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a held key's second taker = %v, want its context's deadline", err)
	}
	got := make(chan error, 1)
	go func() {
		unlock, err := l.Lock(ctx, "a")
		if err == nil {
			unlock()
		}
		got <- err
	}()
	unlockA()
	if err := <-got; err != nil {
		t.Fatalf("the waiter after the holder let go: %v", err)
	}
	if n := l.Len(); n != 0 {
		t.Fatalf("%d keys left after every holder and waiter went", n)
	}
}
