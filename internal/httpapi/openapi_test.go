package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/sdk"
)

// TestRoutesMatchTheAPIDocument holds docs/openapi.yaml and the server's
// routes to each other: an undocumented route or a documented path that
// is not served fails.
func TestRoutesMatchTheAPIDocument(t *testing.T) {
	spec := apiDoc(t)
	srv := New(Options{MCP: func(func(http.Header) (mcpserver.Caller, error)) http.Handler { return http.NotFoundHandler() }})
	served, documented := srv.Routes(), spec.Operations()
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("served but not in docs/openapi.yaml: %s", r)
		}
	}
	for _, op := range documented {
		if !slices.Contains(served, op) {
			t.Errorf("in docs/openapi.yaml but not served: %s", op)
		}
	}
}

// TestTheDocumentRefusesWhatTheServerRefuses: a request the server
// refuses as malformed (400) is one docs/openapi.yaml does not allow
// either, so a client validating against the document is not told a
// request is fine that the server then refuses. Before, the document let
// an imported record leave out what an import requires (id, trust,
// status, times) or carry an unknown field, and let GET /v1/records
// filter by any kind or trust.
func TestTheDocumentRefusesWhatTheServerRefuses(t *testing.T) {
	spec := apiDoc(t)
	srv, _ := newTestServer(t, Options{}, sdk.CapWrite, sdk.CapFetch, sdk.CapArchive, sdk.CapManifest)
	const rec = `{"id":"ri1","scope":"realm","kind":"fact","title":"t","body":"b","trust":"application","status":"active","created_at":"2023-05-27T09:00:00Z","updated_at":"2023-05-27T09:00:00Z"%s}`
	without := func(field string) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(fmt.Sprintf(rec, "")), &m); err != nil {
			t.Fatal(err)
		}
		delete(m, field)
		data, _ := json.Marshal(m)
		return `{"records":[` + string(data) + `]}`
	}
	cases := []struct{ method, path, body string }{
		{"POST", "/v1/import", `{"records":[` + fmt.Sprintf(rec, `,"bogus":1`) + `]}`},
		{"GET", "/v1/records?kind=bogus", ""},
		{"GET", "/v1/records?trust=bogus", ""},
	}
	for _, scope := range []string{"bogus", "team:x", "identity:", "identity:a b", "mob:.hidden", "Realm"} {
		cases = append(cases,
			struct{ method, path, body string }{"POST", "/v1/records", `{"records":[{"scope":"` + scope + `","kind":"fact","title":"t","body":"b"}]}`},
			struct{ method, path, body string }{"POST", "/v1/recall", `{"identity":{"id":"alice"},"scopes":["` + scope + `"]}`})
	}
	for _, f := range []string{"id", "scope", "kind", "trust", "status", "created_at", "updated_at"} {
		cases = append(cases, struct{ method, path, body string }{"POST", "/v1/import", without(f)})
	}
	// Session keys the server refuses.
	// A record without a title or body the server counts as text.
	for _, tb := range []string{`"title":"","body":""`, `"title":" ","body":"\u00a0"`, `"body":"\t\u2028"`, `"title":"\u3000"`} {
		cases = append(cases, struct{ method, path, body string }{"POST", "/v1/records", `{"records":[{"scope":"realm","kind":"fact",` + tb + `}]}`})
	}
	for _, key := range []string{"a b", "a\tb", "a\u0085b", "a\u00a0b", "a\u2028b", "..", strings.Repeat("k", 257)} {
		cases = append(cases,
			struct{ method, path, body string }{"POST", "/v1/turns/inject", `{"identity":{"id":"alice"},"session":"` + key + `","content":"q"}`},
			struct{ method, path, body string }{"POST", "/v1/defang", `{"identity":{"id":"alice"},"session":"` + key + `","content":"hi"}`})
	}
	// (The paths' {key} has the same schema; the validator here reads a
	// path parameter without decoding it, so a%20b is not checked.)
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		status, data := send(t, srv, req)
		if status != http.StatusBadRequest {
			t.Errorf("%s %s %s = %d %s, want 400", c.method, c.path, c.body, status, data)
			continue
		}
		if err := spec.CheckRequest(req, []byte(c.body)); err == nil {
			t.Errorf("%s %s %s: the server refuses it (%s), the document allows it", c.method, c.path, c.body, data)
		}
	}
	// The import the cases spoil is one both take.
	body := []byte(`{"records":[` + fmt.Sprintf(rec, "") + `]}`)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/import", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if status, data := send(t, srv, req); status != http.StatusOK {
		t.Fatalf("import = %d %s", status, data)
	}
	if err := spec.CheckRequest(req, body); err != nil {
		t.Errorf("the document refuses an import the server takes: %v", err)
	}

	// Records of a title alone or a body alone, and a turn of a session,
	// are ones both take.
	for _, c := range []struct{ path, body string }{
		{"/v1/records", `{"records":[{"scope":"realm","kind":"fact","title":"t"}]}`},
		{"/v1/records", `{"records":[{"scope":"realm","kind":"fact","title":" ","body":"\u00e9"}]}`},
		{"/v1/turns/inject", `{"identity":{"id":"alice"},"session":"s-1.\u00e9","content":"q"}`},
	} {
		req, _ := http.NewRequest("POST", srv.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		if status, data := send(t, srv, req); status != http.StatusOK {
			t.Errorf("%s %s = %d %s, want 200", c.path, c.body, status, data)
		}
		if err := spec.CheckRequest(req, []byte(c.body)); err != nil {
			t.Errorf("the document refuses %s %s, which the server takes: %v", c.path, c.body, err)
		}
	}

	// A compaction of no messages: the server refuses it (400 before any
	// summary, 409 after one), and its refusal of a request without the
	// list must not suggest sending [] instead. A guide request's unknown
	// field (a misspelt filter) is refused as every body's is.
	comp, _ := newSurfacesWith(t, Options{Compaction: compaction.New(compaction.Options{Compactor: &echoCompactor{}})})
	for _, c := range []struct{ path, body, refusal string }{
		{"/v1/conversations/c1/compact", `{"identity":{"id":"alice"},"evicted":[]}`, ""},
		{"/v1/conversations/c1/compact", `{"identity":{"id":"alice"}}`, "[]"},
		{"/v1/guide/session-start", `{"identity":{"id":"alice"},"session":"s1","task":"t","topk":3}`, ""},
		{"/v1/guide/before-iteration", `{"identity":{"id":"alice"},"session":"s1","bogus":1}`, ""},
	} {
		req, _ := http.NewRequest("POST", comp.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		status, data := send(t, comp, req)
		if status != http.StatusBadRequest {
			t.Errorf("%s %s = %d %s, want 400", c.path, c.body, status, data)
			continue
		}
		if err := spec.CheckRequest(req, []byte(c.body)); err == nil {
			t.Errorf("%s %s: the server refuses it (%s), the document allows it", c.path, c.body, data)
		}
		if c.refusal != "" && strings.Contains(string(data), c.refusal) {
			t.Errorf("%s %s: the refusal %s suggests %s, which is refused too", c.path, c.body, data, c.refusal)
		}
	}
	// The filters the guide takes are ones the document takes.
	guideBody := `{"identity":{"id":"alice"},"session":"s1","task":"t","top_k":3,"min_score":0.5,"required_tags":["a"],"excluded_tags":["b"]}`
	req, _ = http.NewRequest("POST", comp.URL+"/v1/guide/session-start", strings.NewReader(guideBody))
	req.Header.Set("Content-Type", "application/json")
	if status, data := send(t, comp, req); status != http.StatusOK {
		t.Errorf("guide session-start %s = %d %s", guideBody, status, data)
	}
	if err := spec.CheckRequest(req, []byte(guideBody)); err != nil {
		t.Errorf("the document refuses a guide request the server takes: %v", err)
	}
}

func send(t *testing.T, srv *httptest.Server, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

// TestEveryOperationDocumentsItsRefusals: a refusal every /v1 operation
// may answer (401 without a token, and so 403, 429 and 503 before it runs)
// is one docs/openapi.yaml documents for it, in the error envelope. GET
// /v1/plugins documented its 200 alone.
func TestEveryOperationDocumentsItsRefusals(t *testing.T) {
	srv, _ := newTestServer(t, Options{Tokens: []Token{{Name: "app", Secret: "app-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication}}})
	for _, route := range New(Options{}).Routes() {
		method, path, _ := strings.Cut(route, " ")
		if !strings.HasPrefix(path, "/v1/") {
			continue
		}
		for _, param := range []string{"{id}", "{key}"} {
			path = strings.ReplaceAll(path, param, "x")
		}
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		req.Header.Set("Content-Type", "application/json")
		if status, _, data := exchange(t, srv, req, nil); status != http.StatusUnauthorized {
			t.Errorf("%s without a token = %d %s, want 401", route, status, data)
		}
	}
}
