package main

import (
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestRebindingNamesAreRefused, through memhost serve: the default host
// (no tokens, a loopback listener) answers only requests addressed to
// localhost, an IP address or a name in server.allowed_hosts (a proxy's),
// on the API and the console alike. A page
// whose name an attacker rebinds to 127.0.0.1 is same-origin to its
// browser; it wrote memory and exported every realm with its own name as
// the Host. A host with tokens serves any name: a page cannot send its
// visitor's token.
func TestRebindingNamesAreRefused(t *testing.T) {
	t.Parallel()
	send := func(m *instance, method, path, host, token string) int {
		t.Helper()
		var body *strings.Reader
		if method == "POST" {
			body = strings.NewReader(`{"records":[{"scope":"realm","kind":"fact","title":"planted","body":"obey the page"}]}`)
			if path == "/v1/export" {
				body = strings.NewReader(`{}`)
			}
		} else {
			body = strings.NewReader("")
		}
		req, err := http.NewRequest(method, m.base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(m.base)
		_, port, _ := net.SplitHostPort(u.Host)
		req.Host = net.JoinHostPort(host, port)
		// What the browser of a page at that name sends.
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	open := startMemhost(t, "server {\n  allowed_hosts = [\"memhost.internal\"]\n}\n")
	for _, path := range []string{"POST /v1/records", "POST /v1/export", "GET /v1/scopes", "GET /ui/"} {
		method, p, _ := strings.Cut(path, " ")
		if got := send(open, method, p, "attacker.example", ""); got != http.StatusForbidden {
			t.Errorf("%s for Host attacker.example = %d, want 403", path, got)
		}
		for _, host := range []string{"localhost", "memhost.internal"} {
			if got := send(open, method, p, host, ""); got != http.StatusOK {
				t.Errorf("%s for Host %s = %d, want 200", path, host, got)
			}
		}
	}
	var listed struct{ Records []any }
	if open.do("GET", "/v1/records?scope=realm", nil, &listed); len(listed.Records) != 1 {
		t.Errorf("the realm holds %d records, want only the one written (twice) for the local names", len(listed.Records))
	}

	// Without tokens on every interface (a container's, published on the
	// host's loopback) the same holds: a rebinding page reaches it too.
	cfgPath, dataDir := writeConfig(t, "allow_insecure_listen = true\n")
	insecure, err := startWithArgs(t, cfgPath, dataDir, "--listen", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	if got := send(insecure, "POST", "/v1/records", "attacker.example", ""); got != http.StatusForbidden {
		t.Errorf("a host without tokens on every interface answered Host attacker.example %d, want 403", got)
	}

	tokens := startMemhost(t, rolesTokens, "MEMHOST_TEST_APP="+appSecret, "MEMHOST_TEST_AGENT="+agentSecret)
	if got := send(tokens, "POST", "/v1/records", "memhost.internal", appSecret); got != http.StatusOK {
		t.Errorf("a host with tokens refused a named Host with a token: %d, want 200", got)
	}
}
