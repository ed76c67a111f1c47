package httpapi

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/sdk"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// lockedLog is a log output safe to read while the server writes.
type lockedLog struct {
	mu sync.Mutex
	sb strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sb.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sb.String()
}

// heldRecallServer serves /v1 and /mcp over a provider whose recalls
// hold until their context ends, closing started as the first begins; its
// log and metrics are answered for the test to read.
func heldRecallServer(t *testing.T) (srv *httptest.Server, started chan struct{}, logs *lockedLog, metrics *Metrics) {
	t.Helper()
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	started = make(chan struct{})
	var once sync.Once
	p.SetHook(coordinatortest.MethodRecall, func(ctx context.Context, _ any) error {
		once.Do(func() { close(started) })
		<-ctx.Done()
		return ctx.Err()
	})
	providers := func(string) (sdk.Provider, error) { return p, nil }
	cfg := coordinator.DefaultConfig()
	cfg.RecallTimeout = coordinator.MaxRecallTimeout // far past the client's leaving
	coord, err := coordinator.New(cfg, coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(context.Background()) })
	logs, metrics = &lockedLog{}, NewMetrics(nil, nil)
	srv = httptest.NewServer(New(Options{Provider: providers, Coordinator: coord, Metrics: metrics,
		Logger: hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Debug}),
		MCP: func(bind func(http.Header) (mcpserver.Caller, error)) http.Handler {
			return mcpserver.Handler(mcpserver.Options{Provider: providers, Coordinator: coord, Bind: bind})
		}}).Handler())
	t.Cleanup(srv.Close)
	return srv, started, logs, metrics
}

// TestAnAbandonedRequestIsNoServerFailure: from an outside review. A
// client that went away mid-request (a Ctrl-C of memhost export) had its
// request logged at ERROR as a failure of the server and counted a 503 in
// the metrics. It is logged as abandoned and counted 499.
func TestAnAbandonedRequestIsNoServerFailure(t *testing.T) {
	srv, started, logs, metrics := heldRecallServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/recall", strings.NewReader(`{"identity":{"id":"alice"},"query":"harbour"}`))
	go func() {
		<-started
		cancel()
	}()
	if _, err := srv.Client().Do(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("the request = %v, want it canceled by its client", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "abandoned") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	text := logs.String()
	if !strings.Contains(text, "request abandoned by its client") || strings.Contains(text, "[ERROR]") {
		t.Errorf("the log does not say the client left, or says the server failed:\n%s", text)
	}
	// The request is counted after its line is logged.
	awaitCounted(metrics, "POST /v1/recall", "499", "503")
	if n := testutil.ToFloat64(metrics.requests.WithLabelValues("POST /v1/recall", "499")); n != 1 {
		t.Errorf("requests counted 499 = %v, want 1", n)
	}
}

// TestAnAbandonedMCPCallIsNoSuccess: TestAnAbandonedRequestIsNoServerFailure's
// sibling. A call whose client went away (cancelled with it, the
// protocol tying it to its request) was counted 200, a success no client
// received, and logged nothing; it is counted 499 and logged as abandoned,
// as /v1's are.
func TestAnAbandonedMCPCallIsNoSuccess(t *testing.T) {
	srv, started, logs, metrics := heldRecallServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	req := mcpRecallRequest(ctx, srv.URL, "harbour")
	go func() {
		<-started
		cancel()
	}()
	if _, err := srv.Client().Do(req); !errors.Is(err, context.Canceled) {
		t.Fatalf("the call = %v, want it canceled by its client", err)
	}
	awaitCounted(metrics, "/mcp", "200", "499")
	if n := testutil.ToFloat64(metrics.requests.WithLabelValues("/mcp", "499")); n != 1 {
		t.Errorf("calls counted 499 = %v (200: %v), want 1", n, testutil.ToFloat64(metrics.requests.WithLabelValues("/mcp", "200")))
	}
	if text := logs.String(); !strings.Contains(text, "request abandoned by its client") || strings.Contains(text, "[ERROR]") {
		t.Errorf("the log does not say the client left, or says the server failed:\n%s", text)
	}
}

// TestAnMCPClientGoneMidBodyIsAbandoned: from an outside review. An MCP
// client that went away while it sent its body (a cut connection, a
// killed agent) was answered and counted 400, as if it had sent a bad
// request, and nothing was logged; /v1 counts the same leaving 499 and
// logs it as abandoned. So does /mcp now.
func TestAnMCPClientGoneMidBodyIsAbandoned(t *testing.T) {
	srv, _, logs, metrics := heldRecallServer(t)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	head := "POST /mcp?identity=alice HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" +
		"Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nContent-Length: 5000\r\n\r\n"
	if _, err := io.WriteString(conn, head+`{"jsonrpc":"2.0","id":1,"method":"tools/call",`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the server is reading the body
	conn.Close()
	awaitCounted(metrics, "/mcp", "400", "499")
	if n := testutil.ToFloat64(metrics.requests.WithLabelValues("/mcp", "499")); n != 1 {
		t.Errorf("requests counted 499 = %v (400: %v), want 1", n, testutil.ToFloat64(metrics.requests.WithLabelValues("/mcp", "400")))
	}
	if text := logs.String(); !strings.Contains(text, "request abandoned by its client") {
		t.Errorf("the log does not say the client left:\n%s", text)
	}
}

// awaitCounted waits, up to 10 s, until route has a request counted under
// one of codes: an abandoned request is counted after its client has
// already seen the end of it.
func awaitCounted(metrics *Metrics, route string, codes ...string) {
	counted := func() (n float64) {
		for _, code := range codes {
			n += testutil.ToFloat64(metrics.requests.WithLabelValues(route, code))
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); counted() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
}
