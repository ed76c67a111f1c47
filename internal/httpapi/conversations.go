package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/sdk"
)

type messageInput struct {
	Role    string     `json:"role"`
	Content rawContent `json:"content"`
	// The OpenAI Chat Completions message's other fields, so a client
	// sends its history as it keeps it: a speaker's name, an assistant's
	// tool calls (or one legacy function call) and refusal, and the id a
	// tool message answers (which says nothing a summary needs).
	Name         string            `json:"name"`
	ToolCalls    []json.RawMessage `json:"tool_calls"`
	FunctionCall json.RawMessage   `json:"function_call"`
	Refusal      *string           `json:"refusal"`
	ToolCallID   string            `json:"tool_call_id"`
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
	// Absent is not "nothing evicted": a client that left the list out
	// would otherwise meet history_mismatch, which sends it looking at
	// the messages it never sent.
	if req.Evicted == nil {
		return &sdk.FieldError{Field: "evicted", Problem: "is required (every message evicted so far, in order)", Err: sdk.ErrInvalid}
	}
	evicted := make([]sdk.Message, len(req.Evicted))
	for i, m := range req.Evicted {
		content, err := decodeContent(fmt.Sprintf("evicted[%d].content", i), m.Content)
		if err != nil {
			return err
		}
		if content == nil {
			content = &coordinator.Content{} // left out or null: the empty string, as before
		}
		text, err := compaction.FlattenChat(*content, compaction.ChatExtras{
			Name: m.Name, ToolCalls: m.ToolCalls, FunctionCall: m.FunctionCall, Refusal: m.Refusal})
		if err != nil {
			return under(fmt.Sprintf("evicted[%d]", i), err)
		}
		evicted[i] = sdk.Message{Role: m.Role, Content: text}
	}
	res, err := svc.Compact(c.actor(ctx), compaction.Request{
		Identity: id, Conversation: r.PathValue("id"), Session: req.Session, Evicted: evicted, Application: c.everyConversation(),
	})
	if err != nil {
		// The conversation is the path's {id}.
		return renamedField(err, "conversation", "id")
	}
	return writeJSON(w, http.StatusOK, compactAnswer{Artifact: res.Artifact, Absorbed: res.Absorbed, Compacted: res.Compacted})
}

// everyConversation reports whether c may touch every identity's
// conversations of its realms: an application token bound to no identity.
// Any other caller touches only its own identity's.
func (c caller) everyConversation() bool { return c.application() && !c.bound() }

// handleForgetConversation forgets a conversation's summary. Conversations
// are per identity: an agent names the identity it acts as (?identity=, or
// its token's one identity) and forgets only that identity's conversation
// of the id; an application forgets the named identity's, or with none,
// every identity's of the id.
func (s *Server) handleForgetConversation(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	svc, err := s.compaction()
	if err != nil {
		return err
	}
	q := r.URL.Query()
	realm, err := s.realm(c, q.Get("realm"))
	if err != nil {
		return err
	}
	access := compaction.Access{Identity: q.Get("identity"), Application: c.everyConversation()}
	if access.Identity == "" && c.bound() && len(c.token.Identities) == 1 {
		access.Identity = c.token.Identities[0]
	}
	if access.Identity != "" || !access.Application {
		if access.Identity == "" {
			return badRequest("token %q forgets only the conversations of the identity it acts as: name it (?identity=)", c.token.Name)
		}
		if err := (sdk.Identity{Realm: realm, ID: access.Identity}).Validate(); err != nil {
			return renamedField(err, "identity.id", "identity")
		}
		if err := c.actAs(access.Identity); err != nil {
			return err
		}
	}
	if err := svc.Forget(ctx, realm, r.PathValue("id"), access); err != nil {
		return renamedField(err, "conversation", "id")
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// renamedField names a refused field as the request spelled it (a query
// or path parameter) where the check named it by its place in a body.
func renamedField(err error, from, to string) error {
	var fe *sdk.FieldError
	if errors.As(err, &fe) && fe.Field == from {
		return &sdk.FieldError{Field: to, Problem: fe.Problem, Err: fe.Err}
	}
	return err
}
