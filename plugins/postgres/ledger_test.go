package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// An in-process WriteLedger refuses what the SDK's server refuses (the
// store once took a negative byte count), and a refused batch writes
// nothing.
func TestWriteLedgerRefusesBadEntries(t *testing.T) {
	s := openStore(t, schemaFor(t, t.Name()))
	ctx := context.Background()
	good := sdk.LedgerEntry{Realm: "default", Identity: "alice", Session: "s", RecordID: "r1", Surface: "turn", Bytes: 10}
	cases := []struct {
		name  string
		edit  func(*sdk.LedgerEntry)
		field string
	}{
		{"negative bytes", func(e *sdk.LedgerEntry) { e.Bytes = -1 }, "bytes"},
		{"blank surface", func(e *sdk.LedgerEntry) { e.Surface = " " }, "surface"},
		{"session with NUL", func(e *sdk.LedgerEntry) { e.Session = "a\x00" }, "session"},
		{"bad record id", func(e *sdk.LedgerEntry) { e.RecordID = "../r" }, "record_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bad := good
			tc.edit(&bad)
			err := s.WriteLedger(ctx, []sdk.LedgerEntry{good, bad})
			if !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), "entries[1]") || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("WriteLedger = %v, want an invalid-argument error naming entries[1] and %s", err, tc.field)
			}
		})
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM ledger`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d ledger rows after refused batches, want 0", n)
	}
}

// TestLedgerIsBounded: the ledger keeps the newest ledger_max_rows rows
// and drops those older than ledger_retention_hours, as rows are written.
func TestLedgerIsBounded(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	s := openStoreWith(t, configJSON(schemaFor(t, t.Name()), "ledger_max_rows", 50, "ledger_retention_hours", 2),
		func(s *Store) { s.now = func() time.Time { return now } })
	ctx := context.Background()
	next := 0
	write := func(n int) {
		t.Helper()
		entries := make([]sdk.LedgerEntry, n)
		for i := range entries {
			entries[i] = sdk.LedgerEntry{Realm: "default", Identity: "alice", RecordID: fmt.Sprintf("r%d", next), Surface: "turn"}
			next++
		}
		if err := s.WriteLedger(ctx, entries); err != nil {
			t.Fatal(err)
		}
	}
	kept := func(from, to int) {
		t.Helper()
		rows, err := s.pool.Query(ctx, `SELECT record_id FROM ledger ORDER BY seq`)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got = append(got, id)
		}
		rows.Close()
		var want []string
		for i := from; i < to; i++ {
			want = append(want, fmt.Sprintf("r%d", i))
		}
		if !slices.Equal(got, want) {
			t.Errorf("ledger holds %v, want r%d to r%d", got, from, to-1)
		}
	}
	for range 7 {
		write(20)
	}
	kept(90, 140) // the newest 50 of 140
	now = now.Add(90 * time.Minute)
	write(10)
	kept(100, 150) // none is two hours old yet
	now = now.Add(time.Hour)
	write(1)
	kept(140, 151) // those of the first hour have expired
}

func ledgerEntryAt(id string, at time.Time) sdk.LedgerEntry {
	return sdk.LedgerEntry{Realm: "default", Identity: "alice", RecordID: id, Surface: "turn", At: at}
}

func countOf(t *testing.T, s *Store, query string, args ...any) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLedgerFutureRowHoldsNoRetentionBack: on a schema shared by hosts,
// an entry stamped ahead of the clock is stored at the time it is
// written, so it cannot keep every later row past the retention (found by
// an outside review).
func TestLedgerFutureRowHoldsNoRetentionBack(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	s := openStoreWith(t, configJSON(schemaFor(t, t.Name()), "ledger_max_rows", 1000, "ledger_retention_hours", 2),
		func(s *Store) { s.now = func() time.Time { return now } })
	ctx := context.Background()
	if err := s.WriteLedger(ctx, []sdk.LedgerEntry{ledgerEntryAt("future", now.Add(365*24*time.Hour))}); err != nil {
		t.Fatal(err)
	}
	var batch []sdk.LedgerEntry
	for i := range 10 {
		batch = append(batch, ledgerEntryAt(fmt.Sprintf("r%d", i), time.Time{}))
	}
	if err := s.WriteLedger(ctx, batch); err != nil {
		t.Fatal(err)
	}
	now = now.Add(3 * time.Hour)
	if err := s.WriteLedger(ctx, []sdk.LedgerEntry{ledgerEntryAt("late", time.Time{})}); err != nil {
		t.Fatal(err)
	}
	if n := countOf(t, s, `SELECT count(*) FROM ledger WHERE at_ms < $1`, now.Add(-2*time.Hour).UnixMilli()); n != 0 {
		t.Errorf("%d ledger rows older than the 2 h retention remain after a write: the future-stamped front row stops retention", n)
	}
}

// TestLedgerTrimLocksOnlyWhatItDeletes: once the ledger is at its row
// bound every write trims; a trim of one row must lock that row only (it
// once locked its whole front window, a thousand rows it kept, each lock a
// WAL record; found by an outside review).
func TestLedgerTrimLocksOnlyWhatItDeletes(t *testing.T) {
	s := openStoreWith(t, configJSON(schemaFor(t, t.Name()), "ledger_max_rows", 1500))
	ctx := context.Background()
	for b := range 2 {
		var batch []sdk.LedgerEntry
		for i := range 750 {
			batch = append(batch, ledgerEntryAt(fmt.Sprintf("r%d-%d", b, i), time.Time{}))
		}
		if err := s.WriteLedger(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	// No kept row carries a lock yet.
	if n := countOf(t, s, `SELECT count(*) FROM ledger WHERE xmax::text <> '0'`); n != 0 {
		t.Fatalf("%d rows locked before the trimming write", n)
	}
	if err := s.WriteLedger(ctx, []sdk.LedgerEntry{ledgerEntryAt("one", time.Time{})}); err != nil {
		t.Fatal(err)
	}
	if n := countOf(t, s, `SELECT count(*) FROM ledger`); n != 1500 {
		t.Fatalf("ledger holds %d rows, want 1500", n)
	}
	if n := countOf(t, s, `SELECT count(*) FROM ledger WHERE xmax::text <> '0'`); n > 0 {
		t.Errorf("a write trimming one row left %d kept rows locked (xmax set): the trim locks its whole window, not the rows it deletes", n)
	}
}
