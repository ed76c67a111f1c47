package proposal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// Proposer names who leaves a proposal: the agent token and, when the
// surface knows it, the identity acting.
type Proposer struct {
	Token    string
	Identity string
}

// Queue is the reviewable side of proposals: every pending one noted in
// a ledger, bounded per proposer and realm.
type Queue struct {
	Ledger Ledger
	// MaxPending bounds one proposer's pending proposals in one realm.
	MaxPending int
	// clock stands in for time.Now in the reaping of entries (tests).
	clock func() time.Time
}

// ProposedBy reports whether the pending proposal id of realm was left by
// token, as the ledger notes. Another token's pending proposal is no
// agent's to read or to tell from a missing id: a nil queue notes none.
func (q *Queue) ProposedBy(ctx context.Context, realm, id, token string) (bool, error) {
	if q == nil {
		return false, nil
	}
	e, found, err := q.Ledger.Lookup(ctx, realm, id)
	return found && e.Proposer == token, err
}

func (q *Queue) now() time.Time {
	if q.clock != nil {
		return q.clock()
	}
	return time.Now()
}

// Propose stores records as proposals of who, noting each in the ledger
// first, so a flood is refused (ErrTooMany) before the provider is
// touched.
func (q *Queue) Propose(ctx context.Context, realm string, p sdk.Provider, records []sdk.Record, who Proposer) ([]string, error) {
	if len(records) > q.MaxPending {
		// No review makes room for it: not a 429 to retry.
		return nil, &sdk.FieldError{Field: "records", Problem: fmt.Sprintf("%d proposals in one request, more than the %d one proposer may have pending in a realm", len(records), q.MaxPending), Err: sdk.ErrTooLarge}
	}
	now := time.Now().UTC()
	recs := slices.Clone(records)
	entries := make([]Entry, len(recs))
	for i := range recs {
		if recs[i].ID == "" {
			recs[i].ID = sdk.NewRecordID(now)
		}
		entries[i] = Entry{Realm: realm, ID: recs[i].ID, Proposer: who.Token, Identity: who.Identity, CreatedAt: now}
	}
	err := q.Ledger.Add(ctx, entries, q.MaxPending)
	if errors.Is(err, ErrTooMany) {
		// Entries whose record is gone (forgotten, or purged once expired)
		// must not hold the bound: drop them and ask once more.
		if n, rerr := q.reapProposer(ctx, realm, p, who.Token); rerr == nil && n > 0 {
			err = q.Ledger.Add(ctx, entries, q.MaxPending)
		}
	}
	if err != nil {
		return nil, err
	}
	ids, stored, err := storeProposals(ctx, realm, p, recs, func(ctx context.Context) ([]string, error) { return q.pendingIDs(ctx, realm) })
	// A proposal not stored (the call failed, or its content was held
	// already and the holder answered) must not hold the bound. Add noted
	// every entry anew (it refuses an id already noted), so none of them
	// is another proposal's.
	var unused []string
	for i, e := range entries {
		if stored == nil || !stored[i] {
			unused = append(unused, e.ID)
		}
	}
	if len(unused) > 0 {
		if rerr := q.Ledger.Remove(context.WithoutCancel(ctx), realm, unused); rerr != nil {
			if err == nil {
				return nil, fmt.Errorf("releasing the place in the queue of proposals whose content was held already: %w", rerr)
			}
			return nil, fmt.Errorf("%w (and releasing their place in the queue failed: %w)", err, rerr)
		}
	}
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// reapProposer drops the entries of proposer in realm whose record is no
// pending proposal any more (Ledger.Reap spares those a proposal or a
// review under way may still store), and answers how many it found.
func (q *Queue) reapProposer(ctx context.Context, realm string, p sdk.Provider, proposer string) (int, error) {
	getter, ok := host.ProviderOf(p).Getter()
	if !ok {
		return 0, nil
	}
	entries, err := q.Ledger.Proposed(ctx, realm, proposer, q.MaxPending)
	if err != nil {
		return 0, err
	}
	// Only entries Reap would drop are worth a fetch: a flood at the bound
	// holds young ones, and each refusal must stay cheap.
	cutoff := q.now().Add(-ClaimTTL)
	var ids []string
	for _, e := range entries {
		if !e.CreatedAt.After(cutoff) {
			ids = append(ids, e.ID)
		}
	}
	if len(ids) == 0 {
		return 0, nil
	}
	byID, err := getByID(ctx, realm, getter, ids)
	if err != nil {
		return 0, err
	}
	var gone []string
	for _, id := range ids {
		if r, ok := byID[id]; !ok || !IsPending(&r) {
			gone = append(gone, id)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	return q.reap(ctx, realm, p, gone)
}

// reap drops the ledger entries of gone, proposals found missing from the
// store or no longer pending, and restores those a review that never
// ended held out of the store (Ledger.Hold). It answers how many entries
// it dropped.
func (q *Queue) reap(ctx context.Context, realm string, p sdk.Provider, gone []string) (int, error) {
	held, err := q.Ledger.Reap(ctx, realm, gone, q.now())
	if err != nil {
		return 0, err
	}
	dropped := len(gone) - len(held)
	for _, e := range held {
		// Claimed first, and read again under the claim: since Reap read
		// it, another listing may have restored it, or a review restored
		// it and rejected or approved it.
		claimed, noted, err := q.Ledger.Claim(ctx, realm, e.ID, q.now())
		if err != nil {
			return dropped, err
		}
		if !claimed {
			continue
		}
		cur, found, err := q.Ledger.Lookup(ctx, realm, e.ID)
		switch {
		case err != nil:
			return dropped, err
		case noted || !found:
			// Reviewed and gone: the claim noted it anew.
			err = q.Ledger.Remove(ctx, realm, []string{e.ID})
			dropped++
		case cur.Held == nil:
			err = q.Ledger.Release(ctx, cur) // restored meanwhile: pending
		default:
			var restored bool
			if restored, err = q.restore(ctx, realm, p, cur); err != nil {
				return dropped, err
			}
			if restored {
				err = q.Ledger.Release(ctx, cur)
			} else {
				err = q.Ledger.Remove(ctx, realm, []string{e.ID})
				dropped++
			}
		}
		if err != nil {
			return dropped, err
		}
	}
	return dropped, nil
}

// heldProposal is what a review holds in the ledger while the proposal
// is out of the store: an approval over a record (Target), or a write in
// place of the proposal (no Target: an approval the provider makes so, an
// application's write of its content).
type heldProposal struct {
	Record sdk.Record `json:"record"`
	Target string     `json:"target,omitempty"`
}

// heldOutOfStore reports whether the ledger holds proposal id of realm
// while the store does not have it; or may (the ledger unread).
func (q *Queue) heldOutOfStore(ctx context.Context, realm, id string, p sdk.Provider) bool {
	e, found, err := q.Ledger.Lookup(ctx, realm, id)
	if err != nil {
		return true
	}
	if !found || e.Held == nil {
		return false
	}
	// Unless the store answers it is there, it may not be.
	_, err = pendingRecord(ctx, realm, id, p)
	return err != nil && !errors.Is(err, ErrNotPending)
}

// hold keeps h in the ledger with its proposal's claim (Ledger.Hold).
func (q *Queue) hold(ctx context.Context, realm string, h heldProposal) error {
	data, err := json.Marshal(h)
	if err != nil {
		return err
	}
	return q.Ledger.Hold(ctx, realm, h.Record.ID, data)
}

// restore puts back in the store the proposal e holds, whose review died
// with it out of the store (the record of e.ID is not there), unless that
// review got as far as superseding its target: then the proposal is
// approved, and restore answers false.
func (q *Queue) restore(ctx context.Context, realm string, p sdk.Provider, e Entry) (bool, error) {
	var h heldProposal
	if err := json.Unmarshal(e.Held, &h); err != nil || h.Record.ID != e.ID {
		return false, fmt.Errorf("proposal %q: what its interrupted review held cannot be read (%v)", e.ID, err)
	}
	hp := host.ProviderOf(p)
	getter, ok := hp.Getter()
	archiver, ok2 := hp.Archiver()
	if !ok || !ok2 {
		return false, fmt.Errorf("proposal %q: the provider of realm %q cannot restore it: %w", e.ID, realm, sdk.ErrUnsupported)
	}
	ids := []string{e.ID}
	if h.Target != "" {
		ids = append(ids, h.Target)
	}
	byID, err := getByID(ctx, realm, getter, ids)
	if err != nil {
		return false, err
	}
	if r, ok := byID[e.ID]; ok {
		return IsPending(&r), nil // put back already (a failed review's own undo)
	}
	if r, ok := byID[h.Target]; h.Target != "" && (!ok || r.Status != sdk.StatusActive) {
		return false, nil // superseded: the approval went through
	}
	// Without a target the write that replaced the proposal holds its
	// content live if it went through (not every provider's import skips
	// such content: markdown stores it beside).
	if h.Target == "" {
		if _, live, err := holder(ctx, realm, p, nil, &h.Record, q.now()); err != nil || live {
			return false, err
		}
	}
	res, err := archiver.Import(ctx, realm, []sdk.Record{h.Record})
	if err != nil {
		return false, fmt.Errorf("proposal %q: restoring what its interrupted review held: %w", e.ID, err)
	}
	return res.Imported == 1, nil
}

// Forgotten drops the entries of ids, records of realm just forgotten:
// a forgotten proposal must not hold its proposer's place in the bound.
func (q *Queue) Forgotten(ctx context.Context, realm string, ids []string) error {
	return q.Ledger.Remove(ctx, realm, ids)
}

// NoteImported notes in the ledger the pending proposals among records,
// just imported into realm, that the provider now holds as such: an
// export carries a proposal's record but not the queue's note of it, and
// without one it is approvable by id yet listed by no review. The
// proposer is unknown (the note of the realm it came from is not
// exported), so it is noted as a claim notes an unlisted proposal: as
// ImportedProposer, counted against no agent's bound (the tokenless
// host's agent proposes as "", so "" would count against it). A proposal
// noted already (an import run twice) keeps its note.
func (q *Queue) NoteImported(ctx context.Context, realm string, p sdk.Provider, records []sdk.Record) error {
	var ids []string
	for i := range records {
		if IsPending(&records[i]) {
			ids = append(ids, records[i].ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	getter, ok := host.ProviderOf(p).Getter()
	if !ok {
		return nil // nothing lists proposals without a getter either
	}
	for chunk := range slices.Chunk(ids, sdk.MaxBatch) {
		stored, err := getter.Get(ctx, realm, chunk)
		if err != nil {
			return err
		}
		for _, r := range stored {
			// What the provider holds decides: an id it held already, as
			// something else, is no proposal of this import's.
			if !IsPending(&r) {
				continue
			}
			err := q.Ledger.Add(ctx, []Entry{{Realm: realm, ID: r.ID, Proposer: ImportedProposer, CreatedAt: r.CreatedAt}}, math.MaxInt)
			if err != nil && !errors.Is(err, sdk.ErrConflict) {
				return err
			}
		}
	}
	return nil
}

// pendingIDs lists every pending proposal of realm in the ledger.
func (q *Queue) pendingIDs(ctx context.Context, realm string) ([]string, error) {
	const page = 500
	var ids []string
	after := Cursor{}
	for {
		entries, _, err := q.Ledger.List(ctx, realm, after, page)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			ids = append(ids, e.ID)
		}
		if len(entries) < page {
			return ids, nil
		}
		after = After(entries[len(entries)-1])
	}
}

// Target answers the active record a proposal would supersede: one of
// its scope with the same kind and title, found by the realm's recall.
// Finding none, or a provider that cannot say, is no error: approving
// the proposal then adds a record. It is looked up when the proposal is
// reviewed and again when it is approved, so it is never stale.
func Target(ctx context.Context, realm string, p sdk.Provider, r *sdk.Record) (sdk.Record, bool) {
	title := strings.TrimSpace(r.Title)
	if title == "" {
		return sdk.Record{}, false
	}
	hits, err := p.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: title, Scopes: []sdk.Scope{r.Scope}, Limit: targetRecallLimit, ExcludeTags: []string{Tag}})
	if err != nil {
		return sdk.Record{}, false
	}
	for _, h := range hits {
		// A provider that ignores its query's realm answers another
		// realm's records: none is this proposal's to show or supersede.
		if h.Record.ID != r.ID && ofRealm(&h.Record, realm) && h.Record.Status == sdk.StatusActive && h.Record.Kind == r.Kind && strings.EqualFold(strings.TrimSpace(h.Record.Title), title) {
			return h.Record, true
		}
	}
	return sdk.Record{}, false
}

// targetRecallLimit bounds the hits searched for a proposal's target.
// Recall filters no kind, so same-scope records of the title's words (the
// same title as episodes, say) rank beside or above it: at 5, six of them
// hid the target, and approval added a second record of that title. A
// hundred is the most a client's own recall asks for; a listing asks once
// per proposal shown and an approval once, so it stays cheap.
const targetRecallLimit = 100

// ofRealm reports whether r, a provider's answer to a call in realm, is of
// that realm (a record that names none is taken to be).
func ofRealm(r *sdk.Record, realm string) bool {
	return r.Realm == "" || r.Realm == realm
}

// Pending is one proposal as a reviewer sees it.
type Pending struct {
	Entry
	// Imported marks a proposal no agent of this host left (Proposer is
	// then ""): an import, or a review of an unlisted id, noted it.
	Imported bool       `json:"imported,omitempty"`
	Record   sdk.Record `json:"record"`
	// Target and Supersedes are the active record approval would
	// replace, if any; Diff compares it with the proposal.
	Target     string      `json:"target,omitempty"`
	Supersedes *sdk.Record `json:"supersedes"`
	Diff       []DiffLine  `json:"diff"`
}

// Visible tells which stored records a caller may see; nil sees all.
type Visible func(*sdk.Record) bool

// List answers up to limit pending proposals of realm after the cursor
// after that visible shows, with their records, targets and diffs, how
// many visible ones are pending in all, and the next cursor ("" after
// the last page). Hidden proposals are skipped before the limit counts,
// so a page is full while more remain. An entry whose record is gone
// (forgotten meanwhile) is left out and dropped from the ledger, unless
// it may be a proposal still being stored or under review (Ledger.Reap).
func (q *Queue) List(ctx context.Context, realm string, p sdk.Provider, after Cursor, limit int, visible Visible) ([]Pending, int, Cursor, error) {
	getter, ok := host.ProviderOf(p).Getter()
	if !ok {
		return nil, 0, Cursor{}, fmt.Errorf("the provider of realm %q cannot fetch records by id, so proposals cannot be shown: %w", realm, sdk.ErrUnsupported)
	}
	var (
		out   []Pending
		gone  []string
		total = -1
		next  Cursor
	)
	// Gone entries are reaped at the end, in one call; the cursor is a
	// place, so one reaped (or reviewed) meanwhile does not stop a scan.
	for cursor := after; ; {
		entries, n, err := q.Ledger.List(ctx, realm, cursor, limit)
		if err != nil {
			return nil, 0, Cursor{}, err
		}
		if total < 0 {
			total = n
		}
		byID, err := getByID(ctx, realm, getter, entryIDs(entries))
		if err != nil {
			return nil, 0, Cursor{}, err
		}
		for _, e := range entries {
			cursor = After(e)
			rec, ok := byID[e.ID]
			if !ok || !IsPending(&rec) {
				gone = append(gone, e.ID)
				continue
			}
			if visible != nil && !visible(&rec) {
				continue
			}
			out = append(out, q.pending(ctx, realm, p, e, rec, visible))
			if len(out) == limit {
				break
			}
		}
		if len(out) == limit {
			next = After(out[len(out)-1].Entry)
			break
		}
		if len(entries) < limit {
			break
		}
	}
	if len(gone) > 0 {
		dropped, err := q.reap(ctx, realm, p, gone)
		if err != nil {
			return nil, 0, Cursor{}, err
		}
		total -= dropped
	}
	if visible != nil {
		var err error
		if total, err = q.countVisible(ctx, realm, getter, visible); err != nil {
			return nil, 0, Cursor{}, err
		}
	}
	if out == nil {
		out = []Pending{}
	}
	return out, total, next, nil
}

// pending is entry e, whose record is rec, as a reviewer sees it.
func (q *Queue) pending(ctx context.Context, realm string, p sdk.Provider, e Entry, rec sdk.Record, visible Visible) Pending {
	pd := Pending{Entry: e, Record: rec, Diff: []DiffLine{}}
	if e.Proposer == ImportedProposer {
		pd.Proposer, pd.Imported = "", true
	}
	if t, ok := Target(ctx, realm, p, &rec); ok && (visible == nil || visible(&t)) {
		pd.Target, pd.Supersedes = t.ID, &t
		pd.Diff = Diff(&t, &rec)
	}
	return pd
}

// countVisible counts the pending proposals of realm that visible shows:
// the ledger knows no scopes, so every one is fetched.
func (q *Queue) countVisible(ctx context.Context, realm string, getter sdk.RecordGetter, visible Visible) (int, error) {
	const page = 500
	n := 0
	for after := (Cursor{}); ; {
		entries, _, err := q.Ledger.List(ctx, realm, after, page)
		if err != nil {
			return 0, err
		}
		byID, err := getByID(ctx, realm, getter, entryIDs(entries))
		if err != nil {
			return 0, err
		}
		for _, r := range byID {
			if IsPending(&r) && visible(&r) {
				n++
			}
		}
		if len(entries) < page {
			return n, nil
		}
		after = After(entries[len(entries)-1])
	}
}

func entryIDs(entries []Entry) []string {
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.ID
	}
	return ids
}

// Approve approves the pending proposal id and answers the active
// record's id. A proposal that restates an active record (Target)
// replaces it, so the chain runs old record -> approved copy, and the
// proposal itself is dropped; any other becomes active as Approve makes
// it.
func (q *Queue) Approve(ctx context.Context, realm, id string, p sdk.Provider) (string, error) {
	return q.ApproveIf(ctx, realm, id, p, nil)
}

// ApproveIf is Approve if the proposal's target is still shown, the id
// of the record the reviewer saw it replace ("" for none: it added a
// record); nil approves whatever the target is now. The target is found
// when the approval runs, so without the check a record written in the
// target's place since the review would be superseded unseen. Another
// target changes nothing: the proposal stays pending and the error
// (ErrTargetChanged) names the one it has now.
func (q *Queue) ApproveIf(ctx context.Context, realm, id string, p sdk.Provider, shown *string) (string, error) {
	var newID string
	err := q.review(ctx, realm, id, p, func(prop sdk.Record) (err error) {
		hp := host.ProviderOf(p)
		sup, ok := hp.Superseder()
		forget, ok2 := hp.Forgetter()
		if err := checkUnexpired(&prop, time.Now()); err != nil {
			return err
		}
		target, found := Target(ctx, realm, p, &prop)
		if err := CheckTarget(id, shown, target.ID); err != nil {
			return err
		}
		if found && ok && ok2 {
			// The proposal leaves the store before the target is
			// superseded: the ledger holds it meanwhile, so a host dying
			// between the two loses nothing (restore).
			if err := q.hold(ctx, realm, heldProposal{Record: prop, Target: target.ID}); err != nil {
				return err
			}
			newID, err = approveOver(ctx, realm, prop, target.ID, sup, forget, p)
		} else {
			// A provider may approve by writing the approved copy in place
			// of the proposal (Restate): held meanwhile, as above.
			if err := q.hold(ctx, realm, heldProposal{Record: prop}); err != nil {
				return err
			}
			newID, err = Approve(ctx, realm, id, p)
		}
		return err
	})
	return newID, err
}

// review runs act on the pending proposal id under the ledger's claim on
// it, so that of an approval and a rejection (or two of either) on any
// hosts one acts and the other is a conflict: checked and acted on
// without the claim, a rejected proposal could still become active. The
// proposal leaves the ledger once act succeeds; a failed act releases
// the claim, and the proposal is pending again.
func (q *Queue) review(ctx context.Context, realm, id string, p sdk.Provider, act func(sdk.Record) error) error {
	claimed, noted, err := q.Ledger.Claim(ctx, realm, id, q.now())
	if err != nil {
		return err
	}
	if !claimed {
		return fmt.Errorf("proposal %q is being reviewed by another request; list the proposals again: %w", id, sdk.ErrConflict)
	}
	// The entry as proposed, for release to note again should a listing
	// have dropped it while the act had the proposal out of the store.
	entry, found, err := q.Ledger.Lookup(ctx, realm, id)
	if err != nil {
		// Unread, the entry may hold a proposal out of the store: the
		// claim stays until it expires rather than risk dropping that.
		return err
	}
	if !found {
		entry = Entry{Realm: realm, ID: id, Proposer: ImportedProposer, CreatedAt: time.Now().UTC()}
	}
	// release ends a failed review: the proposal is pending again, as it
	// was, so an id only the claim noted leaves the ledger. A proposal
	// the act took out of the store and could not put back stays held,
	// with the claim, for a reap to restore once the claim expires.
	release := func(err error) error {
		if q.heldOutOfStore(context.WithoutCancel(ctx), realm, id, p) {
			return fmt.Errorf("%w (proposal %q is out of the store; the ledger holds it, and a listing after %s puts it back)", err, id, ClaimTTL)
		}
		undo := func(ctx context.Context) error { return q.Ledger.Release(ctx, entry) }
		// Gone from the store and held nowhere (forgotten meanwhile: an
		// application's DELETE takes no claim), it must not be noted
		// again, holding its proposer's place.
		if _, gerr := pendingRecord(context.WithoutCancel(ctx), realm, id, p); noted || errors.Is(gerr, sdk.ErrNotFound) {
			undo = func(ctx context.Context) error { return q.Ledger.Remove(ctx, realm, []string{id}) }
		}
		if rerr := undo(context.WithoutCancel(ctx)); rerr != nil {
			return fmt.Errorf("%w (and releasing the proposal for another review failed: %w)", err, rerr)
		}
		return err
	}
	prop, err := pendingRecord(ctx, realm, id, p)
	if errors.Is(err, sdk.ErrNotFound) && entry.Held != nil {
		// A review of it died with the proposal out of the store.
		restored, rerr := q.restore(ctx, realm, p, entry)
		if rerr != nil {
			return release(rerr)
		}
		if restored {
			prop, err = pendingRecord(ctx, realm, id, p)
		}
	}
	if err == nil {
		if err = act(prop); err != nil {
			return release(err)
		}
	} else if !errors.Is(err, sdk.ErrNotFound) && !errors.Is(err, ErrNotPending) {
		return release(err)
	}
	// Reviewed, or no pending proposal (gone, or reviewed meanwhile): the
	// ledger notes nothing of it.
	if rerr := q.Ledger.Remove(context.WithoutCancel(ctx), realm, []string{id}); rerr != nil && err == nil {
		return rerr
	}
	return err
}

// approveOver drops the proposal, then supersedes target with its
// content. The drop comes first: the copy has the proposal's content
// hash, and a provider answers a write of a hash its scope holds with the
// holder's id. A failed supersede puts the proposal back. A proposal the
// drop finds gone was forgotten since it was read (an application's
// DELETE takes no claim): nothing is approved.
func approveOver(ctx context.Context, realm string, prop sdk.Record, targetID string, sup sdk.Superseder, forget sdk.RecordForgetter, p sdk.Provider) (string, error) {
	n, err := forget.Forget(ctx, realm, []string{prop.ID})
	if err != nil {
		return "", err
	}
	if n == 0 {
		return "", fmt.Errorf("proposal %q was forgotten while it was being approved; nothing was approved: %w", prop.ID, sdk.ErrNotFound)
	}
	newID, err := sup.Supersede(ctx, realm, targetID, approvedCopy(prop))
	if err != nil {
		if a, ok := host.ProviderOf(p).Archiver(); ok {
			if _, rerr := a.Import(context.WithoutCancel(ctx), realm, []sdk.Record{prop}); rerr != nil {
				return "", fmt.Errorf("%w (and restoring proposal %q failed: %w)", err, prop.ID, rerr)
			}
		}
		return "", err
	}
	return newID, nil
}

// approvedCopy is the active record a proposal becomes: every field a
// writer set (its thread and occurred_at too), without the proposal tag.
func approvedCopy(old sdk.Record) sdk.Record {
	return sdk.Record{
		Scope: old.Scope, Kind: old.Kind, Title: old.Title, Description: old.Description, Body: old.Body,
		Trust: old.Trust, ExpiresAt: old.ExpiresAt, Thread: old.Thread, OccurredAt: old.OccurredAt,
		Tags: slices.DeleteFunc(slices.Clone(old.Tags), isTag),
	}
}

// Restate is Restate through the queue: each proposal is claimed, as a
// review claims it, and held in the ledger while it is out of the store,
// so a host dying between the drop and the write loses no acknowledged
// proposal (a reap restores it, or finds the write done); the dropped
// proposals then leave the ledger.
func (q *Queue) Restate(ctx context.Context, realm string, p sdk.Provider, records []sdk.Record, stored []sdk.Record) ([]string, error) {
	var ids []string
	err := q.inPlaceOf(ctx, realm, p, stored, func() (err error) {
		ids, err = Restate(ctx, realm, p, records, stored)
		return err
	})
	return ids, err
}

// inPlaceOf runs act, which drops the pending proposals stored and puts
// them back if it fails, with each proposal under review and held (see
// Restate); a proposal reviewed meanwhile fails it as a conflict.
func (q *Queue) inPlaceOf(ctx context.Context, realm string, p sdk.Provider, stored []sdk.Record, act func() error) error {
	if len(stored) == 0 {
		return act()
	}
	ran := false
	err := q.review(ctx, realm, stored[0].ID, p, func(prop sdk.Record) error {
		ran = true
		if err := q.hold(ctx, realm, heldProposal{Record: prop}); err != nil {
			return err
		}
		return q.inPlaceOf(ctx, realm, p, stored[1:], act)
	})
	// Gone or no longer pending: reviewed meanwhile. Any other failure (a
	// ledger or provider outage) is answered as it is.
	if !ran && (errors.Is(err, sdk.ErrNotFound) || errors.Is(err, ErrNotPending)) {
		return fmt.Errorf("pending proposal %q of the same content was reviewed meanwhile; send the write again: %w", stored[0].ID, sdk.ErrConflict)
	}
	return err
}

// Import imports records, full records an application exports, into
// realm through the provider's archive capability. A provider skips an
// imported record whose content its scope holds live, a pending proposal
// included, so an agent could keep an application's import of a shared
// record out of the store, and out of recall, by proposing its content
// first. As a write of that content drops the proposal (Restate), the
// import drops the pending proposals holding the content of a recallable
// record of it in a shared scope, then imports, and puts them back if the
// import fails. The provider's own skip is not relied on: markdown stores
// such a record beside the proposal, and the proposal must go there too.
func (q *Queue) Import(ctx context.Context, realm string, p sdk.Provider, records []sdk.Record) (sdk.ImportResult, error) {
	hp := host.ProviderOf(p)
	a, ok := hp.Archiver()
	if !ok {
		return sdk.ImportResult{}, fmt.Errorf("the provider of realm %q cannot import records: %w", realm, sdk.ErrUnsupported)
	}
	held, err := q.heldByProposals(ctx, realm, p, records)
	if err != nil {
		return sdk.ImportResult{}, err
	}
	if len(held) == 0 {
		return a.Import(ctx, realm, records)
	}
	forget, ok := hp.Forgetter()
	if !ok {
		// Nothing can take the proposals out: the provider decides, as
		// it did before (one refused record must not refuse the batch).
		return a.Import(ctx, realm, records)
	}
	var res sdk.ImportResult
	err = q.inPlaceOf(ctx, realm, p, held, func() error {
		return inPlace(ctx, realm, hp, forget, held, func() (err error) {
			res, err = a.Import(ctx, realm, records)
			return err
		})
	})
	return res, err
}

// heldByProposals answers the pending proposals of realm, as the ledger
// lists them, that hold the content of a recallable record of records in
// a shared scope (only shared scopes hold an agent's proposals). A record
// whose id the realm holds already is skipped by id, so it takes no
// proposal's place: a rerun of an import drops nothing proposed since.
func (q *Queue) heldByProposals(ctx context.Context, realm string, p sdk.Provider, records []sdk.Record) ([]sdk.Record, error) {
	type content struct {
		scope sdk.Scope
		hash  string
	}
	now := time.Now()
	byContent := map[content][]string{} // the ids of the records holding it
	importing := map[string]bool{}
	for i := range records {
		r := &records[i]
		importing[r.ID] = true
		if r.Recallable(now) && Shared(r.Scope) {
			k := content{r.Scope, sdk.ContentHash(r.Title, r.Body)}
			byContent[k] = append(byContent[k], r.ID)
		}
	}
	getter, ok := host.ProviderOf(p).Getter()
	if len(byContent) == 0 || !ok {
		return nil, nil // nothing lists proposals without a getter either
	}
	pend, err := q.pendingIDs(ctx, realm)
	if err != nil || len(pend) == 0 {
		return nil, err
	}
	proposals, err := getByID(ctx, realm, getter, pend)
	if err != nil {
		return nil, err
	}
	var held []sdk.Record
	var ids []string
	asked := map[content]bool{} // a content's holders, asked once
	for _, id := range pend {
		r, ok := proposals[id]
		// An imported id is the proposal's own record: skipped, not restated.
		if !ok || !IsPending(&r) || importing[r.ID] {
			continue
		}
		k := content{r.Scope, r.ContentHash}
		if holders := byContent[k]; len(holders) > 0 {
			held = append(held, r)
			if !asked[k] {
				asked[k] = true
				ids = append(ids, holders...)
			}
		}
	}
	if len(held) == 0 {
		return nil, nil
	}
	stored, err := getByID(ctx, realm, getter, ids)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(held, func(r sdk.Record) bool {
		for _, id := range byContent[content{r.Scope, r.ContentHash}] {
			if _, ok := stored[id]; !ok {
				return false
			}
		}
		return true
	}), nil
}

// Reject forgets the pending proposal id: a rejected proposal leaves
// nothing behind but the caller's log line. first, when set, runs under
// the review's claim once the proposal is found pending and before it is
// forgotten; its failure leaves the proposal pending.
func (q *Queue) Reject(ctx context.Context, realm, id string, p sdk.Provider, first func() error) error {
	forget, ok := host.ProviderOf(p).Forgetter()
	if !ok {
		return fmt.Errorf("the provider of realm %q cannot reject proposals (it lacks the forget capability): %w", realm, sdk.ErrUnsupported)
	}
	return q.review(ctx, realm, id, p, func(sdk.Record) error {
		if first != nil {
			if err := first(); err != nil {
				return err
			}
		}
		_, err := forget.Forget(ctx, realm, []string{id})
		return err
	})
}

// pendingRecord fetches id and checks it is a pending proposal.
func pendingRecord(ctx context.Context, realm, id string, p sdk.Provider) (sdk.Record, error) {
	getter, ok := host.ProviderOf(p).Getter()
	if !ok {
		return sdk.Record{}, fmt.Errorf("the provider of realm %q cannot fetch records by id: %w", realm, sdk.ErrUnsupported)
	}
	recs, err := getter.Get(ctx, realm, []string{id})
	if err != nil {
		return sdk.Record{}, err
	}
	if len(recs) == 0 {
		return sdk.Record{}, fmt.Errorf("record %q not found in realm %q: %w", id, realm, sdk.ErrNotFound)
	}
	if !IsPending(&recs[0]) {
		return sdk.Record{}, fmt.Errorf("record %q (status %s) is %w: %w", id, recs[0].Status, ErrNotPending, sdk.ErrConflict)
	}
	return recs[0], nil
}
