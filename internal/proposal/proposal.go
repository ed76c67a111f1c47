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
// proposal stays as history (superseded).
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
	if old.Status != sdk.StatusQuarantined || !old.HasTag(Tag) {
		return "", fmt.Errorf("record %q (status %s) is %w: %w", id, old.Status, ErrNotPending, sdk.ErrConflict)
	}
	rep := sdk.Record{
		Scope: old.Scope, Kind: old.Kind, Title: old.Title, Description: old.Description, Body: old.Body,
		Trust: old.Trust, ExpiresAt: old.ExpiresAt,
		Tags: slices.DeleteFunc(slices.Clone(old.Tags), func(t string) bool { return t == Tag }),
	}
	return sup.Supersede(ctx, realm, id, rep)
}
