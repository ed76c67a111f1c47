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
	reject := func(q *Queue, p sdk.Provider, id string) error { return q.Reject(ctx, "r", id, p, nil) }
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
	if _, total, err := q.Ledger.List(ctx, "r", Cursor{}, 100); err != nil || total != 6 {
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

// listingStore stands in for a second reviewer working the queue while
// an approval (or an application's write restating a proposal) has the
// proposal out of the store: its Supersede and Remember list the queue,
// then fail, so the proposal is put back. Its Recall answers target, the
// record a proposal restates.
type listingStore struct {
	*store
	q      *Queue
	target sdk.Record
	listed []Pending
}

func (l *listingStore) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) {
	if l.target.ID == "" {
		return nil, nil
	}
	return []sdk.Hit{{Record: l.target, Score: 1}}, nil
}

func (l *listingStore) Forget(_ context.Context, _ string, ids []string) (int, error) {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	n := 0
	for _, id := range ids {
		if _, ok := l.store.records[id]; ok {
			delete(l.store.records, id)
			n++
		}
	}
	return n, nil
}

func (l *listingStore) listThenFail(ctx context.Context) error {
	listed, _, _, err := l.q.List(ctx, "r", l, Cursor{}, 50, nil)
	if err != nil {
		return err
	}
	l.listed = listed
	return errDown
}

func (l *listingStore) Supersede(ctx context.Context, _, _ string, _ sdk.Record) (string, error) {
	return "", l.listThenFail(ctx)
}

func (l *listingStore) Remember(ctx context.Context, _ string, _ []sdk.Record) ([]string, error) {
	return nil, l.listThenFail(ctx)
}

// TestAFailedApprovalDuringAListingStaysListed: from an outside review.
// An approval over a restated record, or an application's write of a
// proposal's content, takes the proposal out of the store before it
// writes; a listing meanwhile saw it gone and dropped its entry, and when
// the write failed and the proposal was put back, nothing noted it again:
// pending and approvable by id, but listed by no review and counted by no
// bound. The listing now leaves an entry under review, and a failed
// review or restatement notes the proposal again, as proposed.
func TestAFailedApprovalDuringAListingStaysListed(t *testing.T) {
	cases := []struct {
		name string
		act  func(q *Queue, p *listingStore, prop sdk.Record) error
	}{
		{"approval over a restated record", func(q *Queue, p *listingStore, prop sdk.Record) error {
			_, err := q.Approve(ctx, "r", prop.ID, p)
			return err
		}},
		{"an application's write of the proposal's content", func(q *Queue, p *listingStore, prop sdk.Record) error {
			rec := fact(sdk.RealmScope, "deploys")
			_, err := q.Restate(ctx, "r", p, []sdk.Record{rec}, []sdk.Record{prop})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t)
			base := newStore(append(allCaps, sdk.CapForget, sdk.CapWrite)...)
			target := fact(sdk.RealmScope, "deploys")
			target.ID, target.Status = "target1", sdk.StatusActive
			base.records[target.ID] = target
			ids, err := q.Propose(ctx, "r", base, []sdk.Record{fact(sdk.RealmScope, "deploys")}, Proposer{Token: "agent", Identity: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			p := &listingStore{store: base, q: q, target: target}
			if err := tc.act(q, p, base.get(t, ids[0])); !errors.Is(err, errDown) {
				t.Fatalf("the act answered %v, want the write's failure", err)
			}
			if len(p.listed) != 0 {
				t.Errorf("the listing during the act showed %+v, want nothing: the proposal was out of the store", p.listed)
			}
			if got := base.get(t, ids[0]); !IsPending(&got) {
				t.Fatalf("after the failed act the proposal is %+v, want pending again", got)
			}
			listed, total, _, err := q.List(ctx, "r", p, Cursor{}, 50, nil)
			if err != nil {
				t.Fatal(err)
			}
			if total != 1 || len(listed) != 1 || listed[0].ID != ids[0] || listed[0].Proposer != "agent" || listed[0].Identity != "alice" {
				t.Errorf("the restored proposal %s: listed %+v (pending %d), want it listed as proposed", ids[0], listed, total)
			}
		})
	}
}

// TestAnExpiredProposalIsNotApproved: a proposal past its expires_at
// would become an active record no recall finds, in place of the record
// it restates; its approval is a conflict naming the expiry, and the
// proposal stays pending, to be rejected.
func TestAnExpiredProposalIsNotApproved(t *testing.T) {
	for _, queued := range []bool{true, false} {
		t.Run(fmt.Sprintf("through the queue %v", queued), func(t *testing.T) {
			q := newQueue(t)
			s := &listingStore{store: newStore(append(allCaps, sdk.CapForget)...), q: q}
			rec := fact(sdk.RealmScope, "deploys")
			rec.ExpiresAt = time.Now().Add(-time.Minute)
			ids, err := q.Propose(ctx, "r", s, []sdk.Record{rec}, Proposer{Token: "agent"})
			if err != nil {
				t.Fatal(err)
			}
			if queued {
				_, err = q.Approve(ctx, "r", ids[0], s)
			} else {
				_, err = Approve(ctx, "r", ids[0], s)
			}
			if !errors.Is(err, ErrExpired) || !errors.Is(err, sdk.ErrConflict) || !strings.Contains(err.Error(), "expired at") {
				t.Fatalf("approval of an expired proposal answered %v, want a conflict naming the expiry", err)
			}
			if got := s.get(t, ids[0]); !IsPending(&got) {
				t.Fatalf("after the refusal the proposal is %+v, want pending", got)
			}
			if _, found, err := q.Ledger.Lookup(ctx, "r", ids[0]); err != nil || !found {
				t.Fatalf("after the refusal the proposal is not noted (%v, %v)", found, err)
			}
			if err := q.Reject(ctx, "r", ids[0], s, nil); err != nil {
				t.Fatalf("the expired proposal's rejection answered %v", err)
			}
		})
	}
}

// deletingStore forgets the proposal when an approval looks for its
// target, as an application's DELETE /v1/records/{id} (which takes no
// claim) does when it lands between the approval's read of the proposal
// and its act. Its Recall answers target.
type deletingStore struct {
	*store
	q        *Queue
	target   sdk.Record
	proposal string
}

func (d *deletingStore) Forget(_ context.Context, _ string, ids []string) (int, error) {
	d.store.mu.Lock()
	defer d.store.mu.Unlock()
	n := 0
	for _, id := range ids {
		if _, ok := d.store.records[id]; ok {
			delete(d.store.records, id)
			n++
		}
	}
	return n, nil
}

func (d *deletingStore) Recall(ctx context.Context, _ sdk.RecallQuery) ([]sdk.Hit, error) {
	if _, err := d.Forget(ctx, "r", []string{d.proposal}); err != nil {
		return nil, err
	}
	if err := d.q.Forgotten(ctx, "r", []string{d.proposal}); err != nil {
		return nil, err
	}
	if d.target.ID == "" {
		return nil, nil
	}
	return []sdk.Hit{{Record: d.target, Score: 1}}, nil
}

// TestAProposalDeletedDuringItsApprovalIsNotApproved: from an outside
// review. An application's DELETE of a pending proposal answered 204 while
// an approval of it, which had read it pending a moment before, went on
// to supersede the record it restates with its content: both decisions
// acted, and the deleted proposal became the active record. An approval
// over a record now finds the proposal gone when it drops it, and
// approves nothing.
func TestAProposalDeletedDuringItsApprovalIsNotApproved(t *testing.T) {
	cases := []struct {
		name   string
		target bool
	}{
		{"over a restated record", true},
		{"of a new record", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t)
			base := newStore(append(allCaps, sdk.CapForget, sdk.CapWrite)...)
			var target sdk.Record
			if tc.target {
				target = fact(sdk.RealmScope, "deploys")
				target.Body = "the old way"
				target.ID, target.Status = "target1", sdk.StatusActive
				base.records[target.ID] = target
			}
			ids, err := q.Propose(ctx, "r", base, []sdk.Record{fact(sdk.RealmScope, "deploys")}, Proposer{Token: "agent"})
			if err != nil {
				t.Fatal(err)
			}
			p := &deletingStore{store: base, q: q, target: target, proposal: ids[0]}
			newID, err := q.Approve(ctx, "r", ids[0], p)
			if !errors.Is(err, sdk.ErrNotFound) {
				t.Errorf("the approval of a proposal deleted meanwhile answered %q, %v; want not found", newID, err)
			}
			base.mu.Lock()
			defer base.mu.Unlock()
			for id, r := range base.records {
				if r.Body == "body of deploys" {
					t.Errorf("record %s (%s) holds the deleted proposal's content", id, r.Status)
				}
			}
			if tc.target && base.records[target.ID].Status != sdk.StatusActive {
				t.Errorf("the restated record is %s, want active", base.records[target.ID].Status)
			}
			// Gone, it holds no place in its proposer's bound.
			if e, found, err := q.Ledger.Lookup(ctx, "r", ids[0]); err != nil || found {
				t.Errorf("the ledger still notes the deleted proposal: %+v (%v)", e, err)
			}
		})
	}
}
