package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/httpapi"
	"github.com/memhost/memhost/sdk"
)

const (
	fullRecord = `{"id":"r1","realm":"default","scope":"identity:alice","kind":"fact","title":"<b>T</b>","body":"line\u001b","tags":["a"],"trust":"agent_observed","status":"active","supersedes":"r0","created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z","use_count":2}`
	fullTurn   = `{"realm":"default","identity":"alice","session":"s1","surface":"turn","kind":"inject","at":"2026-01-01T00:00:00Z","query_bytes":4,"skip_reason":null,"bytes":300,"budget":20480,"included":[{"id":"r1","title":"T","scope":"identity:alice","trust":"agent_observed","bytes":200,"score":0.5}],"excluded":[{"id":"r2","title":"U","scope":"realm","reason":"budget"},{"id":"r3","reason":"budget","forgotten":true}],"out_of_scope":2,"dedup_excluded":3,"defang_hits":0}`
)

// richAPI answers each endpoint the console calls with a full example,
// so every field a template reads is there to be rendered.
type richAPI struct{}

func (richAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	var body string
	switch {
	case p == "/v1/scopes":
		body = `{"realm":"default","partial":false,"scopes":[{"scope":"identity:alice","total":3,"by_status":{"active":2,"quarantined":1}}]}`
	case p == "/v1/proposals":
		body = `{"realm":"default","pending":1,"next":"","proposals":[{"id":"p1","realm":"default","proposer":"bot","created_at":"2026-01-01T00:00:00Z","record":` + fullRecord + `,"target":"r1","supersedes":` + fullRecord + `,"diff":[{"field":"body","op":"+","text":"x"}]}]}`
	case p == "/v1/records":
		body = `{"realm":"default","next":"r1","records":[{"record":` + fullRecord + `,"score":0.25}]}`
	case strings.HasSuffix(p, "/trace") || p == "/v1/traces":
		body = `{"realm":"default","turns":[` + fullTurn + `,{"realm":"default","identity":"alice","session":"s1","surface":"turn","kind":"defang","at":"2026-01-01T00:00:00Z","query_bytes":0,"skip_reason":null,"bytes":0,"budget":0,"included":[],"excluded":[],"defang_hits":2}],"sessions":[{"realm":"default","identity":"alice","session":"s1","turns":2,"bytes":300,"last":"2026-01-01T00:00:00Z"}]}`
	case strings.HasPrefix(p, "/v1/records/"):
		body = fullRecord
	case p == "/v1/plugins":
		body = `{"plugins":[{"instance":"main","kind":"provider","name":"sqlite","version":"0.1.0","healthy":false,"state":"backoff","restarts":2,"last_error":"exit status 1 at /srv/secret/path"}]}`
	case p == "/metrics":
		hostMetrics.ServeHTTP(w, r)
		return
	default:
		body = `{}`
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(body))
}

// hostMetrics is the host's own registry with a skip in it: the charts
// read what the host really exports, so a renamed series or label fails
// here.
var hostMetrics = func() http.Handler {
	m := httpapi.NewMetrics(nil, nil)
	m.Skipped(coordinator.SurfaceTurn, "default", coordinator.SkipNoRecords)
	return m.Handler()
}()

// TestChartsReadTheHostsSeries feeds the charts from the host's metrics
// registry: every series and label they read must be one it exports.
func TestChartsReadTheHostsSeries(t *testing.T) {
	m := httpapi.NewMetrics(nil, nil)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	s := newSampler(mux, time.Hour)
	defer s.close()
	s.take()
	for range 3 {
		m.Skipped(coordinator.SurfaceTurn, "default", coordinator.SkipBudgetExhausted)
	}
	m.Recalled(coordinator.SurfaceTurn, "default", time.Millisecond, sdk.CodeOK)
	m.Recalled(coordinator.SurfaceBuild, "default", time.Millisecond, sdk.CodeOK)
	m.Injected(coordinator.SurfaceTurn, "default", 700, 2)
	s.take()
	charts := s.charts()
	if recalls := charts[0]; recalls.Empty || recalls.Max != "2" {
		t.Errorf("recall chart after 2 recalls: empty=%v max=%q", recalls.Empty, recalls.Max)
	}
	if bytes := charts[1]; bytes.Empty || bytes.Max != "700 B" {
		t.Errorf("injected bytes chart after 700 bytes: empty=%v max=%q", bytes.Empty, bytes.Max)
	}
	skips := charts[2]
	if skips.Empty || len(skips.Bars) != 1 || skips.Bars[0].Label != string(coordinator.SkipBudgetExhausted) || skips.Bars[0].Value != "3" {
		t.Errorf("skip chart after 3 budget_exhausted skips: empty=%v caption=%q bars=%+v", skips.Empty, skips.Caption, skips.Bars)
	}
}

// TestEveryPageRenders renders each page over full example answers: a
// template reading a field of the wrong type fails here, not in a browser.
func TestEveryPageRenders(t *testing.T) {
	c, err := New(Options{API: richAPI{}, Realms: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, p := range []string{"/ui/", "/ui/records?q=x", "/ui/record?id=r1", "/ui/proposals", "/ui/traces", "/ui/trace?session=s1", "/ui/plugins"} {
		w := httptest.NewRecorder()
		c.ServeHTTP(w, httptest.NewRequest("GET", p, nil))
		body := w.Body.String()
		if w.Code != http.StatusOK || !strings.Contains(body, "</main>") {
			t.Errorf("%s = %d: %.300s", p, w.Code, body)
		}
		if strings.Contains(body, "<b>T</b>") {
			t.Errorf("%s shows a title's markup as markup", p)
		}
		if strings.Contains(body, "/srv/secret/path") {
			t.Errorf("%s shows a host path from a plugin error", p)
		}
	}
}

// missingAPI answers every record and trace as missing.
type missingAPI struct{}

func (missingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	w.Write([]byte(`{"error":{"code":"not_found","message":"record \"nope\" not found in realm \"default\""}}`))
}

// An error page says the error and nothing about a record or session it
// does not have: no "<nil>" heading, no "supersedes no other" for a
// record that does not exist, and a page without its id or session says
// so rather than showing the API's routing error.
func TestErrorPagesSayOnlyTheError(t *testing.T) {
	c, err := New(Options{API: missingAPI{}, Realms: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		path string
		code int
		want string
	}{
		{"/ui/record?realm=default", 400, "no record named"},
		{"/ui/record?realm=default&id=nope", 404, "not found"},
		{"/ui/trace?realm=default&session=", 400, "no session named"},
		{"/ui/trace?realm=default", 400, "no session named"},
		{"/ui/trace?realm=default&session=s1", 404, "not found"},
	} {
		w := httptest.NewRecorder()
		c.ServeHTTP(w, httptest.NewRequest("GET", tc.path, nil))
		body := w.Body.String()
		if w.Code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s = %d, want %d saying %q: %.400s", tc.path, w.Code, tc.code, tc.want, body)
		}
		for _, bad := range []string{"&lt;nil&gt;", "<nil>", "supersedes no other", "No traced turn", "no such endpoint"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s shows %q: %.600s", tc.path, bad, body)
			}
		}
	}
}

// A turn's trace counts the records its recall left out as injected
// earlier in the session.
func TestTracePageCountsDedupExclusions(t *testing.T) {
	c, err := New(Options{API: richAPI{}, Realms: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := httptest.NewRecorder()
	c.ServeHTTP(w, httptest.NewRequest("GET", "/ui/trace?session=s1", nil))
	if body := w.Body.String(); !strings.Contains(body, "3 record(s) injected earlier in this session") {
		t.Errorf("trace page = %.600s", body)
	}
}

// downAPI answers every call as the host does while the realm's provider
// plugin is down.
type downAPI struct{}

func (downAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write([]byte(`{"error":{"code":"provider_unavailable","message":"plugin main (sqlite) is down, next start attempt soon"}}`))
}

// TestAPluginDownIsNotAnEmptyMemory: from an outside review. With the
// provider down the proposals page said "Nothing to review" under the
// error, the traces page "No turn has been traced", and the realms page
// "0 pending" while proposals waited: a page that could not read must
// not say there is nothing to read.
func TestAPluginDownIsNotAnEmptyMemory(t *testing.T) {
	c, err := New(Options{API: downAPI{}, Realms: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct{ path, bad string }{
		{"/ui/", "<b>0</b> pending"},
		{"/ui/proposals", "Nothing to review"},
		{"/ui/traces", "No turn has been traced"},
		{"/ui/records", "No record matches"},
	} {
		w := httptest.NewRecorder()
		c.ServeHTTP(w, httptest.NewRequest("GET", tc.path, nil))
		body := w.Body.String()
		if !strings.Contains(body, "is down") {
			t.Errorf("%s does not say the plugin is down: %.600s", tc.path, body)
		}
		if strings.Contains(body, tc.bad) {
			t.Errorf("%s says %q while it could not read: %.600s", tc.path, tc.bad, body)
		}
	}
}

// halfDownAPI answers the record itself, then, its plugin gone down,
// every other read as the host does while it is down.
type halfDownAPI struct{}

func (halfDownAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/v1/records/r1" {
		w.Write([]byte(fullRecord))
		return
	}
	downAPI{}.ServeHTTP(w, r)
}

// TestRecordPageSaysWhatItCouldNotRead: a record page whose superseded
// record or injections cannot be read says so, not that the record
// supersedes no other and no turn injected it.
func TestRecordPageSaysWhatItCouldNotRead(t *testing.T) {
	c, err := New(Options{API: halfDownAPI{}, Realms: []string{"default"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := httptest.NewRecorder()
	c.ServeHTTP(w, httptest.NewRequest("GET", "/ui/record?id=r1", nil))
	body := w.Body.String()
	if w.Code != http.StatusOK || !strings.Contains(body, "&lt;b&gt;T&lt;/b&gt;") {
		t.Fatalf("the record page = %d: %.600s", w.Code, body)
	}
	for _, bad := range []string{"This record supersedes no other", "No traced turn injected it"} {
		if strings.Contains(body, bad) {
			t.Errorf("the record page says %q while it could not read: %.2000s", bad, body)
		}
	}
	if n := strings.Count(body, "is down"); n != 2 {
		t.Errorf("the record page says the plugin is down %d times, want once for the chain and once for the injections: %.2000s", n, body)
	}
}

// hungAPI answers as the host does while a provider stopped answering:
// each call fails at its plugin call timeout (10 s); a call whose
// caller's context ended is answered nothing, as the API answers a
// client gone.
type hungAPI struct{}

func (hungAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case <-time.After(10 * time.Second):
	case <-r.Context().Done():
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusGatewayTimeout)
	w.Write([]byte(`{"error":{"code":"deadline_exceeded","message":"plugin main (sqlite): export: no answer within 10s"}}`))
}

// TestAPageEndsAtItsDeadline: the realms page reads each realm in turn.
// With the realms' provider hung, every read waited its whole call
// timeout: eight realms held the page 160 s, past the answer's write
// deadline, and the browser got no page at all. The page's reads share
// one request timeout, and what it could not read says so.
func TestAPageEndsAtItsDeadline(t *testing.T) {
	realms := []string{"default", "r1", "r2", "r3", "r4", "r5", "r6", "r7"}
	c, err := New(Options{API: hungAPI{}, Realms: realms, RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan *httptest.ResponseRecorder, 1)
	go func() {
		w := httptest.NewRecorder()
		c.ServeHTTP(w, httptest.NewRequest("GET", "/ui/", nil))
		done <- w
	}()
	select {
	case w := <-done:
		if body := w.Body.String(); strings.Count(body, "no answer within") < len(realms) {
			t.Fatalf("the page does not say each realm could not be read: %.2000s", body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the realms page still waits after 30 s")
	}
}
