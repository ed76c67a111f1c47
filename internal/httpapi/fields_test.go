package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/sdk"
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

// TestAThreadWithoutItsSeqIsRefused: a record's thread needs its seq, as
// the API document requires; left out, it was read as 0, so a client that
// forgot it stored every turn of a conversation at one place, each the
// others' neighbour. A write and an import are refused naming the field,
// and nothing reaches the provider; a seq of 0 sent is stored as sent.
func TestAThreadWithoutItsSeqIsRefused(t *testing.T) {
	srv, p := newTestServer(t, Options{}, sdk.CapWrite, sdk.CapFetch, sdk.CapArchive)
	const imported = `{"id":"rt1","scope":"realm","kind":"fact","title":"t","body":"b","trust":"application","status":"active","created_at":"2023-05-27T09:00:00Z","updated_at":"2023-05-27T09:00:00Z","thread":%s}`
	for _, c := range []struct{ path, body, field string }{
		{"/v1/records", `{"records":[{"scope":"realm","kind":"episode","title":"t","thread":{"id":"c1","seq":1}},{"scope":"realm","kind":"episode","title":"u","thread":{"id":"c1"}}]}`, "records[1].thread.seq"},
		{"/v1/import", `{"records":[` + fmt.Sprintf(imported, `{"id":"c1"}`) + `]}`, "records[0].thread.seq"},
	} {
		status, e := call(t, srv, "POST", c.path, "", []byte(c.body))
		if status != http.StatusBadRequest || e.Error.Field != c.field {
			t.Errorf("POST %s with a thread without seq = %d %+v, want 400 on %s", c.path, status, e, c.field)
		}
	}
	if n := p.Calls(coordinatortest.MethodRemember) + p.Calls(coordinatortest.MethodImport); n != 0 {
		t.Fatalf("refused requests reached the provider %d times", n)
	}
	if status, e := call(t, srv, "POST", "/v1/records", "", []byte(`{"records":[{"scope":"realm","kind":"episode","title":"t","thread":{"id":"c1","seq":0}}]}`)); status != http.StatusOK {
		t.Errorf("a thread at seq 0 = %d %+v, want stored", status, e)
	}
	if status, e := call(t, srv, "POST", "/v1/import", "", []byte(`{"records":[`+fmt.Sprintf(imported, `{"id":"c1","seq":0}`)+`]}`)); status != http.StatusOK {
		t.Errorf("an imported thread at seq 0 = %d %+v, want imported", status, e)
	}
}
