package proposal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// meetingStore holds the first two Gets until both have arrived (or a
// while has passed), so two reviews that each read the proposal before
// acting meet between the read and the act.
type meetingStore struct {
	*store
	mu      sync.Mutex
	arrived int
	met     chan struct{}
}

func (m *meetingStore) Get(ctx context.Context, realm string, ids []string) ([]sdk.Record, error) {
	m.mu.Lock()
	m.arrived++
	if m.arrived == 2 {
		close(m.met)
	}
	first := m.arrived <= 2
	m.mu.Unlock()
	if first {
		select {
		case <-m.met:
		case <-time.After(500 * time.Millisecond):
		}
	}
	return m.store.Get(ctx, realm, ids)
}

func (m *meetingStore) Forget(_ context.Context, _ string, ids []string) (int, error) {
	m.store.mu.Lock()
	defer m.store.mu.Unlock()
	n := 0
	for _, id := range ids {
		if _, ok := m.store.records[id]; ok {
			delete(m.store.records, id)
			n++
		}
	}
	return n, nil
}

// TestReviewsOfOneProposalDoNotBothAct: an approval and a rejection of
// one proposal sent together, or two of either, answered success both,
// and a rejected proposal became an active record (from an outside
// review: each checked that the record was pending, then acted). The
// ledger's claim now lets one act; the other is a conflict, and what
// the proposal became agrees with the answer that succeeded.
func TestReviewsOfOneProposalDoNotBothAct(t *testing.T) {
	type review func(q *Queue, p sdk.Provider, id string) error
	approve := func(q *Queue, p sdk.Provider, id string) error { _, err := q.Approve(ctx, "r", id, p); return err }
	reject := func(q *Queue, p sdk.Provider, id string) error { return q.Reject(ctx, "r", id, p) }
	cases := []struct {
		name     string
		a, b     review
		approves [2]bool // which of a and b approve
	}{
		{"approve and reject", approve, reject, [2]bool{true, false}},
		{"reject and approve", reject, approve, [2]bool{false, true}},
		{"approve twice", approve, approve, [2]bool{true, true}},
		{"reject twice", reject, reject, [2]bool{false, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t)
			s := &meetingStore{store: newStore(append(allCaps, sdk.CapForget)...), met: make(chan struct{})}
			ids, err := q.Propose(ctx, "r", s.store, []sdk.Record{fact(sdk.RealmScope, "deploys")}, Proposer{Token: "agent"})
			if err != nil {
				t.Fatal(err)
			}
			id := ids[0]
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i, r := range []review{tc.a, tc.b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[i] = r(q, s, id)
				}()
			}
			wg.Wait()
			ok, approved := 0, false
			for i, err := range errs {
				switch {
				case err == nil:
					ok++
					approved = tc.approves[i]
				case !errors.Is(err, sdk.ErrConflict):
					t.Errorf("the losing review answered %v, want a conflict", err)
				}
			}
			if ok != 1 {
				t.Fatalf("%d reviews succeeded (%v), want exactly one", ok, errs)
			}
			active := 0
			s.store.mu.Lock()
			for _, r := range s.store.records {
				if r.Status == sdk.StatusActive && r.Title == "deploys" {
					active++
				}
			}
			s.store.mu.Unlock()
			if want := map[bool]int{true: 1, false: 0}[approved]; active != want {
				t.Errorf("%d active records hold the proposal's content after %v, want %d", active, errs, want)
			}
			if _, found, err := q.Ledger.Lookup(ctx, "r", id); err != nil || found {
				t.Errorf("the reviewed proposal is still noted (found %v, %v)", found, err)
			}
		})
	}
}

// TestAFailedReviewReleasesTheProposal: a review whose act fails leaves
// the proposal pending and claimable, so the next review acts.
func TestAFailedReviewReleasesTheProposal(t *testing.T) {
	q := newQueue(t)
	s := newStore(allCaps...)
	ids, err := q.Propose(ctx, "r", s, []sdk.Record{fact(sdk.RealmScope, "deploys")}, Proposer{Token: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	// Without the forget capability a rejection fails before it claims;
	// an approval whose supersede fails fails after.
	broken := &failingSupersede{s}
	if _, err := q.Approve(ctx, "r", ids[0], broken); !errors.Is(err, errDown) {
		t.Fatalf("approve over a failing supersede answered %v", err)
	}
	if e, found, err := q.Ledger.Lookup(ctx, "r", ids[0]); err != nil || !found || e.Proposer != "agent" {
		t.Fatalf("after a failed approval the proposal is noted %v %+v (%v), want pending as proposed", found, e, err)
	}
	if _, err := q.Approve(ctx, "r", ids[0], s); err != nil {
		t.Fatalf("the next approval answered %v", err)
	}
}

type failingSupersede struct{ *store }

func (failingSupersede) Supersede(context.Context, string, string, sdk.Record) (string, error) {
	return "", errDown
}

// TestApprovedCopyDropsTheTagInAnyCase: the active copy of an approved
// proposal carries no proposal tag in any case (an imported proposal may
// hold a variant), and a proposal is stored with the tag as memhost
// writes it, whatever variant its record held.
func TestApprovedCopyDropsTheTagInAnyCase(t *testing.T) {
	prop := fact(sdk.RealmScope, "kiwi", "fruit", "MEMHOST:Proposal", Tag, "Memhost:PROPOSAL")
	if got := approvedCopy(prop).Tags; len(got) != 1 || got[0] != "fruit" {
		t.Errorf("approved copy tags %v, want [fruit]", got)
	}
	q := newQueue(t)
	s := newStore(allCaps...)
	ids, err := q.Propose(ctx, "r", s, []sdk.Record{fact(sdk.RealmScope, "mango", "MEMHOST:Proposal")}, Proposer{Token: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.get(t, ids[0]).Tags; len(got) != 1 || got[0] != Tag {
		t.Errorf("stored proposal tags %v, want [%s]", got, Tag)
	}
}

// TestProposalBatchesBeyondTheBound: a batch larger than the bound is too
// large (no review ever makes room for it), not a 429 to retry; a batch
// that would pass the bound with what is pending is ErrTooMany, saying
// both counts, and neither is worded as a database failure. Nothing is
// noted or stored.
func TestProposalBatchesBeyondTheBound(t *testing.T) {
	q := newQueue(t) // MaxPending 10
	s := newStore(allCaps...)
	batch := func(n int, title string) []sdk.Record {
		var out []sdk.Record
		for i := range n {
			out = append(out, fact(sdk.RealmScope, fmt.Sprintf("%s %d", title, i)))
		}
		return out
	}
	_, err := q.Propose(ctx, "r", s, batch(11, "big"), Proposer{Token: "agent"})
	var fe *sdk.FieldError
	if !errors.Is(err, sdk.ErrTooLarge) || !errors.As(err, &fe) || fe.Field != "records" || errors.Is(err, ErrTooMany) {
		t.Fatalf("a batch of 11 under a bound of 10 answered %v, want too large on records", err)
	}
	if _, err := q.Propose(ctx, "r", s, batch(6, "first"), Proposer{Token: "agent"}); err != nil {
		t.Fatal(err)
	}
	_, err = q.Propose(ctx, "r", s, batch(5, "second"), Proposer{Token: "agent"})
	if !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "has 6 pending") || !strings.Contains(err.Error(), "5 more") || strings.Contains(err.Error(), "database") {
		t.Fatalf("a batch of 5 beside 6 pending answered %v, want ErrTooMany naming both counts and no database", err)
	}
	if _, total, err := q.Ledger.List(ctx, "r", "", 100); err != nil || total != 6 {
		t.Fatalf("%d noted after the refusals (%v), want the 6 of the first batch", total, err)
	}
}

// downGet is a store whose fetch fails, as a provider that is down does.
type downGet struct{ *store }

func (downGet) Get(context.Context, string, []string) ([]sdk.Record, error) {
	return nil, fmt.Errorf("fetch: %w", sdk.ErrUnavailable)
}

// TestAFailedReviewOfAnUnnotedIDLeavesNoEntry: a review of an id the
// ledger does not note (an imported proposal, any id at all) that fails
// while the provider is down leaves the ledger as it was. Its claim had
// noted the id and the release kept the row: a phantom pending proposal,
// counted against the token-less proposer's bound (from an outside
// review).
func TestAFailedReviewOfAnUnnotedIDLeavesNoEntry(t *testing.T) {
	q := newQueue(t)
	s := newStore(append(allCaps, sdk.CapForget)...)
	if _, err := q.Approve(ctx, "r", "r-anything", downGet{s}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("approve while the provider is down answered %v", err)
	}
	if _, found, err := q.Ledger.Lookup(ctx, "r", "r-anything"); err != nil || found {
		t.Fatalf("the failed review left the id noted (%v, %v)", found, err)
	}
	if counts, err := q.Ledger.Counts(ctx); err != nil || counts["r"] != 0 {
		t.Fatalf("pending after the failed review: %v (%v), want none", counts, err)
	}
}
