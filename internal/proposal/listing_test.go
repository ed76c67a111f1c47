package proposal

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// TestListingsDoNotWaitForTheWriter: a review queue's listings ran on the
// state database's one connection, queued with every turn's session
// write. A write transaction stays open here while each listing runs: the
// listing answers what was committed without waiting for it, and List's
// count and page agree.
func TestListingsDoNotWaitForTheWriter(t *testing.T) {
	db, l := newLedger(t)
	committed := Entry{Realm: "r", ID: "p1", Proposer: "agent", CreatedAt: time.Now().UTC()}
	if err := l.Add(ctx, []Entry{committed}, 10); err != nil {
		t.Fatal(err)
	}
	inTx, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.Tx(ctx, "held write", func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO proposals (realm, id, proposer, identity, created_ms) VALUES ('r', 'p2', 'agent', '', 1)`); err != nil {
				return err
			}
			close(inTx)
			<-release
			return nil
		})
	}()
	select {
	case <-inTx:
	case err := <-done:
		t.Fatalf("the held write failed: %v", err)
	}
	defer func() {
		close(release)
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	listings := []struct {
		name string
		list func(context.Context) ([]Entry, error)
	}{
		{"list", func(ctx context.Context) ([]Entry, error) {
			got, total, err := l.List(ctx, "r", Cursor{}, 10)
			if err == nil && total != len(got) {
				t.Errorf("List counted %d and listed %d", total, len(got))
			}
			return got, err
		}},
		{"proposed", func(ctx context.Context) ([]Entry, error) { return l.Proposed(ctx, "r", "agent", 10) }},
	}
	for _, c := range listings {
		t.Run(c.name, func(t *testing.T) {
			// The deadline is the test's, not a speed target: waiting for
			// the writer would wait until release.
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			got, err := c.list(ctx)
			if err != nil {
				t.Fatalf("listing while a write is open: %v", err)
			}
			if len(got) != 1 || got[0].ID != "p1" {
				t.Fatalf("listed %v, want the committed p1 alone", got)
			}
		})
	}
}
