package turntrace

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
)

// TestListingsDoNotWaitForTheWriter: from a flood measured through the
// HTTP API. Listings shared the state database's one connection with
// every turn's session write, so one realm's 64 concurrent trace listings
// held another realm's injects behind them (p95 5 ms to 6.7 s, 19 of 100
// failing). Here a write transaction stays open while each listing runs:
// the listing must answer what was committed, without waiting for it.
func TestListingsDoNotWaitForTheWriter(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	at := time.Now().UTC()
	if err := s.Append(ctx, []coordinator.TurnTrace{tr("r", "s", at, "committed")}); err != nil {
		t.Fatal(err)
	}
	inTx, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- s.db.Tx(ctx, "held write", func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `DELETE FROM turn_trace`); err != nil {
				return err
			}
			close(inTx)
			<-release
			return nil
		})
	}()
	<-inTx
	defer func() {
		close(release)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	listings := []struct {
		name string
		list func(context.Context) (int, error)
	}{
		{"session", func(ctx context.Context) (int, error) {
			got, err := s.Session(ctx, "r", nil, "s", 10)
			return len(got), err
		}},
		{"record", func(ctx context.Context) (int, error) {
			got, err := s.Record(ctx, "r", nil, "committed", 10)
			return len(got), err
		}},
		{"recent sessions", func(ctx context.Context) (int, error) {
			got, err := s.Recent(ctx, "r", nil, 10)
			return len(got), err
		}},
	}
	for _, l := range listings {
		t.Run(l.name, func(t *testing.T) {
			// The deadline is the test's, not a speed target: waiting for
			// the writer would wait until release.
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			n, err := l.list(ctx)
			if err != nil {
				t.Fatalf("listing while a write is open: %v", err)
			}
			if n != 1 {
				t.Fatalf("listed %d, want the 1 committed (the open write's delete unseen)", n)
			}
		})
	}
}
