package httpapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/guide"
	"github.com/memhost/memhost/sdk"
)

// newTestServer serves the API over an in-memory provider. End-to-end
// coverage through real plugin processes lives in cmd/memhost; these tests
// pin the HTTP layer's own rules quickly and under the race detector.
func newTestServer(t *testing.T, opts Options, caps ...sdk.Capability) (*httptest.Server, *coordinatortest.Provider) {
	t.Helper()
	if len(caps) == 0 {
		caps = []sdk.Capability{sdk.CapWrite, sdk.CapFetch, sdk.CapForget}
	}
	p, providers, coord := testCoordinator(t, caps...)
	opts.Provider = providers
	opts.Coordinator = coord
	opts.Guide = guide.NewSessions(coord, guide.SessionsOptions{Size: 16})
	srv := httptest.NewServer(New(opts).Handler())
	t.Cleanup(srv.Close)
	return srv, p
}

// testConfig is the coordinator's default configuration with a recall
// timeout of 30 s, not 500 ms: a test's recall or turn must not fail (or
// skip as recall_failed) because a loaded machine starved it for half a
// second; a test of the timeout sets its own.
func testConfig() coordinator.Config {
	cfg := coordinator.DefaultConfig()
	cfg.RecallTimeout = coordinator.MaxRecallTimeout
	return cfg
}

// testCoordinator is a coordinator over one in-memory provider with caps
// (testConfig), closed when the test ends, and the provider lookup that
// answers it.
func testCoordinator(t *testing.T, caps ...sdk.Capability) (*coordinatortest.Provider, func(string) (sdk.Provider, error), *coordinator.Coordinator) {
	t.Helper()
	return coordinatorWith(t, testConfig(), caps...)
}

// coordinatorWith is testCoordinator with cfg.
func coordinatorWith(t *testing.T, cfg coordinator.Config, caps ...sdk.Capability) (*coordinatortest.Provider, func(string) (sdk.Provider, error), *coordinator.Coordinator) {
	t.Helper()
	p := coordinatortest.NewProvider(caps...)
	providers := func(string) (sdk.Provider, error) { return p, nil }
	coord, err := coordinator.New(cfg, coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(t.Context()) })
	return p, providers, coord
}

func call(t *testing.T, srv *httptest.Server, method, path, token string, body []byte) (int, errorBody) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e errorBody
	json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e
}

func TestRequestDecoding(t *testing.T) {
	srv, p := newTestServer(t, Options{MaxBodyBytes: 1024})
	cases := []struct {
		name   string
		body   string
		status int
		code   string
		msg    string
	}{
		{"empty body", "", 400, "invalid_argument", "empty"},
		{"not an object", `[1,2]`, 400, "invalid_argument", "request body"},
		{"trailing data", `{"records":[{"scope":"realm","kind":"fact","title":"a"}]} {}`, 400, "invalid_argument", "trailing"},
		{"unknown field", `{"records":[{"scope":"realm","kind":"fact","title":"a","titel":"b"}]}`, 400, "invalid_argument", `records[0].titel: unknown field`},
		{"case-folded field", `{"Records":[{"scope":"realm","kind":"fact","title":"a"}]}`, 400, "invalid_argument", `Records: unknown field`},
		{"duplicate key", `{"records":[{"scope":"realm","kind":"fact","title":"a","title":"b"}]}`, 400, "invalid_argument", `records[0].title: appears more than once`},
		{"extra closing brace", `{"records":[{"scope":"realm","kind":"fact","title":"a"}]}}`, 400, "invalid_argument", "trailing data"},
		{"lone surrogate", `{"records":[{"scope":"realm","kind":"fact","title":"\ud800"}]}`, 400, "invalid_argument", "surrogate"},
		{"wrong type", `{"records":[{"scope":"realm","kind":"fact","title":7}]}`, 400, "invalid_argument", "records[0].title: must be a string, not a number"},
		{"invalid utf-8", "{\"records\":[{\"scope\":\"realm\",\"kind\":\"fact\",\"title\":\"\xc3\x28\"}]}", 400, "invalid_argument", "UTF-8"},
		{"over the body limit", `{"records":[{"scope":"realm","kind":"fact","title":"` + strings.Repeat("x", 2000) + `"}]}`, 413, "too_large", "1024-byte limit"},
		{"no records", `{"records":[]}`, 400, "invalid_argument", "at least one"},
		{"bad record names its index", `{"records":[{"scope":"realm","kind":"fact","title":"ok"},{"scope":"realm","kind":"nope","title":"x"}]}`, 400, "invalid_argument", "records[1].kind: unknown kind"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, e := call(t, srv, "POST", "/v1/records", "", []byte(c.body))
			if status != c.status || e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.msg) {
				t.Fatalf("= %d %+v, want %d %s containing %q", status, e, c.status, c.code, c.msg)
			}
			// A refused field is named the same in the message and in
			// the field member.
			if field, _, ok := strings.Cut(e.Error.Message, ": "); ok && e.Error.Field != "" && e.Error.Field != field {
				t.Fatalf("field %q, but the message names %q", e.Error.Field, field)
			}
		})
	}
	if n := p.Calls("Remember"); n != 0 {
		t.Fatalf("refused requests reached the provider %d times", n)
	}
}

func TestAuthBindsRealms(t *testing.T) {
	srv, _ := newTestServer(t, Options{Tokens: []Token{{Name: "a", Secret: "secret-a-0123456789", Realms: []string{"default"}}}})
	recall := []byte(`{"identity":{"realm":"other","id":"x"},"query":"q"}`)
	cases := []struct {
		name, token string
		body        []byte
		status      int
	}{
		{"missing", "", recall, 401},
		{"unknown", "nope", recall, 401},
		{"other realm", "secret-a-0123456789", recall, 403},
		{"own realm", "secret-a-0123456789", []byte(`{"identity":{"id":"x"},"query":"q"}`), 200},
	}
	for _, c := range cases {
		status, e := call(t, srv, "POST", "/v1/recall", c.token, c.body)
		if status != c.status {
			t.Errorf("%s: status %d %+v, want %d", c.name, status, e, c.status)
		}
		if status == 403 && !strings.Contains(e.Error.Message, `realm "other"`) {
			t.Errorf("%s: message %q", c.name, e.Error.Message)
		}
	}
	// Health endpoints need no token.
	if status, _ := call(t, srv, "GET", "/healthz", "", nil); status != 200 {
		t.Fatalf("healthz = %d", status)
	}
}

func TestUndeclaredCapabilityIs501(t *testing.T) {
	srv, _ := newTestServer(t, Options{}, sdk.CapWrite)
	status, e := call(t, srv, "GET", "/v1/records/abc", "", nil)
	if status != 501 || e.Error.Code != "unsupported" {
		t.Fatalf("get without fetch = %d %+v", status, e)
	}
	status, e = call(t, srv, "POST", "/v1/manifest", "", []byte(`{"identity":{"id":"a"}}`))
	if status != 501 || e.Error.Code != "unsupported" {
		t.Fatalf("manifest without capability = %d %+v", status, e)
	}
}

func TestStatusForEveryCode(t *testing.T) {
	want := map[sdk.Code]int{
		sdk.CodeInvalidArgument: 400, sdk.CodePermissionDenied: 403, sdk.CodeNotFound: 404,
		sdk.CodeConflict: 409, sdk.CodeTooLarge: 413, sdk.CodeUnsupported: 501,
		sdk.CodeUnavailable: 503, sdk.CodeDeadlineExceeded: 504, sdk.CodeInternal: 500,
	}
	for code, status := range want {
		if got := statusOf(string(code)); got != status {
			t.Errorf("statusOf(%s) = %d, want %d", code, got, status)
		}
	}
	if got := statusOf("unauthenticated"); got != 401 {
		t.Errorf("unauthenticated = %d", got)
	}
}

// TestConcurrentSessionsStayInBudget drives many sessions' turns through
// the HTTP layer at once (run with -race): no session ever passes its
// 60 KiB budget and no record is injected twice in one session.
func TestConcurrentSessionsStayInBudget(t *testing.T) {
	srv, p := newTestServer(t, Options{})
	// Found by their titles: a body without the turn's words is injected
	// whole, so each record can come at most once (never excerpt, then whole).
	body := strings.Repeat("crema notes ", 160)
	for i := range 60 {
		p.MustAdd("default", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: fmt.Sprintf("espresso note %d", i), Body: body})
	}
	var wg sync.WaitGroup
	for s := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			total := 0
			seen := map[string]bool{}
			for turn := range 12 {
				req, _ := json.Marshal(map[string]any{"identity": map[string]string{"id": "agent"}, "session": fmt.Sprintf("s%d", s), "content": fmt.Sprintf("espresso detail %d", turn)})
				resp, err := srv.Client().Post(srv.URL+"/v1/turns/inject", "application/json", bytes.NewReader(req))
				if err != nil {
					t.Error(err)
					return
				}
				var out coordinator.TurnInjection
				json.NewDecoder(resp.Body).Decode(&out)
				resp.Body.Close()
				total += out.Bytes
				for _, id := range out.RecordIDs {
					if seen[id] {
						t.Errorf("session s%d: record %s injected twice", s, id)
					}
					seen[id] = true
				}
			}
			if total > 60<<10 {
				t.Errorf("session s%d injected %d bytes, over 60 KiB", s, total)
			}
			if total == 0 {
				t.Errorf("session s%d injected nothing", s)
			}
		}()
	}
	wg.Wait()
}

func TestWrongMethodAnswers405(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	cases := []struct {
		method, path string
		status       int
		allow        string
	}{
		{"PUT", "/v1/records", 405, "GET, POST"},
		{"PUT", "/v1/records/r1", 405, "GET, DELETE"},
		{"GET", "/v1/recall", 405, "POST"},
		{"POST", "/healthz", 405, "GET"},
		{"GET", "/v1/nope", 404, ""},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var e errorBody
		json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s %s = %d Allow %q, want %d Allow %q", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), c.status, c.allow)
		}
		if c.status == 405 && e.Error.Code != "method_not_allowed" {
			t.Errorf("%s %s code = %q", c.method, c.path, e.Error.Code)
		}
	}
}

func TestErrorMessagesSayTheProblemOnce(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	for _, body := range []string{
		`{"records":[{"scope":"realm","kind":"fact","title":"a","titel":"b"}]}`,
		`{"records":[{"scope":"realm","kind":"nope","title":"x"}]}`,
		`{"records":[{"scope":"realm","kind":"fact","title":7}]}`,
	} {
		_, e := call(t, srv, "POST", "/v1/records", "", []byte(body))
		msg := e.Error.Message
		if e.Error.Code != "invalid_argument" || strings.HasSuffix(msg, "invalid argument") || strings.Contains(msg, "json:") || strings.Contains(msg, "Go ") || strings.Contains(msg, "sdk.") {
			t.Errorf("%s: message %q (code %q) repeats the code or names Go internals", body, msg, e.Error.Code)
		}
	}
}

func TestRequestIDs(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	post := func(id string) (*http.Response, errorBody) {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/records", strings.NewReader(`{"records":[]}`))
		if id != "" {
			req.Header.Set(HeaderRequestID, id)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var e errorBody
		json.NewDecoder(resp.Body).Decode(&e)
		return resp, e
	}
	resp, e := post("")
	if got := resp.Header.Get(HeaderRequestID); len(got) != 16 || e.Error.RequestID != got {
		t.Fatalf("fresh id: header %q, body %q", got, e.Error.RequestID)
	}
	if resp, e := post("client-abc.1"); resp.Header.Get(HeaderRequestID) != "client-abc.1" || e.Error.RequestID != "client-abc.1" {
		t.Fatalf("client id not kept: header %q body %q", resp.Header.Get(HeaderRequestID), e.Error.RequestID)
	}
	// An unsafe id (here one that would forge a log field) is replaced.
	if resp, _ := post("x\" level=error"); resp.Header.Get(HeaderRequestID) == "x\" level=error" {
		t.Fatal("an unsafe client request id was echoed")
	}
}

func TestRequiredFieldsAreEnforced(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	cases := []struct{ path, body, msg string }{
		{"/v1/defang", `{"identity":{"id":"a"}}`, "content: is required"},
		{"/v1/turns/inject", `{"identity":{"id":"a"},"session":"s"}`, "content: is required"},
		{"/v1/guide/session-start", `{"identity":{"id":"a"},"session":"s"}`, "task: is required"},
	}
	for _, c := range cases {
		status, e := call(t, srv, "POST", c.path, "", []byte(c.body))
		if status != 400 || e.Error.Message != c.msg {
			t.Errorf("%s %s = %d %q, want 400 %q", c.path, c.body, status, e.Error.Message, c.msg)
		}
	}
	// Present but empty is not absent.
	if status, e := call(t, srv, "POST", "/v1/defang", "", []byte(`{"identity":{"id":"a"},"content":""}`)); status != 200 {
		t.Errorf("empty content = %d %+v", status, e)
	}
}

// POST /v1/recall is a recall path: a provider that hangs fails it at the
// coordinator's recall timeout, not at the request timeout.
func TestRecallRunsUnderTheRecallTimeout(t *testing.T) {
	// Both bounds well past what a loaded machine takes to reach the
	// provider (the recall timeout passes while the provider hangs), and
	// apart, so that a recall under the request timeout is told apart.
	cfg := coordinator.DefaultConfig()
	cfg.RecallTimeout = 3 * time.Second
	p, providers, coord := coordinatorWith(t, cfg, sdk.CapWrite, sdk.CapFetch, sdk.CapForget)
	srv := httptest.NewServer(New(Options{RequestTimeout: time.Minute, Provider: providers, Coordinator: coord}).Handler())
	t.Cleanup(srv.Close)
	lefts := make(chan time.Duration, 1)
	p.SetHook(coordinatortest.MethodRecall, func(ctx context.Context, _ any) error {
		var left time.Duration
		if dl, ok := ctx.Deadline(); ok {
			left = time.Until(dl)
		}
		lefts <- left
		<-ctx.Done()
		return fmt.Errorf("provider: %w", sdk.ErrDeadline)
	})
	code, e := call(t, srv, "POST", "/v1/recall", "", []byte(`{"identity":{"id":"alice"},"query":"coffee"}`))
	if code != http.StatusGatewayTimeout || e.Error.Code != string(sdk.CodeDeadlineExceeded) {
		t.Fatalf("recall on a hung provider = %d %+v, want 504 deadline_exceeded", code, e)
	}
	if left, limit := <-lefts, cfg.RecallTimeout; left <= 0 || left > limit {
		t.Fatalf("the provider's deadline was %v away, want at most the recall timeout %v", left, limit)
	}
}

// TestRequestIDInEveryLogLine: the coordinator's lines for a request (here
// a failed recall and the skip it causes) carry the request's id, the one
// in its X-Request-Id header, as the HTTP layer's own lines do.
func TestRequestIDInEveryLogLine(t *testing.T) {
	var logs logBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true, Level: hclog.Debug})
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch)
	p.SetHook(coordinatortest.MethodRecall, func(context.Context, any) error {
		return fmt.Errorf("index file vanished: %w", sdk.ErrUnavailable)
	})
	providers := func(string) (sdk.Provider, error) { return p, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(t.Context()) })
	srv := httptest.NewServer(New(Options{Provider: providers, Coordinator: coord, Logger: logger.Named("http")}).Handler())
	t.Cleanup(srv.Close)

	// A skip is logged once per identity and reason: each round is a new
	// identity. A client's id may be any request's: the lines of two
	// requests sent under one id carry two host ids (host_request_id).
	hostIDs := map[any]bool{}
	for round, sent := range []string{"turn-42", "turn-42", ""} {
		logs.Reset()
		req, _ := http.NewRequest("POST", srv.URL+"/v1/turns/inject", strings.NewReader(`{"identity":{"id":"alice`+strconv.Itoa(round)+`"},"session":"s1","content":"espresso order?"}`))
		if sent != "" {
			req.Header.Set(HeaderRequestID, sent)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get(HeaderRequestID)
		if resp.StatusCode != 200 || id == "" || (sent != "" && id != sent) {
			t.Fatalf("sent id %q: status %d, header %q", sent, resp.StatusCode, id)
		}
		var coordinatorLines int
		hostID := any(nil)
		for i, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
			var l map[string]any
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if l["request_id"] != id {
				t.Errorf("sent id %q: line without request_id %q: %s", sent, id, line)
			}
			if i == 0 {
				hostID = l["host_request_id"]
			}
			if l["host_request_id"] != hostID {
				t.Errorf("sent id %q: host_request_id %v, the request's first line's %v: %s", sent, l["host_request_id"], hostID, line)
			}
			if strings.HasPrefix(fmt.Sprint(l["@module"]), "coordinator") {
				coordinatorLines++
			}
		}
		// "recall failed; injecting nothing" and "injected nothing".
		if coordinatorLines < 2 {
			t.Fatalf("sent id %q: %d coordinator lines, want the failed recall and the skip:\n%s", sent, coordinatorLines, logs.String())
		}
		switch h, _ := hostID.(string); {
		case sent == "" && hostID != nil:
			t.Errorf("a host-made id is paired with another: host_request_id %v", hostID)
		case sent != "" && (len(h) != 16 || h == sent || hostIDs[h]):
			t.Errorf("sent id %q: host_request_id %v, want a fresh id of the host's, one per request", sent, hostID)
		}
		hostIDs[hostID] = true
	}
}

// logBuffer is a log sink safe for concurrent writers.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}

// TestInFlightGauge: a request counts in memhost_http_requests_in_flight
// under its route while it is served and leaves it when answered.
func TestInFlightGauge(t *testing.T) {
	srv, p := newTestServer(t, Options{})
	entered, held := make(chan struct{}), make(chan struct{})
	// Registered after the server's, so it runs first: a failed check
	// must not leave the server's Close waiting on the held write.
	release := sync.OnceFunc(func() { close(held) })
	t.Cleanup(release)
	p.SetHook(coordinatortest.MethodRemember, func(ctx context.Context, _ any) error {
		close(entered)
		<-held
		return nil
	})
	answered := make(chan int, 1)
	go func() {
		resp, err := srv.Client().Post(srv.URL+"/v1/records", "application/json", strings.NewReader(`{"records":[{"scope":"realm","kind":"fact","title":"held"}]}`))
		if err != nil {
			answered <- -1
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	const series = `memhost_http_requests_in_flight{route="POST /v1/records"}`
	scrape := func() string {
		resp, err := srv.Client().Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		for line := range strings.Lines(string(body)) {
			if strings.HasPrefix(line, series+" ") {
				return strings.TrimSpace(strings.TrimPrefix(line, series))
			}
		}
		return ""
	}
	<-entered
	if got := scrape(); got != "1" {
		t.Errorf("while held: %s = %q, want 1", series, got)
	}
	release()
	if code := <-answered; code != 200 {
		t.Fatalf("the held write answered %d", code)
	}
	if got := scrape(); got != "0" {
		t.Errorf("once answered: %s = %q, want 0", series, got)
	}
}

// TestTraceDropsAreExported: the trace recorder's count of traces not
// stored shows on /metrics as it stands at the scrape.
func TestTraceDropsAreExported(t *testing.T) {
	m := NewMetrics(nil, nil)
	var dropped atomic.Int64
	m.WatchTraces(dropped.Load)
	dropped.Store(3)
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if !strings.Contains(w.Body.String(), "\nmemhost_trace_dropped_total 3\n") {
		t.Errorf("/metrics after 3 dropped traces:\n%s", w.Body.String())
	}
}

// TestAuthorizationScheme: the scheme's name is matched without regard
// to case (RFC 9110 §11.1), and a 401 names the scheme it wants in
// WWW-Authenticate.
func TestAuthorizationScheme(t *testing.T) {
	srv, _ := newTestServer(t, Options{Tokens: []Token{{Name: "t", Secret: "tok", Realms: []string{"default"}, Role: "application"}}})
	for _, c := range []struct {
		header string
		status int
	}{
		{"Bearer tok", 501}, {"bearer tok", 501}, {"BEARER tok", 501}, // past authentication: this provider lists no scopes
		{"Bearer nope", 401}, {"Basic dG9r", 401}, {"", 401},
	} {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/scopes", nil)
		if c.header != "" {
			req.Header.Set("Authorization", c.header)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("Authorization %q = %d, want %d", c.header, resp.StatusCode, c.status)
		}
		if got := resp.Header.Get("WWW-Authenticate"); (c.status == 401) != strings.HasPrefix(got, "Bearer ") {
			t.Errorf("Authorization %q: WWW-Authenticate %q", c.header, got)
		}
	}
}

// TestStalledReaderIsDropped: from an outside review. A client that
// sends a recall and never reads its answer held the request, and the
// answer's memory, until it disconnected, minutes past every timeout.
// The answer's write now has a deadline: past it the server closes the
// connection and the client gets less than the answer.
func TestStalledReaderIsDropped(t *testing.T) {
	old := AnswerWriteTimeout
	AnswerWriteTimeout = 200 * time.Millisecond
	t.Cleanup(func() { AnswerWriteTimeout = old })
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch, sdk.CapForget)
	providers := func(string) (sdk.Provider, error) { return p, nil }
	cfg := coordinator.DefaultConfig()
	// The recall of 40 records of 52 KB must be answered, not cut at the
	// default 500 ms on a loaded machine under the race detector (a
	// short error answer fits the socket buffers, and is read whole).
	cfg.RecallTimeout = coordinator.MaxRecallTimeout
	coord, err := coordinator.New(cfg, coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(t.Context()) })
	h := New(Options{Provider: providers, Coordinator: coord}).Handler()
	// The recall's handler says when it returns: its answer given up on.
	recalled := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.URL.Path == "/v1/recall" {
			recalled <- struct{}{}
		}
	}))
	// Small socket buffers on both ends, so a few hundred KiB fill them.
	srv.Listener = smallBuffers{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	body := strings.Repeat("coffee beans roasted dark ", 2000)
	var records []string
	for i := range 40 {
		records = append(records, fmt.Sprintf(`{"scope":"realm","kind":"fact","title":"roast %d","body":%q}`, i, body))
	}
	if status, e := call(t, srv, "POST", "/v1/records", "", []byte(`{"records":[`+strings.Join(records, ",")+`]}`)); status != 200 {
		t.Fatalf("write = %d %+v", status, e)
	}
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4096)
	req := `{"identity":{"id":"alice"},"query":"coffee","limit":40}`
	fmt.Fprintf(conn, "POST /v1/recall HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(req), req)
	// Not reading until the server has given the answer up. A fixed
	// sleep (2 s) could end, on a loaded machine, before the server had
	// even made the answer; then the client read it whole. The wait's
	// bound only ends a test whose server never gives up.
	select {
	case <-recalled:
	case <-time.After(30 * time.Second):
		t.Fatal("the server still writes the answer to a client that has not read for 30 s: the write has no deadline")
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil || n >= resp.ContentLength {
		t.Fatalf("a stalled reader got %d of %d bytes (%v), want the connection closed part way", n, resp.ContentLength, err)
	}
}

// smallBuffers gives each accepted connection a small send buffer.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// scoring answers its double's hits with one score for all.
type scoring struct {
	*coordinatortest.Provider
	score float64
}

func (p scoring) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	hits, err := p.Provider.Recall(ctx, q)
	for i := range hits {
		hits[i].Score = p.score
	}
	return hits, err
}

// recallOver answers POST /v1/recall of query over a provider scoring
// every hit score, one of alice's own turns stored: status, body, logs.
func recallOver(t *testing.T, score float64, query string) (int, []byte, string) {
	t.Helper()
	var logs logBuffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, JSONFormat: true, Level: hclog.Info})
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch, sdk.CapForget)
	providers := func(string) (sdk.Provider, error) { return scoring{p, score}, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(t.Context()) })
	srv := httptest.NewServer(New(Options{Provider: providers, Coordinator: coord, Logger: logger}).Handler())
	t.Cleanup(srv.Close)
	p.MustAdd("default", sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "turn", Body: "I said I like green tea",
		Tags: []string{"memhost:user"}, Thread: &sdk.Thread{ID: "s1", Seq: 1}})
	resp, err := http.Post(srv.URL+"/v1/recall", "application/json", strings.NewReader(`{"identity":{"id":"alice"},"query":"`+query+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body, logs.String()
}

// TestHugeScoreRecallAnswersItsHits: a provider's finite score at the top
// of float64's range, which the host accepts, stays finite through the
// host's ranking (the first-person question doubles a user turn's score)
// and the recall is answered with the hit.
func TestHugeScoreRecallAnswersItsHits(t *testing.T) {
	for _, q := range []string{"green tea", "what did I say about green tea"} {
		status, body, _ := recallOver(t, 1.7e308, q)
		var answer struct {
			Hits []struct {
				Score float64 `json:"score"`
			} `json:"hits"`
		}
		if err := json.Unmarshal(body, &answer); status != 200 || err != nil || len(answer.Hits) != 1 || answer.Hits[0].Score < 1.7e308 {
			t.Errorf("query %q: %d %q (%v), want the one hit, its score at least the provider's", q, status, body, err)
		}
	}
}

// TestUnencodableAnswerIs500: an answer JSON cannot hold (here a score
// that is not finite, which only an in-process provider can answer: the
// plugin client refuses it) is answered 500 in the error envelope and
// logged, not as a 200 with an empty body.
func TestUnencodableAnswerIs500(t *testing.T) {
	status, body, logs := recallOver(t, math.Inf(1), "green tea")
	var e errorBody
	if err := json.Unmarshal(body, &e); status != http.StatusInternalServerError || err != nil || e.Error.Code != "internal" || e.Error.Message == "" {
		t.Errorf("answered %d %q (%v), want 500 with code internal", status, body, err)
	}
	if strings.Contains(e.Error.Message, "json:") {
		t.Errorf("the message quotes encoding/json: %q", e.Error.Message)
	}
	if !strings.Contains(logs, "request failed") || !strings.Contains(logs, "+Inf") {
		t.Errorf("no error line names the failure:\n%s", logs)
	}
}

// TestErrorAfterTheAnswerBeganIsLogged: a handler failing once its answer
// is under way gets no error envelope appended to what it sent (nor a
// second status line); the failure is logged.
func TestErrorAfterTheAnswerBeganIsLogged(t *testing.T) {
	var logs logBuffer
	_, providers, coord := testCoordinator(t)
	s := New(Options{Provider: providers, Coordinator: coord, Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})})
	mux := http.NewServeMux()
	s.route(mux, "GET /v1/partial", func(_ context.Context, _ caller, w http.ResponseWriter, _ *http.Request) error {
		_, _ = io.WriteString(w, "partial\n")
		return fmt.Errorf("the stream broke: %w", sdk.ErrUnavailable)
	})
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/partial", nil))
	if rec.Code != 200 || rec.Body.String() != "partial\n" {
		t.Errorf("answered %d %q, want the 200 and the partial body alone", rec.Code, rec.Body.String())
	}
	if !strings.Contains(logs.String(), "the stream broke") {
		t.Errorf("the failure is not logged:\n%s", logs.String())
	}
}

// TestRecallAnswersNoExpiredRecord: a record whose expiry passed, answered
// by a store whose clock or filter is behind, is not answered by POST
// /v1/recall, even for a query whose reference time is before it; a
// record still live is. Before, /v1/recall returned it, where a turn's
// injection and memory_recall dropped it (from an outside review).
func TestRecallAnswersNoExpiredRecord(t *testing.T) {
	srv, p := newTestServer(t, Options{})
	p.SetNow(func() time.Time { return time.Now().Add(-2 * time.Hour) }) // the store thinks both are live
	p.MustAdd("default", sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "espresso gone", Body: "b", ExpiresAt: time.Now().Add(-time.Hour)})
	p.MustAdd("default", sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "espresso live", Body: "b", ExpiresAt: time.Now().Add(time.Hour)})
	var answer struct {
		Hits []struct {
			Record sdk.Record `json:"record"`
		} `json:"hits"`
	}
	body := `{"identity":{"id":"alice"},"query":"espresso","now":"` + time.Now().Add(-48*time.Hour).UTC().Format(time.RFC3339) + `"}`
	if status := doJSON(t, srv, "POST", "/v1/recall", "", body, &answer); status != 200 || len(answer.Hits) != 1 || answer.Hits[0].Record.Title != "espresso live" {
		t.Fatalf("recall = %d %+v, want the live record alone", status, answer)
	}
}

// TestFullManifestSaysItIsTruncated: a full manifest of more rows than the
// host reads answers the first sdk.MaxFullManifestRows and "truncated".
func TestFullManifestSaysItIsTruncated(t *testing.T) {
	if testing.Short() {
		t.Skip("stores 50,001 records")
	}
	srv, p := newTestServer(t, Options{}, sdk.CapWrite, sdk.CapFetch, sdk.CapManifest)
	recs := make([]sdk.Record, sdk.MaxFullManifestRows+1)
	for i := range recs {
		recs[i] = sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: fmt.Sprintf("note %d", i), Body: "b"}
	}
	p.MustAdd("default", recs...)
	var answer struct {
		Rows      []sdk.ManifestRow `json:"rows"`
		Truncated bool              `json:"truncated"`
	}
	if status := doJSON(t, srv, "POST", "/v1/manifest", "", `{"identity":{"id":"alice"},"tier":"full"}`, &answer); status != 200 || len(answer.Rows) != sdk.MaxFullManifestRows || !answer.Truncated {
		t.Fatalf("full manifest = %d, %d rows, truncated %v; want %d rows, truncated", status, len(answer.Rows), answer.Truncated, sdk.MaxFullManifestRows)
	}
}

// TestUnknownEndpointNamesThePathSent: a path no route serves is named
// as sent, not shortened as a host's path would be: a proxy's prefix or
// a wrong version ("/api/v1/records", "/v2/records") read as "…/records"
// would hide the very part the client got wrong.
func TestUnknownEndpointNamesThePathSent(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	for _, p := range []string{"/api/v1/records", "/v2/records", "/V1/plugins", "/v1/nothing"} {
		code, e := call(t, srv, http.MethodGet, p, "", nil)
		if want := "no such endpoint: GET " + p; code != http.StatusNotFound || e.Error.Code != "not_found" || e.Error.Message != want {
			t.Errorf("GET %s answered %d %s %q, want 404 not_found %q", p, code, e.Error.Code, e.Error.Message, want)
		}
	}
}
