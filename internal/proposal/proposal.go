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
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// Tag marks a pending proposal.
const Tag = "memhost:proposal"

// isTag reports whether t is Tag as sdk.Record.HasTag compares tags.
func isTag(t string) bool { return strings.EqualFold(t, Tag) }

// CheckWriteTags refuses a write's tags that hold Tag in any case: memhost
// alone marks a pending proposal. A record carrying it is hidden from the
// lookup that makes an approval supersede what it restates, and from
// every filter that leaves proposals out. Imports keep records as they
// were and are not checked.
func CheckWriteTags(tags []string) error {
	for i, t := range tags {
		if isTag(t) {
			return &sdk.FieldError{Field: fmt.Sprintf("tags[%d]", i), Problem: fmt.Sprintf("%q marks a pending proposal, which memhost alone sets", t), Err: sdk.ErrInvalid}
		}
	}
	return nil
}

// ErrNotPending refuses to approve a record that is no pending proposal.
var ErrNotPending = errors.New("not a pending proposal")

// Shared reports whether scope is read by more than its own identity, so
// an agent's write to it is a proposal.
func Shared(scope sdk.Scope) bool { return scope.Class() != sdk.ScopeIdentity }

// Store writes records as proposals through the provider's archive
// capability (the one write path that may set a status) and answers
// their ids. A record whose content its scope holds already, in an active
// record or a pending proposal, is not stored again: the holder's id is
// answered in its place, as a write of held content answers it. Store
// looks for a pending holder in the proposals of the records it is given
// only; a queue looks in its whole ledger.
func Store(ctx context.Context, realm string, p sdk.Provider, records []sdk.Record) ([]string, error) {
	ids, _, err := storeProposals(ctx, realm, p, records, nil)
	return ids, err
}

// pendingIDs lists the ids of a realm's pending proposals.
type pendingIDs func(ctx context.Context) ([]string, error)

// storeProposals is Store; it also answers which records it stored, the
// others being answered with the record holding their content. Once the
// import is done, an error comes with the records stored (a failed
// search for a holder after it): the caller's notes of those must stay.
func storeProposals(ctx context.Context, realm string, p sdk.Provider, records []sdk.Record, pending pendingIDs) ([]string, []bool, error) {
	hp := host.ProviderOf(p)
	a, ok := hp.Archiver()
	if !ok {
		return nil, nil, fmt.Errorf("the provider of realm %q cannot hold an agent's proposals for shared scopes (it lacks the archive capability): %w", realm, sdk.ErrUnsupported)
	}
	now := time.Now()
	recs := slices.Clone(records)
	ids := make([]string, len(recs))
	stored := make([]bool, len(recs))
	for i := range recs {
		r := &recs[i]
		if err := r.Prepare(realm, now); err != nil {
			return nil, nil, fmt.Errorf("records[%d].%w", i, err)
		}
		r.Status = sdk.StatusQuarantined
		r.Tags = append(slices.DeleteFunc(slices.Clone(r.Tags), isTag), Tag)
		ids[i] = r.ID
	}
	getter, canGet := hp.Getter()
	if !canGet {
		// Without fetch nothing can tell a stored proposal from a skipped
		// one; such a provider cannot approve proposals either.
		if _, err := a.Import(ctx, realm, recs); err != nil {
			return nil, nil, err
		}
		for i := range stored {
			stored[i] = true
		}
		return ids, stored, nil
	}
	// An id given by the caller may name a stored record: only the same
	// content, held live, is that record's to answer.
	known, err := getByID(ctx, realm, getter, ids)
	if err != nil {
		return nil, nil, err
	}
	var fresh []sdk.Record
	for i := range recs {
		if old, ok := known[ids[i]]; ok {
			if !holds(&old, &recs[i], now) {
				return nil, nil, fmt.Errorf("records[%d]: id %q already names another record in realm %q: %w", i, ids[i], realm, sdk.ErrConflict)
			}
			continue
		}
		stored[i] = true
		fresh = append(fresh, recs[i])
	}
	if len(fresh) == 0 {
		return ids, stored, nil
	}
	res, err := a.Import(ctx, realm, fresh)
	if err != nil {
		return nil, nil, err
	}
	if res.Skipped == 0 {
		return ids, stored, nil
	}
	// The provider skipped a record whose content its scope holds live:
	// answer the holder, never an id that names nothing. A holder that
	// has expired stays so (a proposal revives nothing before review), and
	// recall does not find it: the write is refused.
	after, err := getByID(ctx, realm, getter, ids)
	if err != nil {
		return nil, stored, err
	}
	var held []int
	for i := range recs {
		if r, ok := after[ids[i]]; stored[i] && (!ok || !IsPending(&r) || r.ContentHash != recs[i].ContentHash || r.Scope != recs[i].Scope) {
			held = append(held, i)
			stored[i] = false
		}
	}
	if len(held) == 0 {
		return ids, stored, nil
	}
	if pending == nil {
		pending = func(context.Context) ([]string, error) { return ids, nil }
	}
	pend, err := pending(ctx)
	if err != nil {
		return nil, stored, err
	}
	proposals, err := getByID(ctx, realm, getter, pend)
	if err != nil {
		return nil, stored, err
	}
	for _, i := range held {
		id, found, err := holder(ctx, realm, p, proposals, &recs[i], now)
		if err != nil {
			return nil, stored, fmt.Errorf("records[%d]: find the record holding its content: %w", i, err)
		}
		if !found {
			return nil, stored, fmt.Errorf("records[%d]: scope %s holds its content already, in a record recall does not find (an expired one, or one whose title and body are common words alone); nothing was proposed: %w", i, recs[i].Scope, sdk.ErrConflict)
		}
		ids[i] = id
	}
	return ids, stored, nil
}

// holds reports whether stored holds r's content live in r's scope: a
// recallable record or a pending proposal.
func holds(stored, r *sdk.Record, now time.Time) bool {
	return stored.Scope == r.Scope && stored.ContentHash == r.ContentHash && (stored.Recallable(now) || IsPending(stored))
}

// holder finds the record holding r's content: a pending proposal among
// proposals, else an active record of r's scope found by the realm's
// recall.
func holder(ctx context.Context, realm string, p sdk.Provider, proposals map[string]sdk.Record, r *sdk.Record, now time.Time) (string, bool, error) {
	best := ""
	for id, prop := range proposals {
		if IsPending(&prop) && holds(&prop, r, now) && (best == "" || id < best) {
			best = id
		}
	}
	if best != "" {
		return best, true, nil
	}
	// By its title, then by its body's first words (they find it as well
	// as all of them): a title of common words ("a", "the note") may
	// match no record, or rank the holder past the limit.
	body := strings.ToValidUTF8(r.Body[:min(len(r.Body), 4096)], "")
	for _, query := range []string{r.Title, body} {
		if strings.TrimSpace(query) == "" {
			continue
		}
		hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: query, Scopes: []sdk.Scope{r.Scope}, Limit: holderRecallLimit})
		if err != nil {
			return "", false, err
		}
		for _, h := range hits {
			if ofRealm(&h.Record, realm) && holds(&h.Record, r, now) {
				return h.Record.ID, true, nil
			}
		}
	}
	return "", false, nil
}

// holderRecallLimit bounds the hits searched for an active holder: the
// query is the holder's own title, so it ranks near the top.
const holderRecallLimit = 50

// getByID fetches ids, in chunks a provider takes, by id.
func getByID(ctx context.Context, realm string, getter sdk.RecordGetter, ids []string) (map[string]sdk.Record, error) {
	out := make(map[string]sdk.Record, len(ids))
	for chunk := range slices.Chunk(ids, sdk.MaxBatch) {
		recs, err := getter.Get(ctx, realm, chunk)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			out[r.ID] = r
		}
	}
	return out, nil
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
	if err := checkUnexpired(&old, time.Now()); err != nil {
		return "", err
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

// ErrTargetChanged refuses an approval whose reviewer was shown another
// record to replace (or none) than the one the proposal replaces now.
var ErrTargetChanged = errors.New("the record it replaces changed since it was shown")

// CheckTarget refuses the approval of proposal id when shown, the target
// its reviewer saw ("" for none), is not current, its target now.
func CheckTarget(id string, shown *string, current string) error {
	if shown == nil || *shown == current {
		return nil
	}
	// Each side in words: "not no record as shown" read as a double
	// negative.
	now := fmt.Sprintf("would now replace record %q", current)
	if current == "" {
		now = "would now add a record, replacing none"
	}
	was := fmt.Sprintf("record %q", *shown)
	if *shown == "" {
		was = "none"
	}
	return fmt.Errorf("proposal %q %s, where it was shown replacing %s; nothing was approved: list the proposals again and review it anew: %w", id, now, was, ErrTargetChanged)
}

// ErrExpired refuses to approve a proposal past its expires_at.
var ErrExpired = errors.New("the proposal has expired")

// checkUnexpired refuses the approval of r once it has expired: it would
// become an active record no recall finds, and supersede (so hide) any
// record it restates.
func checkUnexpired(r *sdk.Record, now time.Time) error {
	if r.ExpiresAt.IsZero() || now.Before(r.ExpiresAt) {
		return nil
	}
	return fmt.Errorf("proposal %q expired at %s; approved, it would be a record no recall finds, in place of any record it restates. Reject it, or have the agent propose it again: %w: %w",
		r.ID, r.ExpiresAt.Format(time.RFC3339), ErrExpired, sdk.ErrConflict)
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
	var out []string
	err := inPlace(ctx, realm, hp, forget, stored, func() (err error) {
		out, err = w.Remember(ctx, realm, records)
		return err
	})
	return out, err
}

// inPlace forgets the pending proposals stored, then runs write. When
// either fails, every proposal is put back through the provider's import,
// if it has one (a forget that failed partway took some; one still stored
// is skipped by its id).
func inPlace(ctx context.Context, realm string, hp *host.Provider, forget sdk.RecordForgetter, stored []sdk.Record, write func() error) error {
	ids := make([]string, len(stored))
	for i, r := range stored {
		ids[i] = r.ID
	}
	_, err := forget.Forget(ctx, realm, ids)
	if err == nil {
		err = write()
	}
	if err == nil {
		return nil
	}
	if a, ok := hp.Archiver(); ok {
		if _, rerr := a.Import(context.WithoutCancel(ctx), realm, stored); rerr != nil {
			return fmt.Errorf("%w (and restoring the proposals %v failed: %w)", err, ids, rerr)
		}
	}
	return err
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
