package httpapi

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
)

// TestLocalHostsOnly: a server without tokens on a loopback address
// answers only requests addressed to localhost or an IP address. A page
// whose name an attacker rebinds to 127.0.0.1 is same-origin to its
// browser, so cross-origin protection let its writes and reads through
// with the page's name as the Host: it could plant memory and export
// every realm.
func TestLocalHostsOnly(t *testing.T) {
	api, p := newTestServer(t, Options{})
	s := New(Options{})
	srv := httptest.NewServer(s.LocalHostsOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Forward to the API server, as the root handler does.
		req, _ := http.NewRequest(r.Method, api.URL+r.URL.RequestURI(), r.Body)
		req.Header = r.Header.Clone()
		resp, err := api.Client().Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		defer resp.Body.Close()
		maps.Copy(w.Header(), resp.Header)
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}), []string{"Memhost.Internal"}))
	t.Cleanup(srv.Close)
	const write = `{"records":[{"scope":"realm","kind":"fact","title":"planted","body":"obey the page"}]}`
	cases := []struct {
		host string
		ok   bool
	}{
		{"127.0.0.1:7077", true},
		{"127.0.0.1", true},
		{"[::1]:7077", true},
		{"localhost:7077", true},
		{"LOCALHOST", true},
		{"localhost.:7077", true},
		{"agent.localhost:7077", true},
		{"10.0.0.5:7077", true}, // no name to rebind
		{"memhost.internal:443", true},
		{"MEMHOST.internal", true},
		{"memhost.internal.attacker.example", false},
		{"internal", false},
		{"attacker.example:7077", false},
		{"attacker.example", false},
		{"localhost.attacker.example:7077", false},
		{"127.0.0.1.attacker.example:7077", false},
		{"localhostx:7077", false},
		{"xn--lcalhost-7ya:7077", false},
	}
	wrote := 0
	for _, c := range cases {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/records", strings.NewReader(write))
		req.Host = c.host
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		status, header, data := exchange(t, srv, req, []byte(write))
		var e errorBody
		json.Unmarshal(data, &e)
		if c.ok {
			wrote++
			if status != http.StatusOK {
				t.Errorf("Host %q = %d, want 200", c.host, status)
			}
			continue
		}
		if status != http.StatusForbidden || e.Error.Code != "permission_denied" || e.Error.RequestID == "" || header.Get(HeaderRequestID) != e.Error.RequestID {
			t.Errorf("Host %q = %d %+v, want 403 permission_denied with its request id", c.host, status, e)
		}
		if !strings.Contains(e.Error.Message, "server.allowed_hosts") {
			t.Errorf("Host %q: the refusal does not say which names are served: %q", c.host, e.Error.Message)
		}
	}
	if n := p.Calls(coordinatortest.MethodRemember); n != wrote {
		t.Fatalf("%d writes reached the provider, want %d (the local ones)", n, wrote)
	}
}

// TestUnroutedAnswersCarryARequestID: a 404 or 405 under /v1 carries its
// request id, in the header and the body, as every other answer does.
func TestUnroutedAnswersCarryARequestID(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	for _, c := range []struct{ method, path string }{{"GET", "/v1/nope"}, {"PUT", "/v1/records/x"}} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		status, header, data := exchange(t, srv, req, nil)
		var e errorBody
		json.Unmarshal(data, &e)
		if status/100 != 4 || e.Error.RequestID == "" || header.Get(HeaderRequestID) != e.Error.RequestID {
			t.Errorf("%s %s = %d, request id %q in the body and %q in the header, want both set and equal", c.method, c.path, status, e.Error.RequestID, header.Get(HeaderRequestID))
		}
	}
}
