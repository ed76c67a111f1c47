package console

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeAPI answers every /v1 call with an empty success and remembers
// what it was asked, with which token.
type fakeAPI struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.calls = append(f.calls, r.Method+" "+r.URL.String()+" "+r.Header.Get("Authorization"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.Write([]byte(`{}`))
}

func (f *fakeAPI) asked() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, "\n")
}

func newConsole(t *testing.T, tokens ...Token) (*Console, *fakeAPI) {
	t.Helper()
	api := &fakeAPI{}
	c, err := New(Options{API: api, Tokens: tokens, Realms: []string{"default", "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, api
}

var (
	appToken   = Token{Name: "ops", Secret: "app-secret-0123456789", Realms: []string{"acme"}, Application: true}
	agentToken = Token{Name: "bot", Secret: "agent-secret-0123456789", Realms: []string{"acme"}}
)

func serve(c http.Handler, method, target string, form url.Values, header http.Header) *httptest.ResponseRecorder {
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	r := httptest.NewRequest(method, target, body)
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

func signIn(t *testing.T, c *Console, secret string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	return serve(c, "POST", "/ui/login", url.Values{"token": {secret}, "next": {"/ui/proposals"}}, header)
}

func TestSignIn(t *testing.T) {
	c, _ := newConsole(t, appToken, agentToken)
	if w := serve(c, "GET", "/ui/records", nil, nil); w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/ui/login") {
		t.Fatalf("unsigned GET = %d %s, want a redirect to sign in", w.Code, w.Header().Get("Location"))
	}
	cases := []struct {
		name, secret string
		header       http.Header
		code         int
		secure       bool
	}{
		{"unknown token", "nope-0123456789", nil, http.StatusUnauthorized, false},
		{"agent token", agentToken.Secret, nil, http.StatusForbidden, false},
		{"application token", appToken.Secret, nil, http.StatusSeeOther, false},
		{"application token over TLS", appToken.Secret, http.Header{"X-Forwarded-Proto": {"https"}}, http.StatusSeeOther, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := signIn(t, c, tc.secret, tc.header)
			if w.Code != tc.code {
				t.Fatalf("sign-in = %d, want %d: %s", w.Code, tc.code, w.Body)
			}
			cookies := w.Result().Cookies()
			if tc.code != http.StatusSeeOther {
				if len(cookies) != 0 {
					t.Fatalf("a refused sign-in set %v", cookies)
				}
				return
			}
			if len(cookies) != 1 {
				t.Fatalf("cookies %v", cookies)
			}
			ck := cookies[0]
			if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Secure != tc.secure || ck.MaxAge <= 0 || ck.Path != "/ui" {
				t.Errorf("session cookie %+v", ck)
			}
			if w.Header().Get("Location") != "/ui/proposals" {
				t.Errorf("redirect to %q", w.Header().Get("Location"))
			}
		})
	}
}

// signedIn signs in and answers the cookie and the page's CSRF token.
func signedIn(t *testing.T, c *Console) (http.Header, string) {
	t.Helper()
	w := signIn(t, c, appToken.Secret, nil)
	h := http.Header{"Cookie": {w.Result().Cookies()[0].String()}}
	page := serve(c, "GET", "/ui/proposals", nil, h).Body.String()
	i := strings.Index(page, `name="csrf" value="`)
	if i < 0 {
		t.Fatalf("no CSRF field on the page: %s", page)
	}
	rest := page[i+len(`name="csrf" value="`):]
	return h, rest[:strings.IndexByte(rest, '"')]
}

func TestStateChangesNeedCSRFAndSameOrigin(t *testing.T) {
	c, api := newConsole(t, appToken)
	h, csrf := signedIn(t, c)
	form := func(token string) url.Values {
		return url.Values{"csrf": {token}, "action": {"reject"}, "id": {"r1"}, "realm": {"acme"}}
	}
	with := func(extra http.Header) http.Header {
		out := h.Clone()
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	cases := []struct {
		name   string
		form   url.Values
		header http.Header
		code   int
	}{
		{"no CSRF token", form(""), h, http.StatusForbidden},
		{"wrong CSRF token", form("x" + csrf), h, http.StatusForbidden},
		{"cross-site fetch", form(csrf), with(http.Header{"Sec-Fetch-Site": {"cross-site"}}), http.StatusForbidden},
		{"foreign origin", form(csrf), with(http.Header{"Origin": {"http://evil.example"}}), http.StatusForbidden},
		{"no session", form(csrf), nil, http.StatusForbidden},
		{"same origin with the token", form(csrf), with(http.Header{"Origin": {"http://example.com"}, "Sec-Fetch-Site": {"same-origin"}}), http.StatusSeeOther},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := strings.Count(api.asked(), "/reject")
			w := serve(c, "POST", "/ui/proposals", tc.form, tc.header)
			after := strings.Count(api.asked(), "/reject")
			if w.Code != tc.code {
				t.Fatalf("= %d, want %d: %s", w.Code, tc.code, w.Body)
			}
			if (after > before) != (tc.code == http.StatusSeeOther) {
				t.Errorf("reject calls %d -> %d", before, after)
			}
		})
	}
	if !strings.Contains(api.asked(), "POST /v1/records/r1/reject?realm=acme Bearer "+appToken.Secret) {
		t.Errorf("the API was not called with the session's token:\n%s", api.asked())
	}
}

// A token sees only its realms: asking for another shows its own.
func TestOnlyTheTokensRealms(t *testing.T) {
	c, api := newConsole(t, appToken)
	h, csrf := signedIn(t, c)
	serve(c, "GET", "/ui/records?realm=default", nil, h)
	if strings.Contains(api.asked(), "realm=default") {
		t.Errorf("the console asked for a realm the token may not see:\n%s", api.asked())
	}
	w := serve(c, "POST", "/ui/proposals", url.Values{"csrf": {csrf}, "action": {"approve"}, "id": {"r1"}, "realm": {"default"}}, h)
	if w.Code != http.StatusForbidden {
		t.Errorf("a decision in another realm = %d, want 403", w.Code)
	}
}

func TestHeadersOnEveryPage(t *testing.T) {
	c, _ := newConsole(t)
	for _, p := range []string{"/ui/", "/ui/records", "/ui/proposals", "/ui/traces", "/ui/plugins", "/ui/static/console.css", "/ui/nope"} {
		w := serve(c, "GET", p, nil, nil)
		csp := w.Header().Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || w.Header().Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: CSP %q", p, csp)
		}
	}
	// Without tokens the console is open, but a form still needs its token.
	if w := serve(c, "POST", "/ui/proposals", url.Values{"action": {"approve"}, "id": {"r1"}}, nil); w.Code != http.StatusForbidden {
		t.Errorf("open console POST without a session = %d, want 403", w.Code)
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/proposals?realm=a": "/ui/proposals?realm=a",
		"":                      "/ui/",
		"https://evil.example":  "/ui/",
		"//evil.example/ui/":    "/ui/",
		"/ui/\\evil":            "/ui/",
		"/v1/export":            "/ui/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestVisible(t *testing.T) {
	if got := visible("a\x1b[31m\u202eb\nc"); got != `a\u001b[31m\u202eb`+"\nc" {
		t.Errorf("visible = %q", got)
	}
}

// TestDecideAtMostAPage: a form naming more proposals than a page shows
// is refused whole, before any is decided (each is one API call in the
// request).
func TestDecideAtMostAPage(t *testing.T) {
	c, api := newConsole(t, appToken)
	h, csrf := signedIn(t, c)
	form := url.Values{"csrf": {csrf}, "action": {"reject"}, "realm": {"acme"}}
	for i := range proposalPage + 1 {
		form.Add("id", "r"+strconv.Itoa(i))
	}
	w := serve(c, "POST", "/ui/proposals", form, h)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "at most 100") {
		t.Fatalf("deciding %d proposals = %d %s, want 400 saying the limit", proposalPage+1, w.Code, w.Body)
	}
	if strings.Contains(api.asked(), "/reject") {
		t.Fatalf("some were decided anyway:\n%s", api.asked())
	}
	form.Del("id")
	form.Add("id", "r1")
	if w := serve(c, "POST", "/ui/proposals", form, h); w.Code != http.StatusSeeOther {
		t.Fatalf("deciding one = %d, want the redirect", w.Code)
	}
}
