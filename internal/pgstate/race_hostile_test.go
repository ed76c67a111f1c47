package pgstate

import (
	"context"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
)

// TestTurnSurvivesItsRowDeleted: another host drops a session's row
// (Expire, or the realm bound evicting it) while a turn of that session
// waits for the row's lock. The turn must go on as a fresh session, not
// fail with a bare "no rows in result set".
func TestTurnSurvivesItsRowDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dbs := open(t, 2)
	a := NewSessions(dbs[0], SessionOptions{})
	key := coordinator.SessionKey{Realm: "r", Identity: "i", Session: "s"}
	spend := func(st *coordinator.SessionState) bool { st.InjectedBytes += 100; return true }
	if err := a.Update(ctx, key, spend); err != nil {
		t.Fatal(err)
	}
	// "Host b" holds the row, as its Expire or bound does while deleting.
	other, err := dbs[1].pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(context.Background())
	if _, err := other.Exec(ctx, `SELECT 1 FROM memhost_state.sessions WHERE realm = 'r' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Update(ctx, key, spend) }()
	// Wait until the turn blocks on the row lock.
	for {
		var waiting int
		if err := dbs[1].pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the turn ended (%v) before it waited for the row", err)
		case <-ctx.Done():
			t.Fatal("the turn never waited for the row lock")
		case <-time.After(10 * time.Millisecond):
		}
	}
	if _, err := other.Exec(ctx, `DELETE FROM memhost_state.sessions WHERE realm = 'r'`); err != nil {
		t.Fatal(err)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a turn whose row was dropped meanwhile failed: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the turn did not finish")
	}
	var got int
	if err := a.Update(ctx, key, func(st *coordinator.SessionState) bool { got = st.InjectedBytes; return false }); err != nil {
		t.Fatal(err)
	}
	if got != 100 {
		t.Fatalf("the session holds %d bytes, want the turn's 100 on a fresh session", got)
	}
}
