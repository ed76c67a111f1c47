package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"

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
