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
	SessionPage(ctx context.Context, realm string, identities []string, session string, page turntrace.Page) ([]coordinator.TurnTrace, int64, error)
	RecentPage(ctx context.Context, realm string, identities []string, page turntrace.Page) ([]turntrace.SessionSummary, int64, error)
	RecordPage(ctx context.Context, realm string, identities []string, id string, page turntrace.Page) ([]coordinator.TurnTrace, int64, error)
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
// caller, a realm it may see, a page (its size and the cursor of the page
// before) and a host that keeps traces.
// A trace names what was injected for an identity, so a bound token is
// answered only its own identities' turns: the store leaves out the
// others' before the page's limit, so they cannot crowd them out.
func (s *Server) traceRequest(c caller, r *http.Request) (realm string, page turntrace.Page, tr TraceReader, err error) {
	if err := c.requireApplication("read turn traces"); err != nil {
		return "", page, nil, err
	}
	q := r.URL.Query()
	if realm, err = s.realm(c, q.Get("realm")); err != nil {
		return "", page, nil, err
	}
	if page.Limit, err = pageLimit(q.Get("limit"), DefaultTracePage, MaxTracePage); err != nil {
		return "", page, nil, err
	}
	if after := q.Get("after"); after != "" {
		if page.After, err = s.cursors.openPlace(realm, after); err != nil {
			return "", page, nil, &sdk.FieldError{Field: "after", Problem: err.Error(), Err: sdk.ErrInvalid}
		}
	}
	if s.opts.Traces == nil {
		return "", page, nil, fmt.Errorf("this host keeps no turn trace: %w", sdk.ErrUnsupported)
	}
	return realm, page, s.opts.Traces, nil
}

// traceNext is a trace listing's next: the sealed place of its page's
// last row, empty after the last page.
func (s *Server) traceNext(realm string, place int64) string {
	if place == 0 {
		return ""
	}
	return s.cursors.sealPlace(realm, place)
}

// handleSessionTrace answers a session's turns, oldest first: what each
// injected, what it left out and why (application callers only: a trace
// names records of every identity in the session's realm).
func (s *Server) handleSessionTrace(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	realm, page, tr, err := s.traceRequest(c, r)
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
	turns, next, err := tr.SessionPage(ctx, realm, who, session, page)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"realm": realm, "session": session, "turns": turns, "next": s.traceNext(realm, next)})
}

// handleTraces lists the sessions of a realm with the newest traces.
func (s *Server) handleTraces(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	realm, page, tr, err := s.traceRequest(c, r)
	if err != nil {
		return err
	}
	sessions, next, err := tr.RecentPage(ctx, realm, c.identities(), page)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"realm": realm, "sessions": sessions, "next": s.traceNext(realm, next)})
}

// handleRecordTrace answers the newest turns that injected a record.
func (s *Server) handleRecordTrace(ctx context.Context, c caller, w http.ResponseWriter, r *http.Request) error {
	realm, page, tr, err := s.traceRequest(c, r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if err := sdk.ValidateID(id); err != nil {
		return err
	}
	turns, next, err := tr.RecordPage(ctx, realm, c.identities(), id, page)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"realm": realm, "record": id, "turns": turns, "next": s.traceNext(realm, next)})
}
