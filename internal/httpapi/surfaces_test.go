package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/guide"
	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/sdk"
)

// newSurfaces serves /v1 and /mcp from one server over one in-memory
// provider, as memhost serve does, so a test can send the same input
// through both surfaces.
func newSurfaces(t *testing.T) (*httptest.Server, *coordinatortest.Provider) {
	t.Helper()
	p := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	providers := func(string) (sdk.Provider, error) { return p, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(t.Context()) })
	s := New(Options{
		Provider: providers, Coordinator: coord,
		Guide: guide.NewSessions(coord, guide.SessionsOptions{Size: 16}),
		MCP: func(bind func(http.Header) (mcpserver.Caller, error)) http.Handler {
			return mcpserver.Handler(mcpserver.Options{Provider: providers, Coordinator: coord, Bind: bind})
		},
	})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv, p
}

// callTool calls an MCP tool as alice over /mcp and answers whether the
// tool refused the call, and its text.
func callTool(t *testing.T, srv *httptest.Server, tool, args string) (refused bool, text string) {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":%s}}`, tool, args)
	req, _ := http.NewRequest("POST", srv.URL+"/mcp?identity=alice", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s %s: status %d, undecodable answer: %v", tool, args, resp.StatusCode, err)
	}
	switch {
	case out.Error != nil:
		return true, out.Error.Message
	case out.Result == nil || len(out.Result.Content) == 0:
		t.Fatalf("%s %s: no result", tool, args)
	}
	return out.Result.IsError, out.Result.Content[0].Text
}

// TestTimesAgreeAcrossSurfaces: /v1 and the MCP tools read a time the
// same way, so a time one surface refuses the other refuses too, and
// neither stores nor acts on a time it reinterpreted. Before, MCP parsed
// with time.Parse, which takes an offset of +24:00 or +01:60 (read as
// +02:00), a one-digit hour and a decimal comma, all of which /v1
// refuses; and both surfaces took 0001-01-01T00:00:00Z, the zero time, as
// "no time": a record stored without its occurred_at, an expiry of year 1
// stored as none, a `now` of year 1 read as the host's clock.
func TestTimesAgreeAcrossSurfaces(t *testing.T) {
	srv, p := newSurfaces(t)
	cases := []struct {
		time   string
		accept bool
	}{
		{"2023-05-27T09:00:00Z", true},
		{"2023-05-27T09:00:00+23:59", true},
		{"2023-05-27T09:00:00-00:00", true},
		{"2023-05-27T09:00:00.1234567891Z", true},
		{"0001-01-01T00:00:00.001Z", true},
		{"2023-05-27T09:00:00+24:00", false},
		{"2023-05-27T09:00:00+01:60", false},
		{"2023-05-27T9:00:00Z", false},
		{"2023-05-27T09:00:00,5Z", false},
		{"2023-05-27t09:00:00z", true}, // RFC 3339 §5.6 allows "t" and "z"
		{"2023-05-27T09:00:00z", true},
		{"2023-05-27T23:59:60Z", false},
		{"2023-05-27", false},
		{"0001-01-01T00:00:00Z", false},
		// Inside the zero time's millisecond: kept in whole milliseconds,
		// as every store keeps a time, it was the zero time, so an expiry
		// already past was stored as none and an occurrence dropped.
		{"0001-01-01T00:00:00.0009Z", false},
		{"0001-01-01T01:00:00.000000001+01:00", false},
		{"0000-12-31T23:00:00-01:00", false},
		{"0000-06-01T00:00:00Z", false},
		{"9999-12-31T23:00:00-01:00", false},
	}
	for _, c := range cases {
		t.Run(c.time, func(t *testing.T) {
			for _, field := range []string{"now", "since", "until"} {
				status, e := call(t, srv, "POST", "/v1/recall", "", fmt.Appendf(nil, `{"identity":{"id":"alice"},"query":"hike",%q:%q}`, field, c.time))
				if (status == 200) != c.accept || (!c.accept && (status != 400 || e.Error.Code != "invalid_argument" || e.Error.Field != field)) {
					t.Errorf("/v1/recall %s = %d %+v, want accepted %v (else a 400 on %s)", field, status, e, c.accept, field)
				}
				status, e = call(t, srv, "POST", "/v1/turns/inject", "", fmt.Appendf(nil, `{"identity":{"id":"alice"},"content":"hike",%q:%q}`, field, c.time))
				if (status == 200) != c.accept || (!c.accept && (status != 400 || e.Error.Field != field)) {
					t.Errorf("/v1/turns/inject %s = %d %+v, want accepted %v", field, status, e, c.accept)
				}
				refused, text := callTool(t, srv, mcpserver.ToolRecall, fmt.Sprintf(`{"query":"hike",%q:%q}`, field, c.time))
				if refused == c.accept || (refused && !strings.HasPrefix(text, field+": ")) {
					t.Errorf("memory_recall %s: refused %v (%s), want accepted %v", field, refused, text, c.accept)
				}
			}
			for _, field := range []string{"occurred_at", "expires_at"} {
				before := p.Calls(coordinatortest.MethodRemember)
				status, e := call(t, srv, "POST", "/v1/records", "", fmt.Appendf(nil, `{"records":[{"scope":"identity:alice","kind":"fact","title":"t","body":%q,%q:%q}]}`, field+c.time, field, c.time))
				if (status == 200) != c.accept || (!c.accept && (status != 400 || e.Error.Field != "records[0]."+field)) {
					t.Errorf("/v1/records %s = %d %+v, want accepted %v", field, status, e, c.accept)
				}
				if !c.accept && p.Calls(coordinatortest.MethodRemember) != before {
					t.Errorf("/v1/records %s: a refused record reached the provider", field)
				}
			}
			before := p.Calls(coordinatortest.MethodRemember)
			refused, text := callTool(t, srv, mcpserver.ToolRemember, fmt.Sprintf(`{"title":"t","body":%q,"occurred_at":%q}`, "mcp"+c.time, c.time))
			if refused == c.accept || (refused && !strings.HasPrefix(text, "occurred_at: ")) {
				t.Errorf("memory_remember occurred_at: refused %v (%s), want accepted %v", refused, text, c.accept)
			}
			if refused && p.Calls(coordinatortest.MethodRemember) != before {
				t.Errorf("memory_remember: a refused record reached the provider")
			}
		})
	}
}

// TestRecallRefusalsNameTheirField: every refusal of a recall field
// carries the field member, named as the message names it (the docs: a
// refusal that names a field gives its path in "field").
func TestRecallRefusalsNameTheirField(t *testing.T) {
	srv, p := newSurfaces(t)
	cases := []struct {
		body   string
		status int
		field  string
		msg    string
	}{
		{`{"identity":{"id":"alice"},"query":"q","limit":-1}`, 400, "limit", "limit: -1 is outside 0..100"},
		{`{"identity":{"id":"alice"},"query":"q","limit":101}`, 400, "limit", "limit: 101 is outside 0..100"},
		{`{"identity":{"id":"alice"},"query":"q","scopes":["identity:alice","bogus"]}`, 400, "scopes[1]", `scopes[1]: "bogus" is not identity:<id>, mob:<name>, operator:<name> or realm`},
		{`{"identity":{"id":"alice"},"query":"q","scopes":["identity:"]}`, 400, "scopes[0]", `scopes[0]: name in "identity:" must not be empty`},
		// The name quoted once, not in the scope and again on its own.
		{`{"identity":{"id":"alice"},"query":"q","scopes":["identity:a b"]}`, 400, "scopes[0]", `scopes[0]: name "a b" may hold only letters, digits, '-', '_' and '.'`},
		{`{"identity":{"id":"alice"},"query":"q","scopes":["identity:bob"]}`, 403, "scopes[0]", `scopes[0]: identity "alice" does not read scope "identity:bob"`},
	}
	for _, c := range cases {
		status, e := call(t, srv, "POST", "/v1/recall", "", []byte(c.body))
		if status != c.status || e.Error.Code != codeOf(statusErr(c.status)) || e.Error.Field != c.field || e.Error.Message != c.msg {
			t.Errorf("%s = %d %+v, want %d on field %s: %q", c.body, status, e, c.status, c.field, c.msg)
		}
	}
	if n := p.Calls(coordinatortest.MethodRecall); n != 0 {
		t.Fatalf("refused recalls reached the provider %d times", n)
	}
}

// statusErr is the class error a status answers.
func statusErr(status int) error {
	if status == 403 {
		return sdk.ErrPermission
	}
	return sdk.ErrInvalid
}

// TestImportRefusesTimesNoAnswerCanHold: an imported record's times are
// checked like occurred_at, on their UTC years. Before, an expires_at,
// created_at, updated_at or last_used_at of 9999-12-31T23:00:00-01:00 (year
// 10000 in UTC, where the record is kept) was imported, and every later
// answer holding the record (get, recall, export) was a 200 with an
// empty body, as a time past year 9999 has no JSON form.
func TestImportRefusesTimesNoAnswerCanHold(t *testing.T) {
	p := coordinatortest.NewProvider(sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapArchive)
	arch := &fuzzArchiver{Provider: p}
	providers := func(string) (sdk.Provider, error) { return arch, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(t.Context()) })
	srv := httptest.NewServer(New(Options{Provider: providers, Coordinator: coord}).Handler())
	t.Cleanup(srv.Close)
	record := func(field, at string) string {
		times := map[string]string{"created_at": "2023-05-27T09:00:00Z", "updated_at": "2023-05-27T09:00:00Z"}
		times[field] = at
		var b strings.Builder
		for _, f := range []string{"created_at", "updated_at", "expires_at", "last_used_at", "occurred_at"} {
			if v, ok := times[f]; ok {
				fmt.Fprintf(&b, ",%q:%q", f, v)
			}
		}
		return `{"realm":"default","records":[{"id":"r1","scope":"realm","kind":"fact","title":"t","body":"b","trust":"application","status":"active"` + b.String() + `}]}`
	}
	for _, field := range []string{"created_at", "updated_at", "expires_at", "last_used_at", "occurred_at"} {
		for _, at := range []string{"9999-12-31T23:00:00-01:00", "0000-12-31T22:00:00-01:00"} {
			status, e := call(t, srv, "POST", "/v1/import", "", []byte(record(field, at)))
			if status != 400 || e.Error.Code != "invalid_argument" || e.Error.Field != "records[0]."+field {
				t.Errorf("import with %s %s = %d %+v, want 400 on records[0].%s", field, at, status, e, field)
			}
		}
	}
	if arch.imports != 0 {
		t.Fatalf("refused imports reached the provider %d times", arch.imports)
	}
	if status, e := call(t, srv, "POST", "/v1/import", "", []byte(record("expires_at", "9999-12-31T22:59:59-01:00"))); status != 200 || arch.imports != 1 {
		t.Fatalf("import of the last expiry a record can hold = %d %+v", status, e)
	}
}
