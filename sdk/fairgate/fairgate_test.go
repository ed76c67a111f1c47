package fairgate

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"time"
)

// TestTheKeyHoldingLeastGoesFirst: from an outside review. A store's read
// connections were handed out in arrival order, so a realm flooding
// listings put every read of another realm sharing the store behind its
// queue (77 of 100 recalls missed the host's 500 ms deadline), and a
// token's flood of 4 MiB bodies put another realm's turn behind all of
// them (29.5 s, then 503). The next in is the first waiter of the key
// holding the least, in arrival order within a key; a waiter that does
// not fit is passed by none.
func TestTheKeyHoldingLeastGoesFirst(t *testing.T) {
	type req struct {
		key string
		n   int64
	}
	cases := []struct {
		name     string
		capacity int64
		holders  []req // let in first, in order
		free     int   // the holder that ends first
		waiters  []req // in arrival order
		want     []string
	}{
		{"a quiet key passes a flood", 2, []req{{"flood", 1}, {"flood", 1}}, 0,
			[]req{{"flood", 1}, {"flood", 1}, {"flood", 1}, {"quiet", 1}}, []string{"quiet", "flood", "flood", "flood"}},
		{"the key holding less goes first", 2, []req{{"a", 1}, {"b", 1}}, 0,
			[]req{{"b", 1}, {"b", 1}, {"a", 1}}, []string{"a", "b", "b"}},
		// At a capacity of one every key holds nothing when the slot
		// frees: the key let in least recently goes first.
		{"a quiet key passes a flood at capacity one", 1, []req{{"flood", 1}}, 0,
			[]req{{"flood", 1}, {"flood", 1}, {"quiet", 1}}, []string{"quiet", "flood", "flood"}},
		{"equal keys take turns", 1, []req{{"a", 1}}, 0,
			[]req{{"a", 1}, {"a", 1}, {"b", 1}, {"b", 1}}, []string{"b", "a", "b", "a"}},
		{"one key in arrival order", 2, []req{{"a", 1}, {"a", 1}}, 0,
			[]req{{"a", 1}, {"a", 1}, {"a", 1}}, []string{"a", "a", "a"}},
		// big holds one request to small's two, but more weight.
		{"by weight held, not by count", 7, []req{{"big", 4}, {"small", 1}, {"small", 1}, {"small", 1}}, 1,
			[]req{{"big", 1}, {"small", 1}}, []string{"small", "big"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New(c.capacity)
			ctx := context.Background()
			for _, h := range c.holders {
				if err := g.Acquire(ctx, h.key, h.n); err != nil {
					t.Fatal(err)
				}
			}
			got := make(chan int, len(c.waiters))
			for i, w := range c.waiters {
				go func() {
					if err := g.Acquire(ctx, w.key, w.n); err != nil {
						t.Error(err)
						return
					}
					got <- i
				}()
				// Each waits before the next arrives: arrival order is known.
				for g.Waiting() < i+1 {
					runtime.Gosched()
				}
			}
			// A holder ends; then each waiter let in ends in turn.
			g.Release(c.holders[c.free].key, c.holders[c.free].n)
			var order []string
			for range c.waiters {
				i := <-got
				order = append(order, c.waiters[i].key)
				g.Release(c.waiters[i].key, c.waiters[i].n)
			}
			if !slices.Equal(order, c.want) {
				t.Fatalf("let in %v, want %v", order, c.want)
			}
		})
	}
}

// TestAWaiterThatGivesUpLetsOthersIn: a waiter whose context ends leaves
// the queue, and those it blocked go in; its cause is its answer.
func TestAWaiterThatGivesUpLetsOthersIn(t *testing.T) {
	g := New(4)
	if err := g.Acquire(context.Background(), "a", 2); err != nil {
		t.Fatal(err)
	}
	cause := errors.New("the request ended")
	ctx, cancel := context.WithCancelCause(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- g.Acquire(ctx, "b", 4) }()
	for g.Waiting() < 1 {
		runtime.Gosched()
	}
	behind := make(chan error, 1)
	go func() { behind <- g.Acquire(context.Background(), "c", 1) }()
	for g.Waiting() < 2 {
		runtime.Gosched()
	}
	cancel(cause)
	if err := <-gaveUp; !errors.Is(err, cause) {
		t.Fatalf("the waiter that gave up answered %v, want its cause", err)
	}
	select {
	case err := <-behind:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the waiter behind one that gave up was not let in")
	}
	if g.TryAcquire("d", 2) {
		t.Fatal("more was let in than the capacity holds")
	}
	if !g.TryAcquire("d", 1) {
		t.Fatal("what fits with nothing waiting was not let in")
	}
}

// TestALargeWaiterIsNotPassed: a waiter that does not fit yet is passed by
// none behind it, or smaller ones could keep it out for ever.
func TestALargeWaiterIsNotPassed(t *testing.T) {
	g := New(4)
	ctx := context.Background()
	for range 2 {
		if err := g.Acquire(ctx, "a", 2); err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan string, 2)
	go func() {
		if err := g.Acquire(ctx, "b", 4); err == nil {
			got <- "b"
		}
	}()
	for g.Waiting() < 1 {
		runtime.Gosched()
	}
	go func() {
		if err := g.Acquire(ctx, "c", 1); err == nil {
			got <- "c"
		}
	}()
	for g.Waiting() < 2 {
		runtime.Gosched()
	}
	g.Release("a", 2) // c would fit now, b not yet
	if n := g.Waiting(); n != 2 {
		t.Fatalf("%d waiting after room for c alone; want both, c behind b", n)
	}
	g.Release("a", 2)
	if first := <-got; first != "b" {
		t.Fatalf("%s went in first, want b", first)
	}
	g.Release("b", 4)
	if next := <-got; next != "c" {
		t.Fatalf("%s went in next, want c", next)
	}
}

// TestReleasingMoreThanHeldPanics: a release the key does not hold would
// leave the counts wrong for every later waiter; it fails loudly instead.
func TestReleasingMoreThanHeldPanics(t *testing.T) {
	cases := []struct {
		name string
		key  string
		n    int64
	}{
		{"a key holding nothing", "other", 1},
		{"more than the key holds", "a", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := New(4)
			if !g.TryAcquire("a", 1) {
				t.Fatal("an empty gate refused")
			}
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
				// The gate is still usable: its lock was given back.
				if !g.TryAcquire("b", 1) {
					t.Fatal("the gate refused after the panic")
				}
			}()
			g.Release(c.key, c.n)
		})
	}
}
