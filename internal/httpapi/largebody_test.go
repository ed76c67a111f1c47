package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
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
	if err := s.bodies.Acquire(t.Context(), "", held); err != nil {
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
	s.bodies.Release("", held)

	ctx, end := context.WithCancel(t.Context())
	if err := read(ctx, 1<<20); err != nil {
		t.Fatal(err)
	}
	if s.bodies.TryAcquire("", held) {
		t.Fatal("a large body's bytes were not held while its request ran")
	}
	end()
	for deadline := time.Now().Add(10 * time.Second); !s.bodies.TryAcquire("", held); {
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
	if err := s.bodies.Acquire(t.Context(), "", held); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		srv.Close()
		s.bodies.Release("", held)
	})
	return srv
}

// TestALargeBodyIsNotQueuedBehindAnotherTokensFlood: from an outside
// review. The large bodies' bound let waiting bodies in by arrival, so a
// token flooding large requests (its max_in_flight of them) put another
// token's large body behind all of its own: measured on memhost serve, a
// realm's 80 KiB turn waited 29.5 s (p50) and answered 503 while another
// realm's token sent 4 MiB requests. A waiting body of the token holding
// the fewest bytes now goes in first.
func TestALargeBodyIsNotQueuedBehindAnotherTokensFlood(t *testing.T) {
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	held, release := make(chan struct{}, 8), make(chan struct{}, 8)
	p.SetHook(coordinatortest.MethodRecall, func(ctx context.Context, req any) error {
		if q, ok := req.(sdk.RecallQuery); !ok || q.Realm != "flood" {
			return nil
		}
		// Held past its deadline: the flood's bodies stay in until one
		// is let go.
		held <- struct{}{}
		<-release
		return nil
	})
	providers := func(string) (sdk.Provider, error) { return p, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(context.Background()) })
	const floodSecret, quietSecret = "flood-secret-0123456789", "quiet-secret-0123456789"
	s := New(Options{MaxBodyBytes: 1 << 20, RequestTimeout: 5 * time.Second, Provider: providers, Coordinator: coord, Tokens: []Token{
		{Name: "flood", Secret: floodSecret, Realms: []string{"flood"}, MaxInFlight: 64},
		{Name: "quiet", Secret: quietSecret, Realms: []string{"quiet"}, MaxInFlight: 64},
	}})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	recall := func(secret, realm string, size int) int {
		body := `{"identity":{"realm":"` + realm + `","id":"bob"},"query":"harbour"}`
		req, _ := http.NewRequest("POST", srv.URL+"/v1/recall", strings.NewReader(body+strings.Repeat(" ", size-len(body))))
		req.Header.Set("Authorization", "Bearer "+secret)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	waiting := s.bodies.Waiting
	var wg sync.WaitGroup
	t.Cleanup(func() {
		close(release)
		wg.Wait()
	})
	// Two bodies of the limit fill the bound; two more wait behind them.
	for range 2 {
		wg.Go(func() { recall(floodSecret, "flood", 1<<20) })
	}
	<-held
	<-held
	for range 2 {
		wg.Go(func() { recall(floodSecret, "flood", 1<<20) })
	}
	for waiting() < 2 {
		runtime.Gosched()
	}
	quiet := make(chan int, 1)
	go func() { quiet <- recall(quietSecret, "quiet", 2*largeBody) }()
	for waiting() < 3 {
		runtime.Gosched()
	}
	release <- struct{}{} // one flood request ends
	if code := <-quiet; code != http.StatusOK {
		t.Fatalf("a quiet token's large body behind another token's flood = %d, want 200 once one of the flood's requests ended", code)
	}
}
