package sessionstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
)

// TestWaitingVisitKeepsItsDeadline: visits take turns, but one waiting for
// its turn still ends at its own deadline. Here the state database's one
// connection is busy elsewhere (a slow query or transaction of another
// component sharing the file), so a visit holds its turn while it waits
// for the database; a second visit, of another session, must not wait
// past its deadline for the first to give up.
func TestWaitingVisitKeepsItsDeadline(t *testing.T) {
	s, db := openStore(t, t.TempDir(), Options{})
	busy, err := db.SQL().BeginTx(ctx, nil) // the one connection
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Rollback()

	first, cancelFirst := context.WithCancel(ctx)
	defer cancelFirst()
	firstDone := make(chan error, 1)
	go func() { firstDone <- s.Update(first, key("r", "first"), inject(10, "a")) }()
	// The first visit holds its turn once it waits for the database.
	for db.SQL().Stats().WaitCount == 0 {
		time.Sleep(time.Millisecond)
	}

	second, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	secondDone := make(chan error, 1)
	go func() { secondDone <- s.Update(second, key("r", "second"), inject(10, "b")) }()
	select {
	case err := <-secondDone:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("the waiting visit answered %v, want its deadline", err)
		}
	case err := <-firstDone:
		t.Fatalf("the first visit ended (%v) while it should still wait for the database", err)
	case <-time.After(20 * time.Second):
		cancelFirst()
		<-firstDone
		t.Fatalf("the waiting visit was still waiting long after its deadline: it waited for the first visit")
	}
	cancelFirst()
	if err := <-firstDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the first visit answered %v, want its cancellation", err)
	}
	busy.Rollback()
	// Nothing was written: both sessions are still unknown.
	for _, k := range []coordinator.SessionKey{key("r", "first"), key("r", "second")} {
		if st := get(t, s, k); !st.IsZero() {
			t.Fatalf("session %s holds %+v after failed visits", k.Session, st)
		}
	}
}
