package pgstate

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/internal/statedb"
	"github.com/memhost/memhost/sdk"
)

// TestProposalLedgersKeepTheFirstEntry runs both ledgers, the host's
// SQLite one and the shared PostgreSQL one: an id the realm already notes
// is refused as a conflict, whoever proposes it again, and the first
// proposer keeps its entry, time and count; nothing of the refused batch
// is noted. Another realm may use the id.
func TestProposalLedgersKeepTheFirstEntry(t *testing.T) {
	ctx := context.Background()
	ledgers := map[string]func(t *testing.T) proposal.Ledger{
		"sqlite": func(t *testing.T) proposal.Ledger {
			db, err := statedb.Open(ctx, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			l, err := proposal.NewSQLLedger(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		"postgres": func(t *testing.T) proposal.Ledger { return NewProposals(open(t, 1)[0]) },
	}
	first := proposal.Entry{Realm: "r", ID: "p1", Proposer: "alice-bot", Identity: "alice", CreatedAt: time.UnixMilli(1000).UTC()}
	cases := []struct {
		name  string
		again []proposal.Entry
	}{
		{"another proposer", []proposal.Entry{{Realm: "r", ID: "p1", Proposer: "mallory-bot", CreatedAt: time.UnixMilli(2000).UTC()}}},
		{"the same proposer", []proposal.Entry{{Realm: "r", ID: "p1", Proposer: "alice-bot", Identity: "alice", CreatedAt: time.UnixMilli(2000).UTC()}}},
		{"in a batch with a new id", []proposal.Entry{
			{Realm: "r", ID: "p2", Proposer: "mallory-bot", CreatedAt: time.UnixMilli(2000).UTC()},
			{Realm: "r", ID: "p1", Proposer: "mallory-bot", CreatedAt: time.UnixMilli(2000).UTC()},
		}},
		{"twice in one batch", []proposal.Entry{
			{Realm: "r", ID: "p2", Proposer: "mallory-bot", CreatedAt: time.UnixMilli(2000).UTC()},
			{Realm: "r", ID: "p2", Proposer: "mallory-bot", CreatedAt: time.UnixMilli(2000).UTC()},
		}},
	}
	for store, newLedger := range ledgers {
		for _, tc := range cases {
			t.Run(store+"/"+tc.name, func(t *testing.T) {
				l := newLedger(t)
				if err := l.Add(ctx, []proposal.Entry{first}, 10); err != nil {
					t.Fatal(err)
				}
				if err := l.Add(ctx, tc.again, 10); !errors.Is(err, sdk.ErrConflict) {
					t.Fatalf("Add of a noted id answered %v; want a conflict", err)
				}
				got, found, err := l.Lookup(ctx, "r", "p1")
				if err != nil || !found || got != first {
					t.Fatalf("entry after the refused Add: %+v, %v, %v; want %+v", got, found, err, first)
				}
				if _, total, err := l.List(ctx, "r", "", 10); err != nil || total != 1 {
					t.Fatalf("%d pending after the refused Add (%v); want 1", total, err)
				}
				other := first
				other.Realm = "r2"
				if err := l.Add(ctx, []proposal.Entry{other}, 10); err != nil {
					t.Fatalf("the id in another realm: %v", err)
				}
			})
		}
	}
}
