package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/memhost/memhost/internal/apispec"
	"github.com/memhost/memhost/sdk"
)

// fakeReindexer declares only the reindex capability. Its Reindex reports
// the steps, then answers n or err; with hold set it first waits for hold
// (or its ctx), having said so on started.
type fakeReindexer struct {
	steps   [][2]int
	n       int
	err     error
	hold    chan struct{}
	started chan struct{}

	mu     sync.Mutex
	calls  int
	realms []string
}

func (f *fakeReindexer) Capabilities() sdk.Capabilities { return sdk.Capabilities{sdk.CapReindex} }

func (f *fakeReindexer) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) { return nil, nil }

func (f *fakeReindexer) Reindex(ctx context.Context, realm string, progress func(done, total int)) (int, error) {
	f.mu.Lock()
	f.calls++
	f.realms = append(f.realms, realm)
	f.mu.Unlock()
	if f.hold != nil {
		f.started <- struct{}{}
		select {
		case <-f.hold:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	for _, s := range f.steps {
		progress(s[0], s[1])
	}
	return f.n, f.err
}

func (f *fakeReindexer) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

// reindexServer serves the API over p, with two tokens: an application
// one for realms default and acme, an agent one for default.
func reindexServer(t *testing.T, p sdk.Provider) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(reindexAPI(p))
	t.Cleanup(srv.Close)
	return srv
}

func reindexAPI(p sdk.Provider) http.Handler {
	return New(Options{
		Provider: func(string) (sdk.Provider, error) { return p, nil },
		Tokens: []Token{
			{Name: "app", Secret: "app-secret", Realms: []string{"default", "acme"}, Role: RoleApplication},
			{Name: "bot", Secret: "bot-secret", Realms: []string{"default"}, Role: RoleAgent},
		},
	}).Handler()
}

// reindexCall posts body and answers the status, the content type and the
// answer's lines (one line, the error envelope, when refused). Every
// exchange is held to docs/openapi.yaml.
func reindexCall(t *testing.T, srv *httptest.Server, token, body string) (int, string, []ReindexLine) {
	t.Helper()
	spec := apiDoc(t)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/admin/reindex", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if err := spec.Check(req, []byte(body), resp.StatusCode, resp.Header, data); err != nil {
		t.Errorf("%v\nanswer: %s", err, data)
	}
	var lines []ReindexLine
	dec := json.NewDecoder(bytes.NewReader(data))
	for dec.More() {
		var l ReindexLine
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("answer %q: %v", data, err)
		}
		lines = append(lines, l)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), lines
}

func TestReindexEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		p      *fakeReindexer
		token  string
		body   string
		status int
		code   string // of the error envelope, or of the last line
		realm  string // asked of the provider; "" when it must not be called
		lines  string // the answer's lines, abridged
	}{
		{name: "progress then result", p: &fakeReindexer{steps: [][2]int{{0, 3}, {3, 3}}, n: 3}, token: "app-secret", body: `{"realm":"acme"}`,
			status: 200, realm: "acme", lines: "progress 0/3, progress 3/3, result acme 3"},
		{name: "default realm", p: &fakeReindexer{n: 0}, token: "app-secret", body: `{}`,
			status: 200, realm: "default", lines: "result default 0"},
		{name: "agent token", p: &fakeReindexer{}, token: "bot-secret", body: `{}`, status: 403, code: "permission_denied"},
		{name: "realm of another token", p: &fakeReindexer{}, token: "bot-secret", body: `{"realm":"acme"}`, status: 403, code: "permission_denied"},
		{name: "no token", p: &fakeReindexer{}, body: `{}`, status: 401, code: "unauthenticated"},
		{name: "unknown field", p: &fakeReindexer{}, token: "app-secret", body: `{"realm":"acme","all":true}`, status: 400, code: "invalid_argument"},
		{name: "bad realm", p: &fakeReindexer{}, token: "app-secret", body: `{"realm":"Not A Realm"}`, status: 400, code: "invalid_argument"},
		{name: "failure before progress keeps its status", p: &fakeReindexer{err: fmt.Errorf("plugin sqlite (sqlite): %w", sdk.ErrUnavailable)}, token: "app-secret", body: `{}`,
			status: 503, code: "unavailable", realm: "default"},
		{name: "failure after progress is the last line", p: &fakeReindexer{steps: [][2]int{{0, 9}}, err: fmt.Errorf("disk: %w", sdk.ErrNoSpace)}, token: "app-secret", body: `{}`,
			status: 200, code: "storage_full", realm: "default", lines: "progress 0/9, error storage_full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, ctype, lines := reindexCall(t, reindexServer(t, tc.p), tc.token, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d (lines %+v)", status, tc.status, lines)
			}
			if tc.realm == "" && tc.p.callCount() != 0 {
				t.Errorf("refused with %d, but the provider was asked to reindex", status)
			}
			if tc.realm != "" && (tc.p.callCount() != 1 || tc.p.realms[0] != tc.realm) {
				t.Errorf("provider asked for %v, want one reindex of %q", tc.p.realms, tc.realm)
			}
			if status != 200 {
				var e errorBody
				if len(lines) == 1 && lines[0].Error != nil {
					e.Error = *lines[0].Error
				}
				if ctype != "application/json" || e.Error.Code != tc.code {
					t.Errorf("answer %s %+v, want an application/json error %s", ctype, lines, tc.code)
				}
				return
			}
			if ctype != apispec.NDJSON {
				t.Errorf("content type %q, want %s", ctype, apispec.NDJSON)
			}
			var got []string
			for _, l := range lines {
				switch {
				case l.Progress != nil:
					got = append(got, fmt.Sprintf("progress %d/%d", l.Progress.Done, l.Progress.Total))
				case l.Result != nil:
					got = append(got, fmt.Sprintf("result %s %d", l.Result.Realm, l.Result.Reindexed))
				case l.Error != nil:
					got = append(got, "error "+l.Error.Code)
				}
			}
			if strings.Join(got, ", ") != tc.lines {
				t.Errorf("lines %q, want %q", strings.Join(got, ", "), tc.lines)
			}
		})
	}
}

func TestReindexUnsupportedIs501(t *testing.T) {
	srv, _ := newTestServer(t, Options{}, sdk.CapWrite)
	status, e := call(t, srv, "POST", "/v1/admin/reindex", "", []byte(`{}`))
	if status != 501 || e.Error.Code != "unsupported" || !strings.Contains(e.Error.Message, "reindex") {
		t.Fatalf("reindex of a provider without the capability = %d %+v, want 501 unsupported naming reindex", status, e)
	}
}

// TestReindexOfARealmRunsOnce: while a realm's reindex runs, a second of
// the same realm is refused with 409, one of another realm runs, and once
// the first ends the realm can be reindexed again.
func TestReindexOfARealmRunsOnce(t *testing.T) {
	p := &fakeReindexer{n: 1, hold: make(chan struct{}), started: make(chan struct{}, 2)}
	srv := reindexServer(t, p)
	first := make(chan int)
	go func() {
		status, _, _ := reindexCall(t, srv, "app-secret", `{"realm":"acme"}`)
		first <- status
	}()
	<-p.started
	status, _, lines := reindexCall(t, srv, "app-secret", `{"realm":"acme"}`)
	if status != 409 || len(lines) != 1 || lines[0].Error == nil || !strings.Contains(lines[0].Error.Message, "already running") {
		t.Errorf("second reindex of acme = %d %+v, want 409 saying one is already running", status, lines)
	}
	other := make(chan int)
	go func() {
		status, _, _ := reindexCall(t, srv, "app-secret", `{"realm":"default"}`)
		other <- status
	}()
	<-p.started
	close(p.hold)
	if s := <-first; s != 200 {
		t.Errorf("first reindex = %d, want 200", s)
	}
	if s := <-other; s != 200 {
		t.Errorf("reindex of another realm meanwhile = %d, want 200", s)
	}
	p.hold = nil
	if status, _, _ := reindexCall(t, srv, "app-secret", `{"realm":"acme"}`); status != 200 {
		t.Errorf("reindex of acme after the first ended = %d, want 200", status)
	}
	if n := p.callCount(); n != 3 {
		t.Errorf("provider reindexed %d times, want 3 (the refused one never reaches it)", n)
	}
}

// TestReindexAgainOnceReadToTheEnd: a caller that has read a reindex's
// answer to its last line may start the next at once. The realm's guard
// was held until the handler returned, after that line: a retry made the
// moment the line arrived was refused with 409. Here the retry is made
// while the last line is being written.
func TestReindexAgainOnceReadToTheEnd(t *testing.T) {
	api := reindexAPI(&fakeReindexer{n: 1})
	var srv *httptest.Server
	retried := 0
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Retry") != "" {
			api.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(&beforeResult{ResponseWriter: w, fn: func() {
			req, _ := http.NewRequest("POST", srv.URL+"/v1/admin/reindex", strings.NewReader(`{"realm":"acme"}`))
			req.Header.Set("Authorization", "Bearer app-secret")
			req.Header.Set("X-Retry", "1")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			retried = resp.StatusCode
		}}, r)
	}))
	t.Cleanup(srv.Close)
	if status, _, lines := reindexCall(t, srv, "app-secret", `{"realm":"acme"}`); status != 200 || len(lines) == 0 || lines[len(lines)-1].Result == nil {
		t.Fatalf("reindex = %d %+v, want 200 ending in a result", status, lines)
	}
	if retried != 200 {
		t.Errorf("a reindex started as the last line went out = %d, want 200", retried)
	}
}

// beforeResult runs fn once, before the answer's result line is written.
type beforeResult struct {
	http.ResponseWriter
	fn   func()
	done bool
}

func (b *beforeResult) Write(p []byte) (int, error) {
	if !b.done && bytes.Contains(p, []byte(`"result"`)) {
		b.done = true
		b.fn()
	}
	return b.ResponseWriter.Write(p)
}
