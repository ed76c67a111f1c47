package turntrace

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
)

// countingStore is a Store that keeps the size of every Append.
type countingStore struct {
	Store
	mu      sync.Mutex
	appends []int
}

func (s *countingStore) Append(ctx context.Context, traces []coordinator.TurnTrace) error {
	s.mu.Lock()
	s.appends = append(s.appends, len(traces))
	s.mu.Unlock()
	return s.Store.Append(ctx, traces)
}

func (s *countingStore) sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.appends...)
}

// TestRecorderBatchesTurnsWithinTheLinger: traces of turns a few
// milliseconds apart go to the store in one write, and a read does not wait
// for the linger to end.
func TestRecorderBatchesTurnsWithinTheLinger(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{Store: openStore(t)}
	r := NewRecorder(store, Options{Retention: time.Hour, MaxTurnsPerRealm: 100, Linger: time.Hour})
	defer r.Close()
	now := time.Now().UTC()
	for i := range 3 {
		r.Trace(tr("r", "s", now, "id"))
		if i < 2 {
			time.Sleep(5 * time.Millisecond) // an idle writer wakes for each trace
		}
	}
	readCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got, err := r.Session(readCtx, "r", []string{"alice"}, "s", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("read %d traces after the flush, want 3", len(got))
	}
	if sizes := store.sizes(); len(sizes) != 1 || sizes[0] != 3 {
		t.Fatalf("appends of %v traces, want one of 3", sizes)
	}
}

// TestRecorderCloseWritesWhatLingers: closing during the linger loses no
// trace.
func TestRecorderCloseWritesWhatLingers(t *testing.T) {
	store := &countingStore{Store: openStore(t)}
	r := NewRecorder(store, Options{Retention: time.Hour, MaxTurnsPerRealm: 100, Linger: time.Hour})
	r.Trace(tr("r", "s", time.Now().UTC(), "id"))
	r.Trace(tr("r", "s", time.Now().UTC(), "id"))
	r.Close()
	got, _, err := store.SessionPage(context.Background(), "r", nil, "s", Page{Limit: 10})
	if err != nil || len(got) != 2 {
		t.Fatalf("after close the store holds %d traces (%v), want 2", len(got), err)
	}
}

// TestGatherTakesWhatPrecedesAFlush: traces queued before a flush go in the
// batch that flush ends, not in a second write. With the queue and the flush
// both ready select picks either, so the case runs many times (it failed
// CI once as two writes of [2 1]).
func TestGatherTakesWhatPrecedesAFlush(t *testing.T) {
	for i := range 100 {
		r := &Recorder{
			opts:    Options{Linger: time.Hour},
			queue:   make(chan coordinator.TurnTrace, 8),
			flushes: make(chan request),
		}
		r.queue <- tr("r", "s", time.Now().UTC(), "id")
		r.queue <- tr("r", "s", time.Now().UTC(), "id")
		ack := make(chan error, 1)
		go func() { r.flushes <- request{done: ack} }()
		time.Sleep(time.Millisecond) // let the flush wait beside the queue
		batch, got := r.gather(context.Background(), []coordinator.TurnTrace{tr("r", "s", time.Now().UTC(), "id")})
		if got == nil || got.done != ack {
			t.Fatalf("run %d: gather did not hand back the flush", i)
		}
		if len(batch) != 3 {
			t.Fatalf("run %d: batch of %d traces, want 3 (the queued ones belong in it)", i, len(batch))
		}
	}
}

// TestRecorderForgetsQueuedAndLateTraces: a Forget blanks the title in a
// trace still queued when it comes, and in one written just after (a
// turn that recalled the record before it was forgotten).
func TestRecorderForgetsQueuedAndLateTraces(t *testing.T) {
	ctx := context.Background()
	store := openStore(t)
	r := NewRecorder(store, Options{Retention: time.Hour, MaxTurnsPerRealm: 100, Linger: time.Hour})
	defer r.Close()
	titled := func() coordinator.TurnTrace {
		t := tr("r", "s", time.Now().UTC(), "gone")
		t.Included[0].Title = "the secret"
		return t
	}
	r.Trace(titled())
	if err := r.Forget(ctx, "r", []string{"gone"}); err != nil {
		t.Fatal(err)
	}
	r.Trace(titled())
	got, err := r.Session(ctx, "r", nil, "s", 10)
	if err != nil || len(got) != 2 {
		t.Fatalf("read %d traces, %v", len(got), err)
	}
	for i, tr := range got {
		if row := tr.Included[0]; row.Title != "" || !row.Forgotten {
			t.Errorf("trace %d names the forgotten record as %+v", i, row)
		}
	}
}
