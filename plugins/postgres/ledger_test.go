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
	s := openStore(t, schemaFor(t.Name()))
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
	s := openStoreWith(t, configJSON(schemaFor(t.Name()), "ledger_max_rows", 50, "ledger_retention_hours", 2),
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
