package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/sdk"
)

type messageInput struct {
	Role    string              `json:"role"`
	Content coordinator.Content `json:"content"`
}

type compactRequest struct {
	Identity identityInput  `json:"identity"`
	Session  string         `json:"session"`
	Evicted  []messageInput `json:"evicted"`
}

type compactAnswer struct {
	Artifact sdk.Message `json:"artifact"`
	Absorbed int         `json:"absorbed"`
	// Compacted is how many messages this call compacted (0 for a retry).
	Compacted int `json:"compacted"`
}

func (s *Server) compaction() (*compaction.Service, error) {
	if s.opts.Compaction == nil || !s.opts.Compaction.Enabled() {
		return nil, compaction.ErrNoCompactor
	}
	return s.opts.Compaction, nil
}

func (s *Server) handleCompact(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	svc, err := s.compaction()
	if err != nil {
		return err
	}
	var req compactRequest
	if err := s.decode(w, r, &req); err != nil {
		return err
	}
	id, err := s.authorised(c, req.Identity)
	if err != nil {
		return err
	}
	evicted := make([]sdk.Message, len(req.Evicted))
	for i, m := range req.Evicted {
		evicted[i] = sdk.Message{Role: m.Role, Content: compaction.Flatten(m.Content)}
	}
	res, err := svc.Compact(ctx, compaction.Request{
		Identity: id, Conversation: r.PathValue("id"), Session: req.Session, Evicted: evicted,
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, compactAnswer{Artifact: res.Artifact, Absorbed: res.Absorbed, Compacted: res.Compacted})
	return nil
}

func (s *Server) handleForgetConversation(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	svc, err := s.compaction()
	if err != nil {
		return err
	}
	realm, err := s.realm(c, r.URL.Query().Get("realm"))
	if err != nil {
		return err
	}
	if err := svc.Forget(ctx, realm, r.PathValue("id")); err != nil {
		return fmt.Errorf("forget conversation: %w", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
