package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/turntrace"
	"github.com/memhost/memhost/sdk"
)

// TraceReader reads the turn trace store, and blanks a forgotten
// record's title in it.
type TraceReader interface {
	Session(ctx context.Context, realm string, identities []string, session string, limit int) ([]coordinator.TurnTrace, error)
	Recent(ctx context.Context, realm string, identities []string, limit int) ([]turntrace.SessionSummary, error)
	Record(ctx context.Context, realm string, identities []string, id string, limit int) ([]coordinator.TurnTrace, error)
	Forget(ctx context.Context, realm string, ids []string) error
}

// forgetTraces blanks the title of a record about to be forgotten (or
// rejected) in the turn traces: a forgotten record's text must not stay
// readable there. It runs first, so a failure leaves the record to a
// retry of the same request; done after, a retry found the record gone
// and a caller that may not act on missing ids never blanked it.
func (s *Server) forgetTraces(ctx context.Context, realm, id string) error {
	if s.opts.Traces == nil {
		return nil
	}
	if err := s.opts.Traces.Forget(ctx, realm, []string{id}); err != nil {
		return fmt.Errorf("blanking the title of record %q in the turn traces failed, so the record was left as it was; make the request again: %w", id, err)
	}
	return nil
}

// Trace page sizes.
const (
	DefaultTracePage = 100
	MaxTracePage     = 1000
)

// traceRequest checks what every trace read needs: an application
// caller, a realm it may see, a page size and a host that keeps traces.
// A trace names what was injected for an identity, so a bound token is
// answered only its own identities' turns: the store leaves out the
// others' before the page's limit, so they cannot crowd them out.
func (s *Server) traceRequest(c caller, r *http.Request) (realm string, limit int, tr TraceReader, err error) {
	if err := c.requireApplication("read turn traces"); err != nil {
		return "", 0, nil, err
	}
	q := r.URL.Query()
	if realm, err = s.realm(c, q.Get("realm")); err != nil {
		return "", 0, nil, err
	}
	if limit, err = pageLimit(q.Get("limit"), DefaultTracePage, MaxTracePage); err != nil {
		return "", 0, nil, err
	}
	if s.opts.Traces == nil {
		return "", 0, nil, fmt.Errorf("this host keeps no turn trace: %w", sdk.ErrUnsupported)
	}
	return realm, limit, s.opts.Traces, nil
}

// handleSessionTrace answers a session's turns, oldest first: what each
// injected, what it left out and why (application callers only: a trace
// names records of every identity in the session's realm).
func (s *Server) handleSessionTrace(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	realm, limit, tr, err := s.traceRequest(c, r)
	if err != nil {
		return err
	}
	session := r.PathValue("key")
	if err := coordinator.ValidateSessionKey(session); err != nil {
		return err
	}
	identity := r.URL.Query().Get("identity")
	if identity != "" {
		if err := (sdk.Identity{Realm: realm, ID: identity}).Validate(); err != nil {
			return err
		}
		if err := c.actAs(identity); err != nil {
			return err
		}
	}
	who := c.identities()
	if identity != "" {
		who = []string{identity}
	}
	turns, err := tr.Session(ctx, realm, who, session, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"realm": realm, "session": session, "turns": turns})
}

// handleTraces lists the sessions of a realm with the newest traces.
func (s *Server) handleTraces(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	realm, limit, tr, err := s.traceRequest(c, r)
	if err != nil {
		return err
	}
	sessions, err := tr.Recent(ctx, realm, c.identities(), limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"realm": realm, "sessions": sessions})
}

// handleRecordTrace answers the newest turns that injected a record.
func (s *Server) handleRecordTrace(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	realm, limit, tr, err := s.traceRequest(c, r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := sdk.ValidateID(id); err != nil {
		return err
	}
	turns, err := tr.Record(ctx, realm, c.identities(), id, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"realm": realm, "record": id, "turns": turns})
}
