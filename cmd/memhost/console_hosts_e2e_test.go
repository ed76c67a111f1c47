package main

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

// An operator reaches the console through the load balancer in front of
// many hosts, with no affinity: a sign-in, its CSRF token and its sign-out
// made through one host hold on every other.

var csrfRE = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// consoleCall is one console request to h with cookie (none when ""),
// not following redirects; it answers the status, the Location, the
// session cookie it set and the body.
func consoleCall(t *testing.T, h *instance, method, path, cookie string, form url.Values) (code int, location, setCookie, body string) {
	t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, h.base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: "memhost_console", Value: cookie})
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	for _, c := range resp.Cookies() {
		if c.Name == "memhost_console" {
			setCookie = c.Value
		}
	}
	return resp.StatusCode, resp.Header.Get("Location"), setCookie, string(data)
}

func TestConsoleSignInHoldsOnEveryHost(t *testing.T) {
	t.Parallel()
	hs := startHalfStates(t)
	a, b := hs.hosts[0], hs.hosts[1]

	code, _, cookie, _ := consoleCall(t, a, "POST", "/ui/login", "", url.Values{"token": {hsApp}, "next": {"/ui/proposals"}})
	if code != http.StatusSeeOther || cookie == "" {
		t.Fatalf("sign-in on A = %d, cookie %q", code, cookie)
	}
	_, _, _, page := consoleCall(t, a, "GET", "/ui/proposals", cookie, nil)
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("A's page carries no CSRF token:\n%s", page)
	}
	csrf := m[1]

	for _, step := range []struct {
		name         string
		host         *instance
		method, path string
		form         url.Values
		wantCode     int
		wantLocation string
	}{
		{"a page on B", b, "GET", "/ui/proposals", nil, http.StatusOK, ""},
		{"a page on A again", a, "GET", "/ui/traces", nil, http.StatusOK, ""},
		{"a form on B with A's CSRF token", b, "POST", "/ui/logout", url.Values{"csrf": {csrf}}, http.StatusSeeOther, "/ui/login"},
		{"a page on A after the sign-out on B", a, "GET", "/ui/proposals", nil, http.StatusSeeOther, "/ui/login?next=%2Fui%2Fproposals"},
		{"a page on B after the sign-out", b, "GET", "/ui/proposals", nil, http.StatusSeeOther, "/ui/login?next=%2Fui%2Fproposals"},
	} {
		code, location, _, body := consoleCall(t, step.host, step.method, step.path, cookie, step.form)
		if code != step.wantCode || location != step.wantLocation {
			t.Errorf("%s: %s %s = %d %q, want %d %q\n%.300s", step.name, step.method, step.path, code, location, step.wantCode, step.wantLocation, body)
		}
	}
}
