package pgstate

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"sync/atomic"
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
	ledgers := bothLedgers()
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
				if err != nil || !found || !reflect.DeepEqual(got, first) {
					t.Fatalf("entry after the refused Add: %+v, %v, %v; want %+v", got, found, err, first)
				}
				if _, total, err := l.List(ctx, "r", proposal.Cursor{}, 10); err != nil || total != 1 {
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

// bothLedgers makes the host's SQLite ledger and the shared PostgreSQL one.
func bothLedgers() map[string]func(t *testing.T) proposal.Ledger {
	return map[string]func(t *testing.T) proposal.Ledger{
		"sqlite": func(t *testing.T) proposal.Ledger {
			db, err := statedb.Open(context.Background(), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			l, err := proposal.NewSQLLedger(context.Background(), db)
			if err != nil {
				t.Fatal(err)
			}
			return l
		},
		"postgres": func(t *testing.T) proposal.Ledger { return NewProposals(open(t, 1)[0]) },
	}
}

// TestProposalLedgersClaimOnce runs both ledgers: of many claims on one
// proposal at once exactly one holds it; a release or ClaimTTL lets the
// next in; a claim on an id the ledger does not note (an imported
// proposal) notes it, held; the claim leaves the entry as proposed.
func TestProposalLedgersClaimOnce(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1_000_000).UTC()
	entry := proposal.Entry{Realm: "r", ID: "p1", Proposer: "alice-bot", Identity: "alice", CreatedAt: now}
	for store, newLedger := range bothLedgers() {
		t.Run(store, func(t *testing.T) {
			l := newLedger(t)
			if err := l.Add(ctx, []proposal.Entry{entry}, 10); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			var won atomic.Int32
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok, noted, err := l.Claim(ctx, "r", "p1", now)
					if noted {
						t.Error("a claim on a noted proposal says it noted it")
					}
					if err != nil {
						t.Error(err)
					}
					if ok {
						won.Add(1)
					}
				}()
			}
			wg.Wait()
			if won.Load() != 1 {
				t.Fatalf("%d of 8 claims at once held the proposal, want 1", won.Load())
			}
			if ok, _, err := l.Claim(ctx, "r", "p1", now.Add(proposal.ClaimTTL-time.Millisecond)); err != nil || ok {
				t.Fatalf("a claim within the TTL of another = %v, %v; want refused", ok, err)
			}
			if ok, _, err := l.Claim(ctx, "r", "p1", now.Add(proposal.ClaimTTL)); err != nil || !ok {
				t.Fatalf("a claim past the TTL of another = %v, %v; want held", ok, err)
			}
			if err := l.Release(ctx, entry); err != nil {
				t.Fatal(err)
			}
			if ok, _, err := l.Claim(ctx, "r", "p1", now); err != nil || !ok {
				t.Fatalf("a claim after a release = %v, %v; want held", ok, err)
			}
			if got, found, err := l.Lookup(ctx, "r", "p1"); err != nil || !found || !reflect.DeepEqual(got, entry) {
				t.Fatalf("the claimed entry reads %+v, %v, %v; want %+v as proposed", got, found, err, entry)
			}
			if ok, noted, err := l.Claim(ctx, "r", "imported", now); err != nil || !ok || !noted {
				t.Fatalf("a claim on an unnoted id = %v (noted %v), %v; want held and noted", ok, noted, err)
			}
			if e, found, err := l.Lookup(ctx, "r", "imported"); err != nil || !found || e.Proposer != proposal.ImportedProposer {
				t.Fatalf("the claim noted the unnoted id as %+v (%v, %v), want under %q", e, found, err, proposal.ImportedProposer)
			}
			if ok, _, err := l.Claim(ctx, "r", "imported", now); err != nil || ok {
				t.Fatalf("a second claim on the id the first noted = %v, %v; want refused", ok, err)
			}
			if ok, _, err := l.Claim(ctx, "r2", "p1", now); err != nil || !ok {
				t.Fatalf("a claim on the id in another realm = %v, %v; want held", ok, err)
			}
		})
	}
}

// TestProposalLedgersKeepEntriesUnderReview runs both ledgers: a reap of
// entries whose records are gone leaves those noted or claimed less than
// ClaimTTL ago (a proposal is noted before it is stored; a review has the
// record out of the store for a moment, and may put it back), and a
// release notes an entry again, as proposed, when something
// dropped it meanwhile. Proposed answers the entries one proposer's
// bound counts.
func TestProposalLedgersKeepEntriesUnderReview(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1_000_000).UTC()
	held := proposal.Entry{Realm: "r", ID: "p1", Proposer: "alice-bot", Identity: "alice", CreatedAt: now}
	free := proposal.Entry{Realm: "r", ID: "p2", Proposer: "alice-bot", CreatedAt: now.Add(time.Millisecond)}
	other := proposal.Entry{Realm: "r", ID: "p3", Proposer: "bob-bot", CreatedAt: now}
	for store, newLedger := range bothLedgers() {
		t.Run(store, func(t *testing.T) {
			l := newLedger(t)
			for _, e := range []proposal.Entry{held, free, other} {
				if err := l.Add(ctx, []proposal.Entry{e}, 10); err != nil {
					t.Fatal(err)
				}
			}
			if got, err := l.Proposed(ctx, "r", "alice-bot", 10); err != nil || len(got) != 2 || !reflect.DeepEqual(got[0], held) || !reflect.DeepEqual(got[1], free) {
				t.Fatalf("alice-bot's entries: %+v (%v), want p1 and p2", got, err)
			}
			// Noted less than ClaimTTL ago, an entry may be a proposal
			// still being stored.
			if _, err := l.Reap(ctx, "r", []string{"p1", "p2"}, now.Add(proposal.ClaimTTL-time.Millisecond)); err != nil {
				t.Fatal(err)
			}
			if got, err := l.Proposed(ctx, "r", "alice-bot", 10); err != nil || len(got) != 2 {
				t.Fatalf("the reap dropped young entries: %+v left (%v)", got, err)
			}
			later := now.Add(proposal.ClaimTTL + time.Millisecond)
			if ok, _, err := l.Claim(ctx, "r", "p1", later); err != nil || !ok {
				t.Fatalf("claim = %v, %v", ok, err)
			}
			if _, err := l.Reap(ctx, "r", []string{"p1", "p2"}, later); err != nil {
				t.Fatal(err)
			}
			if _, found, err := l.Lookup(ctx, "r", "p1"); err != nil || !found {
				t.Fatalf("the reap dropped the entry under review (%v, %v)", found, err)
			}
			if _, found, err := l.Lookup(ctx, "r", "p2"); err != nil || found {
				t.Fatalf("the reap left the free entry (%v, %v)", found, err)
			}
			if _, err := l.Reap(ctx, "r", []string{"p1"}, later.Add(proposal.ClaimTTL)); err != nil {
				t.Fatal(err)
			}
			if _, found, err := l.Lookup(ctx, "r", "p1"); err != nil || found {
				t.Fatalf("the reap left an entry whose claim is past ClaimTTL (%v, %v)", found, err)
			}
			if err := l.Release(ctx, held); err != nil {
				t.Fatal(err)
			}
			if got, found, err := l.Lookup(ctx, "r", "p1"); err != nil || !found || !reflect.DeepEqual(got, held) {
				t.Fatalf("after the release of a dropped entry: %+v, %v, %v; want it noted as proposed", got, found, err)
			}
			if ok, _, err := l.Claim(ctx, "r", "p1", now); err != nil || !ok {
				t.Fatalf("the released entry is not claimable: %v, %v", ok, err)
			}
		})
	}
}

// TestProposalLedgersHoldThroughAReap runs both ledgers: an entry holding
// what a review took out of the store (Hold) is answered by Reap, not
// dropped, once its claim is older than ClaimTTL (the review died), and a
// Release drops what it held; an entry holding nothing is dropped.
func TestProposalLedgersHoldThroughAReap(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1_000_000).UTC()
	for store, newLedger := range bothLedgers() {
		t.Run(store, func(t *testing.T) {
			l := newLedger(t)
			held := proposal.Entry{Realm: "r", ID: "p1", Proposer: "alice-bot", CreatedAt: now}
			plain := proposal.Entry{Realm: "r", ID: "p2", Proposer: "alice-bot", CreatedAt: now}
			if err := l.Add(ctx, []proposal.Entry{held, plain}, 10); err != nil {
				t.Fatal(err)
			}
			if ok, _, err := l.Claim(ctx, "r", "p1", now); err != nil || !ok {
				t.Fatalf("claim = %v, %v", ok, err)
			}
			if err := l.Hold(ctx, "r", "p1", []byte(`{"record":{}}`)); err != nil {
				t.Fatal(err)
			}
			got, found, err := l.Lookup(ctx, "r", "p1")
			if err != nil || !found || string(got.Held) != `{"record":{}}` {
				t.Fatalf("the held entry reads %+v, %v, %v", got, found, err)
			}
			if out, err := l.Reap(ctx, "r", []string{"p1", "p2"}, now); err != nil || len(out) != 0 {
				t.Fatalf("a reap within the claim answered %+v, %v; want nothing", out, err)
			}
			later := now.Add(proposal.ClaimTTL + time.Second)
			out, err := l.Reap(ctx, "r", []string{"p1", "p2"}, later)
			if err != nil || len(out) != 1 || out[0].ID != "p1" || string(out[0].Held) != `{"record":{}}` {
				t.Fatalf("a reap after the claim expired answered %+v, %v; want p1 and what it holds", out, err)
			}
			if _, found, _ := l.Lookup(ctx, "r", "p2"); found {
				t.Fatal("the entry holding nothing was not dropped")
			}
			if err := l.Release(ctx, out[0]); err != nil {
				t.Fatal(err)
			}
			if got, found, err := l.Lookup(ctx, "r", "p1"); err != nil || !found || got.Held != nil {
				t.Fatalf("after its release the entry reads %+v, %v, %v; want it noted, holding nothing", got, found, err)
			}
		})
	}
}

// TestProposalLedgersPageOnPastRemovedEntries runs both ledgers: a page
// after a cursor whose entry was removed since (its proposal reviewed)
// goes on from where that entry stood, ties of one created time by id.
func TestProposalLedgersPageOnPastRemovedEntries(t *testing.T) {
	ctx := context.Background()
	at := func(ms int64) time.Time { return time.UnixMilli(ms).UTC() }
	entries := []proposal.Entry{
		{Realm: "r", ID: "a", Proposer: "bot", CreatedAt: at(1000)},
		{Realm: "r", ID: "b", Proposer: "bot", CreatedAt: at(2000)},
		{Realm: "r", ID: "c", Proposer: "bot", CreatedAt: at(2000)},
		{Realm: "r", ID: "d", Proposer: "bot", CreatedAt: at(3000)},
	}
	cases := []struct {
		name    string
		after   proposal.Entry
		removed []string
		want    []string
	}{
		{"nothing removed", entries[1], nil, []string{"c", "d"}},
		{"the cursor's entry", entries[1], []string{"b"}, []string{"c", "d"}},
		{"the cursor's and the next", entries[0], []string{"a", "b"}, []string{"c", "d"}},
		{"every one after", entries[2], []string{"c", "d"}, nil},
	}
	for store, newLedger := range bothLedgers() {
		for _, tc := range cases {
			t.Run(store+"/"+tc.name, func(t *testing.T) {
				l := newLedger(t)
				if err := l.Add(ctx, entries, 10); err != nil {
					t.Fatal(err)
				}
				if err := l.Remove(ctx, "r", tc.removed); err != nil {
					t.Fatal(err)
				}
				page, _, err := l.List(ctx, "r", proposal.After(tc.after), 10)
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for _, e := range page {
					got = append(got, e.ID)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("after %s with %v removed: %v, want %v", tc.after.ID, tc.removed, got, tc.want)
				}
			})
		}
	}
}
