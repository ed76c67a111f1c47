package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/guide"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// The endpoints below are the coordinator's and the guide's surfaces.
// Each authorises the identity's realm first, so a token never learns
// anything about a realm it may not touch.

// required refuses a request that leaves out a required field.
func required(field string) error {
	return &sdk.FieldError{Field: field, Problem: "is required", Err: sdk.ErrInvalid}
}

// authorised resolves the identity's realm (the default when empty),
// checks the caller may touch it, and validates the identity.
func (s *Server) authorised(c caller, in identityInput) (sdk.Identity, error) {
	realm, err := s.realm(c, in.Realm)
	if err != nil {
		return sdk.Identity{}, err
	}
	id := sdk.Identity{Realm: realm, ID: in.ID}
	if err := id.Validate(); err != nil {
		return sdk.Identity{}, err
	}
	return id, c.actAs(id.ID)
}

type turnRequest struct {
	Identity identityInput `json:"identity"`
	Session  string        `json:"session"`
	Content  rawContent    `json:"content"`
	timeInput
}

func (s *Server) handleInjectTurn(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	var req turnRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	id, err := s.authorised(c, req.Identity)
	if err != nil {
		return err
	}
	content, err := decodeContent("content", req.Content)
	if err != nil {
		return err
	}
	if content == nil {
		return required("content")
	}
	rt, err := req.recallTime()
	if err != nil {
		return err
	}
	out, err := s.opts.Coordinator.InjectForTurn(coordinator.WithRecallTime(ctx, rt), id, req.Session, *content)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

type buildRequest struct {
	Identity   identityInput `json:"identity"`
	QueryText  string        `json:"query_text"`
	QueryTerms []string      `json:"query_terms"`
}

func (s *Server) handleInjectBuild(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	var req buildRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	id, err := s.authorised(c, req.Identity)
	if err != nil {
		return err
	}
	out, err := s.opts.Coordinator.AssembleBuildInjection(ctx, id, req.QueryText, req.QueryTerms)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

type defangRequest struct {
	Identity identityInput `json:"identity"`
	Session  string        `json:"session"`
	Content  rawContent    `json:"content"`
}

func (s *Server) handleDefang(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	var req defangRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	id, err := s.authorised(c, req.Identity)
	if err != nil {
		return err
	}
	content, err := decodeContent("content", req.Content)
	if err != nil {
		return err
	}
	if content == nil {
		return required("content")
	}
	if req.Session != "" {
		if err := coordinator.ValidateSessionKey(req.Session); err != nil {
			return err
		}
	}
	out, err := s.opts.Coordinator.DefangInboundInSession(c.actor(ctx), id, req.Session, *content)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, out)
}

type compactedRequest struct {
	Identity identityInput `json:"identity"`
}

func (s *Server) handleSessionCompacted(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	var req compactedRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	id, err := s.authorised(c, req.Identity)
	if err != nil {
		return err
	}
	if err := s.opts.Coordinator.OnSessionCompacted(ctx, id, r.PathValue("key")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type manifestRequest struct {
	Identity identityInput `json:"identity"`
	Tier     string        `json:"tier"`
	K        int           `json:"k"`
}

// DefaultManifestK is the working-set size when a request gives none.
const DefaultManifestK = 24

func (s *Server) handleManifest(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	var req manifestRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	id, p, err := s.identity(c, req.Identity)
	if err != nil {
		return err
	}
	// k is checked whatever the tier: the full tier does not read it, and
	// a k no working set could have is a client's mistake all the same.
	if req.K < 0 || req.K > sdk.MaxBatch {
		return fieldRefusal("k", sdk.ErrInvalid, "%d is outside 1..%d (0 or absent: %d)", req.K, sdk.MaxBatch, DefaultManifestK)
	}
	q := sdk.ManifestQuery{Realm: id.Realm, K: req.K}
	switch req.Tier {
	case "working_set", "":
		q.Tier = sdk.TierWorkingSet
		if q.K == 0 {
			q.K = DefaultManifestK
		}
	case "full":
		q.Tier = sdk.TierFull
	default:
		return fieldRefusal("tier", sdk.ErrInvalid, "%q is not working_set or full", req.Tier)
	}
	lister, ok := host.ProviderOf(p).Lister()
	if !ok {
		return fmt.Errorf("the provider of realm %q keeps no record manifest: %w", id.Realm, sdk.ErrUnsupported)
	}
	if q.Scopes, err = s.opts.Coordinator.Scopes(ctx, id); err != nil {
		return err
	}
	rows, err := lister.Manifest(ctx, q)
	if err != nil {
		return err
	}
	truncated := false
	if q.Tier == sdk.TierFull {
		// The host read no further: the rows are the first the provider
		// listed, and the answer says so.
		rows, truncated = coordinator.CutFullManifest(rows)
	}
	rows = s.opts.Coordinator.RowsInScopes(ctx, id, q.Scopes, rows)
	if rows == nil {
		rows = []sdk.ManifestRow{}
	}
	answer := map[string]any{"rows": rows}
	if truncated {
		answer["truncated"] = true
	}
	c.ownUsageRows(rows)
	return writeJSON(w, http.StatusOK, answer)
}

// guideFilters are the optional filters of both guide endpoints.
type guideFilters struct {
	TopK         int      `json:"top_k"`
	MinScore     float64  `json:"min_score"`
	RequiredTags []string `json:"required_tags"`
	ExcludedTags []string `json:"excluded_tags"`
}

func (f guideFilters) filters() (guide.Filters, error) {
	out := guide.Filters{TopK: f.TopK, MinScore: f.MinScore, RequiredTags: f.RequiredTags, ExcludedTags: f.ExcludedTags}
	return out, out.Validate()
}

// block is a guide block as JSON: null when there is nothing to inject.
func block(b string) *string {
	if b == "" {
		return nil
	}
	return &b
}

type sessionStartRequest struct {
	Identity identityInput `json:"identity"`
	Session  string        `json:"session"`
	Task     *string       `json:"task"`
	guideFilters
}

func (s *Server) handleGuideStart(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	var req sessionStartRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	id, err := s.authorised(c, req.Identity)
	if err != nil {
		return err
	}
	f, err := req.filters()
	if err != nil {
		return err
	}
	if req.Task == nil {
		return required("task")
	}
	b, err := s.opts.Guide.SessionStart(ctx, id, req.Session, *req.Task, f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"block": block(b)})
}

type beforeIterationRequest struct {
	Identity        identityInput `json:"identity"`
	Session         string        `json:"session"`
	LastUserMessage string        `json:"last_user_message"`
	guideFilters
}

func (s *Server) handleGuideIteration(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	var req beforeIterationRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	id, err := s.authorised(c, req.Identity)
	if err != nil {
		return err
	}
	f, err := req.filters()
	if err != nil {
		return err
	}
	it, err := s.opts.Guide.BeforeIteration(ctx, id, req.Session, req.LastUserMessage, f)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"block": block(it.Block), "changed": it.Changed, "recall_failed": it.RecallFailed})
}
