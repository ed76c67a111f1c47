package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// ledgerStoreBounded configures a store with the given ledger bounds on a
// fake clock.
func ledgerStoreBounded(t *testing.T, maxRows, retentionHours int) (*Store, *clock) {
	t.Helper()
	c := newClock()
	s := newStore(func(o *options) { o.now = c.now })
	path := filepath.Join(t.TempDir(), "memory.db")
	cfg := fmt.Sprintf(`{"path": %q, "ledger_max_rows": %d, "ledger_retention_hours": %d}`, path, maxRows, retentionHours)
	if err := s.Configure(context.Background(), json.RawMessage(cfg)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, c
}

func ledgerEntryAt(id string, at time.Time) sdk.LedgerEntry {
	return sdk.LedgerEntry{Realm: realm, Identity: "alice", RecordID: id, Surface: "turn", At: at}
}

// TestLedgerFutureRowHoldsNoRetentionBack: an entry stamped ahead of the
// clock (a host whose clock ran fast; any explicit At) is stored at the
// time it is written, so it cannot sit at the front of the ledger and keep
// every later row past the retention (found by an outside review).
func TestLedgerFutureRowHoldsNoRetentionBack(t *testing.T) {
	ctx := context.Background()
	s, c := ledgerStoreBounded(t, 1000, 2)
	if err := s.WriteLedger(ctx, []sdk.LedgerEntry{ledgerEntryAt("future", c.now().Add(365*24*time.Hour))}); err != nil {
		t.Fatal(err)
	}
	var batch []sdk.LedgerEntry
	for i := range 10 {
		batch = append(batch, ledgerEntryAt(fmt.Sprintf("r%d", i), time.Time{}))
	}
	if err := s.WriteLedger(ctx, batch); err != nil {
		t.Fatal(err)
	}
	c.advance(3 * time.Hour) // r0..r9 are now past the 2 h retention
	if err := s.WriteLedger(ctx, []sdk.LedgerEntry{ledgerEntryAt("late", time.Time{})}); err != nil {
		t.Fatal(err)
	}
	var expired int
	if err := s.db.r.QueryRow(`SELECT count(*) FROM ledger WHERE at_ms < ?`, c.now().Add(-2*time.Hour).UnixMilli()).Scan(&expired); err != nil {
		t.Fatal(err)
	}
	if expired != 0 {
		t.Errorf("%d ledger rows older than the 2 h retention remain after a write: a row stamped in the future at the front of the ledger stops retention (ids %v)",
			expired, ledgerRecordIDs(t, s))
	}
}

// TestLedgerRowBoundKeepsItsRows: only a leading run of rows is ever
// trimmed, so the row bound, counted as a difference of seqs, never drops
// a row the ledger has room for. An expired row behind a fresh one waits
// for the front to reach it (before an outside review, such rows were
// deleted from the middle, and the count then overstated the rows).
func TestLedgerRowBoundKeepsItsRows(t *testing.T) {
	ctx := context.Background()
	s, c := ledgerStoreBounded(t, 5, 2)
	old := c.now().Add(-3 * time.Hour)
	if err := s.WriteLedger(ctx, []sdk.LedgerEntry{ledgerEntryAt("a", old), ledgerEntryAt("b", time.Time{}), ledgerEntryAt("x", old), ledgerEntryAt("y", time.Time{})}); err != nil {
		t.Fatal(err)
	}
	if got, want := ledgerRecordIDs(t, s), []string{"b", "x", "y"}; !slices.Equal(got, want) {
		t.Fatalf("ledger holds %v, want %v (the expired a leads; x waits behind b)", got, want)
	}
	if err := s.WriteLedger(ctx, []sdk.LedgerEntry{ledgerEntryAt("c", time.Time{}), ledgerEntryAt("d", time.Time{})}); err != nil {
		t.Fatal(err)
	}
	if got, want := ledgerRecordIDs(t, s), []string{"b", "x", "y", "c", "d"}; !slices.Equal(got, want) {
		t.Fatalf("ledger holds %v, want %v: five rows fit the bound", got, want)
	}
	if err := s.WriteLedger(ctx, []sdk.LedgerEntry{ledgerEntryAt("e", time.Time{})}); err != nil {
		t.Fatal(err)
	}
	// b leaves for the bound, and x, expired, then leads.
	if got, want := ledgerRecordIDs(t, s), []string{"y", "c", "d", "e"}; !slices.Equal(got, want) {
		t.Errorf("ledger holds %v, want %v", got, want)
	}
}

// TestLedgerIsBounded: the ledger keeps the newest ledger_max_rows rows
// and drops those older than ledger_retention_hours, as rows are written.
func TestLedgerIsBounded(t *testing.T) {
	ctx := context.Background()
	s, c := ledgerStoreBounded(t, 50, 2)
	next := 0
	write := func(n int) {
		t.Helper()
		entries := make([]sdk.LedgerEntry, n)
		for i := range entries {
			entries[i] = sdk.LedgerEntry{Realm: realm, Identity: "alice", RecordID: fmt.Sprintf("r%d", next), Surface: "turn"}
			next++
		}
		if err := s.WriteLedger(ctx, entries); err != nil {
			t.Fatal(err)
		}
	}
	kept := func(from, to int) {
		t.Helper()
		var want []string
		for i := from; i < to; i++ {
			want = append(want, fmt.Sprintf("r%d", i))
		}
		if got := ledgerRecordIDs(t, s); !slices.Equal(got, want) {
			t.Errorf("ledger holds %v, want r%d to r%d", got, from, to-1)
		}
	}
	for range 7 {
		write(20)
	}
	kept(90, 140) // the newest 50 of 140
	c.advance(90 * time.Minute)
	write(10)
	kept(100, 150) // none is two hours old yet
	c.advance(time.Hour)
	write(1)
	kept(140, 151) // those of the first hour have expired
}

func ledgerRecordIDs(t *testing.T, s *Store) []string {
	t.Helper()
	rows, err := s.db.r.Query("SELECT record_id FROM ledger ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}
