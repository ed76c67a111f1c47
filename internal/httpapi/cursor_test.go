package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/memhost/memhost/internal/httpapi"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// stuckCursor answers every Export with no records and the same cursor.
type stuckCursor struct{ calls atomic.Int64 }

func (s *stuckCursor) Info() sdk.Info {
	return sdk.Info{Name: "stuck", Version: "0.1.0", Kinds: []sdk.PluginKind{sdk.KindProvider}, Protocols: []int{1},
		Capabilities: sdk.Capabilities{sdk.CapArchive}}
}
func (s *stuckCursor) Configure(context.Context, json.RawMessage) error { return nil }
func (s *stuckCursor) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) {
	return nil, nil
}
func (s *stuckCursor) Export(context.Context, string, string, int) (sdk.ExportPage, error) {
	s.calls.Add(1)
	return sdk.ExportPage{Next: "same-cursor"}, nil
}
func (s *stuckCursor) Import(context.Context, string, []sdk.Record) (sdk.ImportResult, error) {
	return sdk.ImportResult{}, nil
}

// inProcess serves p over the plugin protocol in this process and answers
// the host's client of it, with its answers checked as a plugin's are.
func inProcess(t *testing.T, p sdk.Plugin) sdk.Provider {
	t.Helper()
	conn, err := host.ServeInProcess(t.Context(), p, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	hp, err := conn.Provider()
	if err != nil {
		t.Fatal(err)
	}
	return hp
}

// TestAnExportCursorThatDoesNotMoveIsRefused: a plugin answering the same
// cursor forever had GET /v1/scopes ask it thousands of times a second
// until the request's deadline, which then answered deadline_exceeded. The
// second page is now refused as the plugin's bad answer.
func TestAnExportCursorThatDoesNotMoveIsRefused(t *testing.T) {
	p := &stuckCursor{}
	hp := inProcess(t, p)
	_, _, err := httpapi.CountScopes(t.Context(), "a", hp)
	if !errors.Is(err, host.ErrBadAnswer) || p.calls.Load() != 2 {
		t.Fatalf("after %d pages: %v; want the second page refused as a bad answer", p.calls.Load(), err)
	}
}

// advancingCursor answers every Export with no records and a cursor past
// the one asked with.
type advancingCursor struct{ stuckCursor }

func (s *advancingCursor) Export(context.Context, string, string, int) (sdk.ExportPage, error) {
	return sdk.ExportPage{Next: fmt.Sprintf("c%09d", s.calls.Add(1))}, nil
}

// TestEmptyPagesCountTowardTheListingsBound: from an outside review. A
// listing followed a plugin's empty pages, cursor moving each time, until
// the request's deadline: empty pages did not count toward its bound. Each
// counts as a full page now, so the listing stops after the pages an
// honest scan of its bound takes (20,000 records, 20 pages).
func TestEmptyPagesCountTowardTheListingsBound(t *testing.T) {
	p := &advancingCursor{}
	hp := inProcess(t, p)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{Provider: func(string) (sdk.Provider, error) { return hp, nil }}).Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/v1/records?limit=10")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || p.calls.Load() > 21 {
		t.Fatalf("a listing over empty pages = %d after %d pages; want it answered within its bound", resp.StatusCode, p.calls.Load())
	}
	p.calls.Store(0)
	if _, partial, err := httpapi.CountScopes(t.Context(), "default", hp); err != nil || !partial || p.calls.Load() > 201 {
		t.Fatalf("a scope count over empty pages: partial %v, %v, after %d pages; want a partial count within its bound", partial, err, p.calls.Load())
	}
}
