package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/dupnotes"
	"github.com/memhost/memhost/internal/proposal"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// recordInput is what a client may send for a new record; everything else
// (id, times, hash, status, counters) belongs to the store.
type recordInput struct {
	Scope       string       `json:"scope"`
	Kind        string       `json:"kind"`
	Title       string       `json:"title"`
	Description string       `json:"description"`
	Body        string       `json:"body"`
	Tags        []string     `json:"tags"`
	Trust       string       `json:"trust"`
	ExpiresAt   *time.Time   `json:"expires_at"`
	Thread      *threadInput `json:"thread"`
	OccurredAt  *time.Time   `json:"occurred_at"`
}

// threadInput is a record's thread as sent: seq is required, as 0 is a
// place of its own (a thread whose every turn left it out would store
// them all at one place, each the others' neighbour).
type threadInput struct {
	ID  string `json:"id"`
	Seq *int64 `json:"seq"`
}

// check refuses a thread without its seq.
func (t *threadInput) check() error {
	if t != nil && t.Seq == nil {
		return required("thread.seq")
	}
	return nil
}

func (in recordInput) record(realm string) sdk.Record {
	r := sdk.Record{
		Realm: realm, Scope: sdk.Scope(in.Scope), Kind: sdk.RecordKind(in.Kind), Title: in.Title,
		Description: in.Description, Body: in.Body, Tags: in.Tags, Trust: sdk.Trust(in.Trust),
	}
	if in.Thread != nil && in.Thread.Seq != nil {
		r.Thread = &sdk.Thread{ID: in.Thread.ID, Seq: *in.Thread.Seq}
	}
	if in.ExpiresAt != nil {
		r.ExpiresAt = in.ExpiresAt.UTC()
	}
	if in.OccurredAt != nil {
		r.OccurredAt = in.OccurredAt.UTC()
	}
	return r
}

// checkTimes refuses a time the record cannot keep as sent (see
// checkSentTime); Prepare checks only occurred_at's years, and a zero
// time would reach it as no time at all.
func (in recordInput) checkTimes() error {
	if err := checkSentTime("occurred_at", in.OccurredAt); err != nil {
		return err
	}
	return checkSentTime("expires_at", in.ExpiresAt)
}

// checkSentTime is coordinator.CheckSentTime of a field that may be left
// out (nil passes).
func checkSentTime(field string, t *time.Time) error {
	if t == nil {
		return nil
	}
	return coordinator.CheckSentTime(field, *t)
}

type rememberRequest struct {
	Realm   string        `json:"realm"`
	Records []recordInput `json:"records"`
}

func (s *Server) handleRemember(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	var req rememberRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	realm, p, err := s.provider(c, req.Realm)
	if err != nil {
		return err
	}
	if len(req.Records) == 0 {
		return fieldRefusal("records", sdk.ErrInvalid, "at least one record is required")
	}
	if len(req.Records) > sdk.MaxBatch {
		return fieldRefusal("records", sdk.ErrTooLarge, "%d records, the limit per request is %d", len(req.Records), sdk.MaxBatch)
	}
	records := make([]sdk.Record, len(req.Records))
	for i, in := range req.Records {
		if err := in.checkTimes(); err != nil {
			return inRecord(i, err)
		}
		if err := in.Thread.check(); err != nil {
			return inRecord(i, err)
		}
		records[i] = in.record(realm)
		// Checked here too so a bad batch is refused before any plugin call,
		// with the index of the offending record.
		probe := records[i]
		if err := probe.Prepare(realm, time.Now()); err != nil {
			return inRecord(i, err)
		}
		if err := c.touchScope(records[i].Scope); err != nil {
			return inRecord(i, err)
		}
		if err := proposal.CheckWriteTags(records[i].Tags); err != nil {
			return inRecord(i, err)
		}
	}
	if err := s.boundWritesWhereItReads(ctx, c, realm, records); err != nil {
		return err
	}
	if !c.application() {
		proposal.CapTrust(records)
		n := 0
		for i := range records {
			if proposal.Shared(records[i].Scope) {
				n++
			}
		}
		switch {
		case n == len(records):
			return s.propose(ctx, c, realm, p, records, w)
		case n > 0:
			return &sdk.FieldError{Field: "records", Problem: "mixes shared scopes with identity scopes: an agent's writes to shared scopes are proposals; send them in a request of their own", Err: sdk.ErrInvalid}
		}
	}
	writer, ok := host.ProviderOf(p).Writer()
	if !ok {
		return fmt.Errorf("the provider of realm %q does not accept writes: %w", realm, sdk.ErrUnsupported)
	}
	ids, err := writer.Remember(ctx, realm, records)
	if err != nil {
		return err
	}
	if ids, err = s.restateProposals(ctx, realm, p, records, ids); err != nil {
		return err
	}
	answer := map[string]any{"ids": ids}
	unadded, unchanged, expiry := dupnotes.Of(ctx, p, realm, records, ids)
	if unadded != nil {
		answer["tags_not_added"] = unadded
	}
	if unchanged != nil {
		answer["occurred_at_not_changed"] = unchanged
	}
	if expiry != nil {
		answer["expires_at_not_changed"] = expiry
	}
	return writeJSON(w, http.StatusOK, answer)
}

// boundWritesWhereItReads refuses an identity-bound token's record in a
// shared scope none of its identities reads (a mob it is not in, an
// operator not its own), as the MCP tools refuse one, whatever the
// token's role: an agent's proposal would wait in a queue of a group it
// does not belong to, and an application's write of content the scope
// holds would answer the holder's id, tags and occurred_at, which its
// reads hide (hides). A token bound to no identity acts for any, so any
// shared scope is its to write (or propose) into.
func (s *Server) boundWritesWhereItReads(ctx context.Context, c caller, realm string, records []sdk.Record) error {
	if !c.bound() {
		return nil
	}
	readable, err := s.readable(ctx, c, realm)
	if err != nil {
		return err
	}
	for i, r := range records {
		if !slices.Contains(readable, r.Scope) {
			return inRecord(i, &sdk.FieldError{Field: "scope", Problem: fmt.Sprintf("scope %q is not one identity %s reads", r.Scope, quoteAll(c.token.Identities)), Err: sdk.ErrPermission})
		}
	}
	return nil
}

// recordTarget resolves a /v1/records/{id}?realm= request: the authorised
// realm, its provider and a safe id.
func (s *Server) recordTarget(c caller, r *http.Request) (realm, id string, p sdk.Provider, err error) {
	realm, p, err = s.provider(c, r.URL.Query().Get("realm"))
	if err != nil {
		return "", "", nil, err
	}
	id = r.PathValue("id")
	if err := sdk.ValidateID(id); err != nil {
		return "", "", nil, err
	}
	return realm, id, p, nil
}

func (s *Server) handleGet(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	realm, id, p, err := s.recordTarget(c, r)
	if err != nil {
		return err
	}
	getter, ok := host.ProviderOf(p).Getter()
	if !ok {
		return fmt.Errorf("the provider of realm %q cannot fetch records by id: %w", realm, sdk.ErrUnsupported)
	}
	recs, err := getter.Get(ctx, realm, []string{id})
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return recordNotFound(realm, id)
	}
	if err := s.touchStored(ctx, c, realm, id, recs[0].Scope); err != nil {
		return err
	}
	if !c.application() && proposal.IsPending(&recs[0]) {
		// Another agent's pending proposal is no agent's to read: a
		// proposal of the same content answers its id (the store holds
		// one copy of a content per scope), which would otherwise hand
		// over all of it, description and tags too, before review.
		mine, err := s.proposedBy(ctx, c, realm, id)
		if err != nil {
			return err
		}
		if !mine {
			return recordNotFound(realm, id)
		}
	}
	c.ownUsage(&recs[0])
	return writeJSON(w, http.StatusOK, recs[0])
}

// proposedBy reports whether the caller's token left the pending proposal
// id, as the ledger notes.
func (s *Server) proposedBy(ctx context.Context, c caller, realm, id string) (bool, error) {
	if c.token == nil {
		return false, nil
	}
	return s.opts.Proposals.ProposedBy(ctx, realm, id, c.token.Name)
}

func (s *Server) handleForget(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	realm, id, p, err := s.recordTarget(c, r)
	if err != nil {
		return err
	}
	hidden, err := s.mayForget(ctx, c, realm, id, p)
	if err != nil {
		return err
	}
	forgetter, ok := host.ProviderOf(p).Forgetter()
	if !ok {
		return fmt.Errorf("the provider of realm %q cannot forget records: %w", realm, sdk.ErrUnsupported)
	}
	if hidden {
		// Forgetting an id the realm does not hold answers 204 too.
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err := s.forgetTraces(ctx, realm, id); err != nil {
		return err
	}
	if _, err := forgetter.Forget(ctx, realm, []string{id}); err != nil {
		return err
	}
	if s.opts.Proposals != nil {
		// A forgotten pending proposal must free its proposer's place in
		// the bound; an id the queue does not note changes nothing. (Left
		// noted by a failure here, a listing reaps it: its record is gone.)
		if err := s.opts.Proposals.Forgotten(ctx, realm, []string{id}); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type recallRequest struct {
	Identity    identityInput `json:"identity"`
	Query       string        `json:"query"`
	Scopes      []string      `json:"scopes"`
	Limit       int           `json:"limit"`
	Tags        []string      `json:"tags"`
	ExcludeTags []string      `json:"exclude_tags"`
	timeInput
}

// timeInput is a recall's view of time (coordinator.RecallTime): now is
// the reference for the query's time expressions (default: the request's
// time), since and until filter on a record's occurred_at, else its
// created_at.
type timeInput struct {
	Now   *time.Time `json:"now"`
	Since *time.Time `json:"since"`
	Until *time.Time `json:"until"`
}

// recallTime validates the input and answers it as a RecallTime.
func (in timeInput) recallTime() (coordinator.RecallTime, error) {
	rt := coordinator.RecallTime{Now: orZero(in.Now), Since: orZero(in.Since), Until: orZero(in.Until)}
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"now", in.Now}, {"since", in.Since}, {"until", in.Until}} {
		if err := checkSentTime(f.name, f.t); err != nil {
			return rt, err
		}
	}
	return rt, sdk.ValidateWindow(rt.Since, rt.Until)
}

// orZero is *t, or the zero time (no bound, the host's clock) for nil.
func orZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

type identityInput struct {
	Realm string `json:"realm"`
	ID    string `json:"id"`
}

// MaxRecallLimit bounds how many hits one recall may ask for.
const MaxRecallLimit = 100

// identity resolves and authorises an identity from a request.
func (s *Server) identity(c caller, in identityInput) (sdk.Identity, sdk.Provider, error) {
	realm, p, err := s.provider(c, in.Realm)
	if err != nil {
		return sdk.Identity{}, nil, err
	}
	id := sdk.Identity{Realm: realm, ID: in.ID}
	if err := id.Validate(); err != nil {
		return sdk.Identity{}, nil, err
	}
	if err := c.actAs(id.ID); err != nil {
		return sdk.Identity{}, nil, err
	}
	return id, p, nil
}

func (s *Server) handleRecall(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	var req recallRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	id, p, err := s.identity(c, req.Identity)
	if err != nil {
		return err
	}
	if req.Limit < 0 || req.Limit > MaxRecallLimit {
		return &sdk.FieldError{Field: "limit", Problem: fmt.Sprintf("%d is outside 0..%d", req.Limit, MaxRecallLimit), Err: sdk.ErrInvalid}
	}
	if err := sdk.ValidateTagFilter("tags", req.Tags); err != nil {
		return err
	}
	if err := sdk.ValidateTagFilter("exclude_tags", req.ExcludeTags); err != nil {
		return err
	}
	rt, err := req.recallTime()
	if err != nil {
		return err
	}
	if rt.Now.IsZero() {
		// UTC, not the host's zone: every host reads day words alike.
		rt.Now = time.Now().UTC()
	}
	// A recall path: it runs under the recall timeout (DESIGN 3.4), not
	// the request's, so a hung plugin fails it quickly.
	ctx, cancel := context.WithTimeout(ctx, s.opts.Coordinator.Config().RecallTimeout)
	defer cancel()
	// An identity reads what the coordinator composes for it (its own
	// scope, its mobs, its operator, the realm); explicit scopes narrow
	// that and never widen it.
	readable, err := s.opts.Coordinator.Scopes(ctx, id)
	if err != nil {
		return err
	}
	scopes := readable
	if len(req.Scopes) > 0 {
		scopes = make([]sdk.Scope, 0, len(req.Scopes))
		for i, sc := range req.Scopes {
			field := fmt.Sprintf("scopes[%d]", i)
			if err := sdk.Scope(sc).Validate(); err != nil {
				return asField(field, err)
			}
			if !slices.Contains(readable, sdk.Scope(sc)) {
				return &sdk.FieldError{Field: field, Problem: fmt.Sprintf("identity %q does not read scope %q", id.ID, sc), Err: sdk.ErrPermission}
			}
			scopes = append(scopes, sdk.Scope(sc))
		}
	}
	hits, err := coordinator.ReadQuery(ctx, p.Recall, sdk.RecallQuery{
		Realm: id.Realm, Query: req.Query, Scopes: scopes, Limit: req.Limit,
		Tags: req.Tags, ExcludeTags: req.ExcludeTags, Since: rt.Since, Until: rt.Until,
	}, rt.Now)
	if err != nil {
		return err
	}
	hits = s.opts.Coordinator.HitsInScopes(ctx, id, scopes, hits)
	// Only an active, unexpired record is recallable: a store that
	// answered another (its clock or its filter behind, a pending
	// proposal, a superseded record) does not pass it on, as a turn's
	// injection and memory_recall do not. The host's clock judges, not
	// the query's reference time, which may be in the past.
	at := time.Now()
	hits = slices.DeleteFunc(hits, func(h sdk.Hit) bool { return !h.Record.Recallable(at) })
	if hits == nil {
		hits = []sdk.Hit{}
	}
	c.ownUsageHits(hits)
	return writeHits(w, hits)
}
