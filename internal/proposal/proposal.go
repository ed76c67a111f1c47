// Package proposal keeps an agent's writes to shared scopes (mob,
// operator, realm) as proposals (DESIGN 5.3): stored quarantined and
// tagged, so no provider recalls, lists or injects them, until an
// application approves one. The HTTP API and the MCP tools share it.
package proposal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// Tag marks a pending proposal.
const Tag = "memhost:proposal"

// ErrNotPending refuses to approve a record that is no pending proposal.
var ErrNotPending = errors.New("not a pending proposal")

// Shared reports whether scope is read by more than its own identity, so
// an agent's write to it is a proposal.
func Shared(scope sdk.Scope) bool { return scope.Class() != sdk.ScopeIdentity }

// Store writes records as proposals through the provider's archive
// capability (the one write path that may set a status) and answers
// their ids.
func Store(ctx context.Context, realm string, p sdk.Provider, records []sdk.Record) ([]string, error) {
	a, ok := host.ProviderOf(p).Archiver()
	if !ok {
		return nil, fmt.Errorf("the provider of realm %q cannot hold an agent's proposals for shared scopes (it lacks the archive capability): %w", realm, sdk.ErrUnsupported)
	}
	now := time.Now()
	recs := slices.Clone(records)
	ids := make([]string, len(recs))
	for i := range recs {
		r := &recs[i]
		if err := r.Prepare(realm, now); err != nil {
			return nil, fmt.Errorf("records[%d].%w", i, err)
		}
		r.Status = sdk.StatusQuarantined
		if !r.HasTag(Tag) {
			r.Tags = append(slices.Clone(r.Tags), Tag)
		}
		ids[i] = r.ID
	}
	if _, err := a.Import(ctx, realm, recs); err != nil {
		return nil, err
	}
	return ids, nil
}

// Approve supersedes the pending proposal id with an active copy without
// the tag, in one provider call, and answers the active record's id. The
// proposal stays as history (superseded). A provider that answers the
// copy with the proposal's own id (the copy's content is the proposal's,
// and bleve answers a write of content its scope holds with the holder,
// changing nothing) has the proposal dropped and the copy written instead,
// as Restate does.
func Approve(ctx context.Context, realm, id string, p sdk.Provider) (string, error) {
	hp := host.ProviderOf(p)
	getter, ok := hp.Getter()
	sup, ok2 := hp.Superseder()
	if !ok || !ok2 {
		return "", fmt.Errorf("the provider of realm %q cannot approve proposals (it needs the fetch and supersede capabilities): %w", realm, sdk.ErrUnsupported)
	}
	recs, err := getter.Get(ctx, realm, []string{id})
	if err != nil {
		return "", err
	}
	if len(recs) == 0 {
		return "", fmt.Errorf("record %q not found in realm %q: %w", id, realm, sdk.ErrNotFound)
	}
	old := recs[0]
	if !IsPending(&old) {
		return "", fmt.Errorf("record %q (status %s) is %w: %w", id, old.Status, ErrNotPending, sdk.ErrConflict)
	}
	copied := approvedCopy(old)
	newID, err := sup.Supersede(ctx, realm, id, copied)
	if err != nil || newID != id {
		return newID, err
	}
	ids, err := Restate(ctx, realm, p, []sdk.Record{copied}, []sdk.Record{old})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// IsPending reports whether r is a pending proposal: quarantined and
// tagged. Nothing else stores a record quarantined with the tag (an
// import aside, which takes records as they were).
func IsPending(r *sdk.Record) bool { return r.Status == sdk.StatusQuarantined && r.HasTag(Tag) }

// Restate writes records in place of stored, pending proposals holding
// their content, and answers the records' ids: a provider answers a write
// of content its scope holds, a proposal's included, with the holder's id
// (so an application's own write of a shared record an agent proposed
// first would be answered with the proposal, never recalled). The
// proposals are dropped first, as an approval over a target drops its
// proposal, then records written in one call, all or nothing; if that
// fails the proposals are put back.
func Restate(ctx context.Context, realm string, p sdk.Provider, records []sdk.Record, stored []sdk.Record) ([]string, error) {
	hp := host.ProviderOf(p)
	forget, ok := hp.Forgetter()
	w, ok2 := hp.Writer()
	if !ok || !ok2 {
		return nil, fmt.Errorf("the provider of realm %q cannot put a record in place of a pending proposal of the same content (it needs the forget and write capabilities): %w", realm, sdk.ErrUnsupported)
	}
	ids := make([]string, len(stored))
	for i, r := range stored {
		ids[i] = r.ID
	}
	if _, err := forget.Forget(ctx, realm, ids); err != nil {
		return nil, err
	}
	out, err := w.Remember(ctx, realm, records)
	if err != nil {
		if a, ok := hp.Archiver(); ok {
			if _, rerr := a.Import(context.WithoutCancel(ctx), realm, stored); rerr != nil {
				return nil, fmt.Errorf("%w (and restoring the proposals %v failed: %w)", err, ids, rerr)
			}
		}
		return nil, err
	}
	return out, nil
}

// ErrAgentForget refuses an agent the deletion of a record it could only
// have proposed.
var ErrAgentForget = errors.New("an agent may forget only records of an identity scope; a mob, operator or realm record is forgotten by an application")

// CheckAgentForget is the one rule for an agent's forget, on every
// surface: the record must be in an identity scope, and in own's when the
// caller acts as one known identity (own is "" for an agent token that
// serves many identities).
func CheckAgentForget(scope sdk.Scope, own string) error {
	if Shared(scope) {
		return fmt.Errorf("record in scope %s: %w: %w", scope, ErrAgentForget, sdk.ErrPermission)
	}
	if own != "" && scope != sdk.IdentityScope(own) {
		return fmt.Errorf("record in scope %s: an agent acting as %s may forget only its own records: %w", scope, own, sdk.ErrPermission)
	}
	return nil
}

// MaxAgentTrust is the most an agent's own word can be trusted: operator
// and application trust come only from an application token or from an
// application's approval.
const MaxAgentTrust = sdk.TrustAgentVerified

// CapTrust lowers the trust an agent asked for to MaxAgentTrust, in place;
// it answers whether it lowered any. Every agent write path (HTTP, MCP,
// proposals) applies it.
func CapTrust(records []sdk.Record) bool {
	capped := false
	for i := range records {
		if records[i].Trust.Level() > MaxAgentTrust.Level() {
			records[i].Trust = MaxAgentTrust
			capped = true
		}
	}
	return capped
}
