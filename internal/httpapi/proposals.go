package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// codeTooManyProposals answers a proposal beyond its proposer's bound
// (429, with Retry-After).
const codeTooManyProposals = "too_many_proposals"

// Proposal listing page sizes.
const (
	DefaultProposalPage = 50
	MaxProposalPage     = 500
)

// storeProposals stores an agent's proposals: noted, bounded and
// attributed through the queue when the server has one.
func (s *Server) storeProposals(ctx context.Context, c caller, realm string, p sdk.Provider, records []sdk.Record, w http.ResponseWriter) ([]string, error) {
	if s.opts.Proposals == nil {
		return proposal.Store(ctx, realm, p, records)
	}
	ids, err := s.opts.Proposals.Propose(ctx, realm, p, records, proposal.Proposer{Token: c.name()})
	if errors.Is(err, proposal.ErrTooMany) {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(s.opts.ProposalRetryAfter.Seconds()))))
	}
	return ids, err
}

// restateProposals checks ids, the provider's answer to a write of
// records, for pending proposals: a provider answers a write of content a
// pending proposal holds with the proposal's id, so an agent could keep an
// application's write of a shared record out of recall by proposing its
// content first. Such a write is stored again in the proposals' place
// (proposal.Restate) and its new ids answered. Only shared scopes hold
// proposals, so only their records are looked at.
func (s *Server) restateProposals(ctx context.Context, realm string, p sdk.Provider, records []sdk.Record, ids []string) ([]string, error) {
	var shared []string
	asked := map[string]bool{} // a batch may hold a content twice: one id, asked once
	for i := range records {
		if i < len(ids) && proposal.Shared(records[i].Scope) && !asked[ids[i]] {
			asked[ids[i]] = true
			shared = append(shared, ids[i])
		}
	}
	getter, ok := host.ProviderOf(p).Getter()
	if len(shared) == 0 || !ok {
		return ids, nil
	}
	stored, err := getter.Get(ctx, realm, shared)
	if err != nil {
		return nil, err
	}
	stored = slices.DeleteFunc(stored, func(r sdk.Record) bool { return !proposal.IsPending(&r) })
	if len(stored) == 0 {
		return ids, nil
	}
	if s.opts.Proposals != nil {
		return s.opts.Proposals.Restate(ctx, realm, p, records, stored)
	}
	return proposal.Restate(ctx, realm, p, records, stored)
}

// name is the caller's token name ("" without tokens).
func (c caller) name() string {
	if c.token == nil {
		return ""
	}
	return c.token.Name
}

// codeTargetChanged answers an approval whose ?target= is no longer the
// record the proposal would replace (409); the message names the one it
// would replace now.
const codeTargetChanged = "target_changed"

// approve approves a proposal through the queue when there is one, if
// shown (when set) is still its target.
func (s *Server) approve(ctx context.Context, realm, id string, p sdk.Provider, shown *string) (string, error) {
	if s.opts.Proposals == nil {
		// Without a queue an approval replaces no record.
		if err := proposal.CheckTarget(id, shown, ""); err != nil {
			return "", err
		}
		return proposal.Approve(ctx, realm, id, p)
	}
	return s.opts.Proposals.ApproveIf(ctx, realm, id, p, shown)
}

// handleReject forgets a pending proposal (application callers only).
func (s *Server) handleReject(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	if err := c.requireApplication("reject proposals"); err != nil {
		return err
	}
	realm, id, p, err := s.recordTarget(c, r)
	if err != nil {
		return err
	}
	if err := s.touchRecord(ctx, c, realm, id, p); err != nil {
		return err
	}
	queue, err := s.queue()
	if err != nil {
		return err
	}
	// The title is blanked in the traces first (see forgetTraces), once
	// the review found the proposal pending: a rejection refused changes
	// nothing.
	proposer := s.proposerOf(ctx, realm, id)
	if err := queue.Reject(ctx, realm, id, p, func() error { return s.forgetTraces(ctx, realm, id) }); err != nil {
		return err
	}
	hclog.FromContext(ctx).Info("proposal rejected", "realm", realm, "proposal", id, "proposer", proposer, "token", c.name())
	return writeJSON(w, http.StatusOK, map[string]any{"rejected": id, "status": "rejected"})
}

// proposerOf answers the token that left proposal id, as the queue notes
// it, for the log line of its review: the review drops that note and the
// proposal, so the line is the one place an operator finds who proposed
// what and who decided it. Unknown ("") when the queue cannot say.
func (s *Server) proposerOf(ctx context.Context, realm, id string) string {
	if s.opts.Proposals == nil {
		return ""
	}
	e, found, err := s.opts.Proposals.Ledger.Lookup(ctx, realm, id)
	if err != nil || !found || e.Proposer == proposal.ImportedProposer {
		return ""
	}
	return e.Proposer
}

// queue answers the proposal queue, or an error when the host keeps
// none (a server built without a state database).
func (s *Server) queue() (*proposal.Queue, error) {
	if s.opts.Proposals == nil {
		return nil, fmt.Errorf("this host keeps no proposal queue: %w", sdk.ErrUnsupported)
	}
	return s.opts.Proposals, nil
}

// handleListProposals lists a realm's pending proposals the caller may
// touch, oldest first, each with who proposed it and its diff against the
// record it would supersede (application callers only).
func (s *Server) handleListProposals(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	if err := c.requireApplication("list proposals"); err != nil {
		return err
	}
	q := r.URL.Query()
	realm, p, err := s.provider(c, q.Get("realm"))
	if err != nil {
		return err
	}
	limit, err := pageLimit(q.Get("limit"), DefaultProposalPage, MaxProposalPage)
	if err != nil {
		return err
	}
	after, err := proposal.ParseCursor(q.Get("after"))
	if err != nil {
		return &sdk.FieldError{Field: "after", Problem: err.Error(), Err: sdk.ErrInvalid}
	}
	queue, err := s.queue()
	if err != nil {
		return err
	}
	// A bound token sees only what it may touch by id (GET, approve,
	// reject): another identity's own-scope proposals (an import keeps
	// records as they were) and those of mobs and operators its
	// identities do not read are left out, and out of the count.
	var visible proposal.Visible
	if c.bound() {
		view, err := s.readView(ctx, c, realm)
		if err != nil {
			return err
		}
		visible = func(r *sdk.Record) bool { return !view.hides(r.Scope) }
	}
	items, total, next, err := queue.List(ctx, realm, p, after, limit, visible)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"realm": realm, "proposals": items, "pending": total, "next": next.String()})
}

// pageLimit parses a limit query parameter.
func pageLimit(v string, def, maxLimit int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	// Digits only: Atoi also takes "+5" and "-0".
	if err != nil || v[0] < '0' || v[0] > '9' || n < 1 || n > maxLimit {
		return 0, fieldRefusal("limit", sdk.ErrInvalid, "%q is not a number in 1..%d", v, maxLimit)
	}
	return n, nil
}
