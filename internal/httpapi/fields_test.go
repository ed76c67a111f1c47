package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/internal/compaction"
)

// TestEveryFieldRefusalNamesItsField: a refusal that names the field it
// refuses carries it in "field" too, named as the message names it (the
// docs' contract for every error), on every route: before, the page and
// batch bounds (k, limit, tier, records) and the cursors (after) were
// named in the message alone, or "field" named the id rule's own field
// ("id") rather than the request's. An import that leaves out its records
// is refused like any missing required field, as the document requires
// them, rather than answered "imported 0", and a manifest k out of range
// is refused whatever the tier.
func TestEveryFieldRefusalNamesItsField(t *testing.T) {
	srv, p := newSurfacesWith(t, Options{Compaction: compaction.New(compaction.Options{Compactor: &echoCompactor{}})})
	cases := []struct {
		method, path, body string
		status             int
		field              string
	}{
		{"POST", "/v1/records", `{"records":[]}`, 400, "records"},
		{"POST", "/v1/records", `{"records":[` + strings.Repeat(`{"scope":"realm","kind":"fact","title":"t"},`, 1000) + `{"scope":"realm","kind":"fact","title":"t"}]}`, 413, "records"},
		{"POST", "/v1/import", `{}`, 400, "records"},
		{"POST", "/v1/import", `{"realm":"default","records":null}`, 400, "records"},
		{"POST", "/v1/import", `{"records":[` + strings.Repeat(`{},`, 1000) + `{}]}`, 413, "records"},
		{"POST", "/v1/manifest", `{"identity":{"id":"alice"},"k":1001}`, 400, "k"},
		{"POST", "/v1/manifest", `{"identity":{"id":"alice"},"tier":"full","k":-5}`, 400, "k"},
		{"POST", "/v1/manifest", `{"identity":{"id":"alice"},"tier":"all"}`, 400, "tier"},
		{"POST", "/v1/export", `{"limit":1001}`, 400, "limit"},
		{"POST", "/v1/export", `{"after":"../x"}`, 400, "after"},
		{"GET", "/v1/records?limit=0", "", 400, "limit"},
		{"GET", "/v1/records?after=..x", "", 400, "after"},
		{"GET", "/v1/records?scope=bogus", "", 400, "scope"},
		{"GET", "/v1/proposals?limit=501", "", 400, "limit"},
		{"GET", "/v1/proposals?after=a/b", "", 400, "after"},
		{"GET", "/v1/traces?limit=x", "", 400, "limit"},
		{"GET", "/v1/records/r1/trace?limit=1001", "", 400, "limit"},
		{"GET", "/v1/sessions/s1/trace?limit=0", "", 400, "limit"},
	}
	for _, c := range cases {
		t.Run(c.method+" "+c.path+" "+c.body[:min(len(c.body), 60)], func(t *testing.T) {
			req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
			req.Header.Set("Content-Type", "application/json")
			status, _, data := exchange(t, srv, req, []byte(c.body))
			var e errorBody
			json.Unmarshal(data, &e)
			if status != c.status || e.Error.Field != c.field || !strings.HasPrefix(e.Error.Message, c.field+": ") {
				t.Fatalf("= %d %s, want %d with field %q, named so in the message", status, data, c.status, c.field)
			}
		})
	}
	if n := p.Calls(coordinatortest.MethodRemember); n != 0 {
		t.Fatalf("refused requests wrote %d times", n)
	}
}
