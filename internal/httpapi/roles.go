package httpapi

import (
	"context"
	"net/http"

	hclog "github.com/hashicorp/go-hclog"

	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/sdk"
)

// ProposalTag marks a pending proposal (see internal/proposal).
const ProposalTag = proposal.Tag

// proposedMessage tells an agent what became of its write.
const proposedMessage = "an agent's writes to mob, operator or realm scope are proposals: they are not recalled or injected until an application approves them (POST /v1/records/{id}/approve)"

// propose stores an agent's writes to shared scopes as proposals.
func (s *Server) propose(ctx context.Context, c caller, realm string, p sdk.Provider, records []sdk.Record, w http.ResponseWriter) error {
	ids, err := s.storeProposals(ctx, c, realm, p, records, w)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, map[string]any{"ids": ids, "status": "proposed", "message": proposedMessage})
}

// handleApprove turns a proposal into an active record (application
// callers only).
func (s *Server) handleApprove(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	if err := c.requireApplication("approve proposals"); err != nil {
		return err
	}
	realm, id, p, err := s.recordTarget(c, r)
	if err != nil {
		return err
	}
	shown, err := shownTarget(r)
	if err != nil {
		return err
	}
	if err := s.touchRecord(ctx, c, realm, id, p); err != nil {
		return err
	}
	proposer := s.proposerOf(ctx, realm, id)
	newID, err := s.approve(ctx, realm, id, p, shown)
	if err != nil {
		return err
	}
	hclog.FromContext(ctx).Info("proposal approved", "realm", realm, "proposal", id, "record", newID, "proposer", proposer, "token", c.name())
	return writeJSON(w, http.StatusOK, map[string]any{"id": newID, "approved": id, "status": "active"})
}

// shownTarget reads approve's ?target=, the record the reviewer saw the
// proposal replace ("" for none): nil when it is not given.
func shownTarget(r *http.Request) (*string, error) {
	q := r.URL.Query()
	if !q.Has("target") {
		return nil, nil
	}
	target := q.Get("target")
	if target != "" {
		if err := sdk.ValidateID(target); err != nil {
			return nil, asField("target", err)
		}
	}
	return &target, nil
}
