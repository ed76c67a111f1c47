package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/sdk"
)

// TestLargeBodiesAreBounded: from an outside review. A body of many small
// values decodes to tens of times its bytes (4 MiB of empty content
// blocks took 115 MB of the host's memory, sixteen of them at once 2.2
// GB), so the large bodies a server holds at once are bounded: one past
// the bound waits, and is refused as unavailable when its request's time
// runs out; a small body never waits, and a large one's bytes are given
// back when its request ends.
func TestLargeBodiesAreBounded(t *testing.T) {
	s := New(Options{MaxBodyBytes: 1 << 20})
	read := func(ctx context.Context, size int) error {
		r := httptest.NewRequestWithContext(ctx, "POST", "/v1/recall", strings.NewReader(strings.Repeat(" ", size)))
		_, err := s.readBody(httptest.NewRecorder(), r)
		return err
	}
	held := int64(largeBodiesHeld) << 20
	if err := s.bodies.Acquire(t.Context(), held); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err := read(short, largeBody)
	if !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), "waited for other large request bodies") {
		t.Fatalf("a large body past the bound = %v, want unavailable after waiting", err)
	}
	if err := read(t.Context(), largeBody-1); err != nil {
		t.Fatalf("a small body while the bound is reached: %v", err)
	}
	s.bodies.Release(held)

	ctx, end := context.WithCancel(t.Context())
	if err := read(ctx, 1<<20); err != nil {
		t.Fatal(err)
	}
	if s.bodies.TryAcquire(held) {
		t.Fatal("a large body's bytes were not held while its request ran")
	}
	end()
	for deadline := time.Now().Add(10 * time.Second); !s.bodies.TryAcquire(held); {
		if time.Now().After(deadline) {
			t.Fatal("a large body's bytes were not given back when its request ended")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestALargeBodyWaitsNoLongerThanItsRequest: a large body past the bound
// waits at most its request's timeout, then is a 503 with Retry-After;
// the wait was on the connection's context alone, so it lasted until the
// client gave up, and the documented 503 never came.
func TestALargeBodyWaitsNoLongerThanItsRequest(t *testing.T) {
	_, providers, coord := testCoordinator(t)
	srv := serveWithBodiesHeld(t, New(Options{MaxBodyBytes: 1 << 20, RequestTimeout: 300 * time.Millisecond, Provider: providers, Coordinator: coord}))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/recall", strings.NewReader("{}"+strings.Repeat(" ", largeBody)))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("a large body past the bound got no answer within 10 s (request timeout 300 ms): %v", err)
	}
	defer resp.Body.Close()
	var e errorBody
	json.NewDecoder(resp.Body).Decode(&e)
	if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != "unavailable" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a large body past the bound = %d %+v (Retry-After %q), want 503 unavailable with Retry-After", resp.StatusCode, e, resp.Header.Get("Retry-After"))
	}
}

// TestLargeMCPBodiesAreBounded: an /mcp body counts against the large
// bodies served at once, as a /v1 body does. It was read outside the
// bound: 32 messages of 4 MiB at once, each within the values' limit,
// held the host at 780 MB where /v1 holds two such bodies.
func TestLargeMCPBodiesAreBounded(t *testing.T) {
	_, providers, coord := coordinatorWith(t, testConfig(), coordinatortest.AllCapabilities...)
	srv := serveWithBodiesHeld(t, New(Options{MaxBodyBytes: 1 << 20, RequestTimeout: 300 * time.Millisecond, Provider: providers, Coordinator: coord,
		MCP: func(bind func(http.Header) (mcpserver.Caller, error)) http.Handler {
			return mcpserver.Handler(mcpserver.Options{Provider: providers, Coordinator: coord, Bind: bind})
		}}))
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"memory_recall","arguments":{"query":"` + strings.Repeat("coffee ", largeBody/7) + `"}}}`
	req, _ := http.NewRequest("POST", srv.URL+"/mcp?identity=alice", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	status, header, data := exchange(t, srv, req, []byte(body))
	var e errorBody
	json.Unmarshal(data, &e)
	if status != http.StatusServiceUnavailable || e.Error.Code != "unavailable" || header.Get("Retry-After") == "" {
		t.Fatalf("a large /mcp body past the bound = %d %.300s, want 503 unavailable with Retry-After", status, data)
	}
}

// serveWithBodiesHeld serves s with its bound on large bodies taken whole,
// as by other large bodies being served, until the test ends.
func serveWithBodiesHeld(t *testing.T, s *Server) *httptest.Server {
	t.Helper()
	held := largeBodiesHeld * s.opts.MaxBodyBytes
	if err := s.bodies.Acquire(t.Context(), held); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		srv.Close()
		s.bodies.Release(held)
	})
	return srv
}
