package pgstate

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Hosts sharing a store record their realms' settings digests and warn of
// a realm another host recorded differently. Two hosts starting together
// (a rolling restart) used to miss each other: the second's statement,
// having waited for the first's uncommitted row, compared against what it
// saw before the wait, nothing, and neither host warned.
func TestRealmSettingsDifferAtOnce(t *testing.T) {
	dbs := open(t, 2)
	ctx := context.Background()
	for _, tc := range []struct {
		name      string
		realm     string
		first     string // the digest the other host records in a transaction still open
		mine      string
		wantDiffs []string
	}{
		{"other settings", "r1", "other", "mine", []string{"r1"}},
		{"the same settings", "r2", "mine", "mine", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The other host mid-start: its row written, its
			// transaction not yet committed.
			tx, err := dbs[0].pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, dbs[0].q(`INSERT INTO realm_settings (realm, digest, updated_ms) VALUES ($1, $2, 0)`), tc.realm, tc.first); err != nil {
				t.Fatal(err)
			}
			type answer struct {
				differ []string
				err    error
			}
			done := make(chan answer, 1)
			go func() {
				d, err := dbs[1].CompareRealmSettings(ctx, map[string]string{tc.realm: tc.mine})
				done <- answer{d, err}
			}()
			waitForLockWait(t, dbs[0])
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			got := <-done
			if got.err != nil {
				t.Fatal(got.err)
			}
			if !slices.Equal(got.differ, tc.wantDiffs) {
				t.Errorf("realms differing = %q, want %q", got.differ, tc.wantDiffs)
			}
		})
	}
}

// waitForLockWait returns once a statement on db's database waits for a
// lock.
func waitForLockWait(t *testing.T, db *DB) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var n int
		if err := db.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
	t.Fatal("the second host's statement never waited for the first's row")
}
