package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk"
)

// ProposalTag marks a record an agent wrote to a shared scope. The record
// is stored quarantined, so no provider recalls, lists or injects it,
// until an application approves it.
const ProposalTag = "memhost:proposal"

// shared reports whether scope is read by more than its own identity.
func shared(scope sdk.Scope) bool { return scope.Class() != sdk.ScopeIdentity }

// propose stores an agent's writes to shared scopes as proposals: full
// records, quarantined and tagged, through the provider's archive
// capability (the one write path that may set a status).
func (s *Server) propose(ctx context.Context, realm string, p sdk.Provider, records []sdk.Record, w http.ResponseWriter) error {
	a, ok := p.(sdk.Archiver)
	if !ok || !sdk.Supports(p, sdk.CapArchive) {
		return fmt.Errorf("the provider of realm %q cannot hold an agent's proposals for shared scopes (it lacks the archive capability): %w", realm, sdk.ErrUnsupported)
	}
	now := time.Now()
	ids := make([]string, len(records))
	for i := range records {
		r := &records[i]
		if err := r.Prepare(realm, now); err != nil {
			return fmt.Errorf("records[%d].%w", i, err)
		}
		r.Status = sdk.StatusQuarantined
		if !r.HasTag(ProposalTag) {
			r.Tags = append(slices.Clone(r.Tags), ProposalTag)
		}
		ids[i] = r.ID
	}
	if _, err := a.Import(ctx, realm, records); err != nil {
		return err
	}
	writeJSON(w, http.StatusAccepted, map[string]any{
		"ids": ids, "status": "proposed",
		"message": "an agent's writes to mob, operator or realm scope are proposals: they are not recalled or injected until an application approves them (POST /v1/records/{id}/approve)",
	})
	return nil
}

// handleApprove turns a proposal into an active record. The proposal is
// superseded by its approved copy in one provider call, so the approved
// record has a new id (answered) and the proposal stays as history.
func (s *Server) handleApprove(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	if err := c.requireApplication("approvals"); err != nil {
		return err
	}
	realm, id, p, err := s.recordTarget(c, r)
	if err != nil {
		return err
	}
	getter, ok := p.(sdk.RecordGetter)
	sup, ok2 := p.(sdk.Superseder)
	if !ok || !ok2 || !sdk.Supports(p, sdk.CapFetch) || !sdk.Supports(p, sdk.CapSupersede) {
		return fmt.Errorf("the provider of realm %q cannot approve proposals (it needs the fetch and supersede capabilities): %w", realm, sdk.ErrUnsupported)
	}
	recs, err := getter.Get(ctx, realm, []string{id})
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return fmt.Errorf("record %q not found in realm %q: %w", id, realm, sdk.ErrNotFound)
	}
	old := recs[0]
	if old.Status != sdk.StatusQuarantined || !old.HasTag(ProposalTag) {
		return fmt.Errorf("record %q is not a pending proposal (status %s): %w", id, old.Status, sdk.ErrConflict)
	}
	rep := sdk.Record{
		Scope: old.Scope, Kind: old.Kind, Title: old.Title, Description: old.Description, Body: old.Body,
		Trust: old.Trust, ExpiresAt: old.ExpiresAt,
		Tags: slices.DeleteFunc(slices.Clone(old.Tags), func(t string) bool { return t == ProposalTag }),
	}
	newID, err := sup.Supersede(ctx, realm, id, rep)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": newID, "approved": id, "status": "active"})
	return nil
}
