package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/sdk"
)

// TestQueryParametersAreStrict: a query string is read as strictly as a
// body. A parameter the route does not read is refused, not ignored (a
// ?realm= on POST /v1/records stored the records in the default realm
// while the client believed it named another), and so is one given twice
// (which value counts was the server's guess). A filter value no record
// can hold is refused too, instead of answering an empty list as if
// nothing matched (?status=activ), and ?since= reads a time by the rules
// of every other time the API takes (it took an offset of +24:00, and the
// zero time as no bound). A refused request changes nothing.
func TestQueryParametersAreStrict(t *testing.T) {
	srv, p := newSurfacesWith(t, Options{})
	p.MustAdd("default", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "kept", Body: "b"})
	id := p.MustAdd("default", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "also kept", Body: "b"})[0]
	const write = `{"records":[{"scope":"realm","kind":"fact","title":"t","body":"b"}]}`
	cases := []struct {
		method, path, body string
		field, msg         string
	}{
		{"POST", "/v1/records?realm=acme", write, "realm", "not a query parameter of POST /v1/records"},
		{"POST", "/v1/recall?limit=5", `{"identity":{"id":"alice"},"query":"kept"}`, "limit", "not a query parameter"},
		{"GET", "/v1/records?scopee=realm", "", "scopee", "not a query parameter of GET /v1/records"},
		{"GET", "/v1/records?realm=default&realm=acme", "", "realm", "given 2 times"},
		{"GET", "/v1/records?limit=5&limit=6", "", "limit", "given 2 times"},
		{"DELETE", "/v1/records/" + id + "?realm=default&realm=acme", "", "realm", "given 2 times"},
		{"DELETE", "/v1/records/" + id + "?force=1", "", "force", "not a query parameter"},
		{"GET", "/v1/records?status=activ", "", "status", "unknown status"},
		{"GET", "/v1/records?kind=facts", "", "kind", "unknown kind"},
		{"GET", "/v1/records?trust=high", "", "trust", "unknown trust"},
		{"GET", "/v1/records?tag=a,b", "", "tag", "comma"},
		{"GET", "/v1/records?since=2023-05-27T09:00:00%2B24:00", "", "since", "RFC 3339"},
		{"GET", "/v1/records?since=2023-05-27T9:00:00Z", "", "since", "RFC 3339"},
		{"GET", "/v1/records?since=0001-01-01T00:00:00Z", "", "since", "zero"},
		{"GET", "/v1/records?realm=%zz", "", "query", "invalid URL escape"},
		{"GET", "/v1/scopes?realm=default;realm=acme", "", "query", "semicolon"},
		// Review 66: a nameless parameter read `": is not a query parameter"`.
		{"GET", "/v1/records?=", "", "query", "a parameter with no name"},
		{"GET", "/v1/records?q=a%00b", "", "q", "NUL"},
		{"GET", "/v1/records?limit=%2B5", "", "limit", "not a number in 1..200"},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			status, _, data := exchange(t, srv, req, []byte(c.body))
			var e errorBody
			json.Unmarshal(data, &e)
			if status != http.StatusBadRequest || e.Error.Code != "invalid_argument" || e.Error.Field != c.field || !strings.Contains(e.Error.Message, c.msg) {
				t.Fatalf("= %d %s, want 400 invalid_argument on %s: %q", status, data, c.field, c.msg)
			}
		})
	}
	if n := p.Calls(coordinatortest.MethodRemember) + p.Calls(coordinatortest.MethodForget) + p.Calls(coordinatortest.MethodRecall); n != 0 {
		t.Fatalf("refused requests reached the provider %d times", n)
	}
	// What the document declares is served.
	for _, path := range []string{
		"/v1/records?realm=default&status=active&kind=fact&trust=agent_observed&tag=x&since=2023-05-27T09:00:00%2B01:00&limit=5",
		"/v1/records?q=kept&scope=realm",
		"/v1/records/" + id + "?realm=default",
		"/v1/scopes?realm=",
	} {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if status, _, data := exchange(t, srv, req, nil); status != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200", path, status, data)
		}
	}
}

// TestQueryParametersMatchTheAPIDocument: the query parameters each route
// reads are those docs/openapi.yaml declares for it.
func TestQueryParametersMatchTheAPIDocument(t *testing.T) {
	spec := apiDoc(t)
	srv := New(Options{MCP: func(func(http.Header) (mcpserver.Caller, error)) http.Handler { return http.NotFoundHandler() }})
	for _, route := range srv.Routes() {
		if !strings.Contains(route, " /v1/") && route != "POST /mcp" {
			continue
		}
		documented := spec.QueryParameters(route)
		read := slices.Sorted(slices.Values(queryParameters[route]))
		if !slices.Equal(documented, read) {
			t.Errorf("%s reads query parameters %v, the document declares %v", route, read, documented)
		}
	}
	for route := range queryParameters {
		if !slices.Contains(srv.Routes(), route) {
			t.Errorf("query parameters listed for %s, which is not served", route)
		}
	}
}
