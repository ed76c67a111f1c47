package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/sdk"
)

// TestRefusalsNameWhatWasSent: from an outside review of the API's
// refusals. Each says its problem once, without a package's name, and
// names the field or parameter as the request spelled it; a path that is
// not in its clean form is no endpoint, in the error envelope, rather than
// a bare redirect to another endpoint ahead of authentication.
func TestRefusalsNameWhatWasSent(t *testing.T) {
	svc := compaction.New(compaction.Options{Compactor: &echoCompactor{}})
	srv, _ := newTestServer(t, Options{Compaction: svc}, sdk.CapWrite, sdk.CapFetch, sdk.CapForget, sdk.CapManifest)
	noRedirect := *srv.Client()
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, c := range []struct {
		name, method, path, body string
		status                   int
		field, msg, not          string
	}{
		{"a session with a space", "POST", "/v1/turns/inject", `{"identity":{"id":"alice"},"session":"a b","content":"hi"}`, 400, "session", "whitespace", "coordinator:"},
		{"a compaction's session with a space", "POST", "/v1/sessions/a%20b/compacted", `{"identity":{"id":"alice"}}`, 400, "session", "whitespace", "coordinator:"},
		{"a guide session left out", "POST", "/v1/guide/session-start", `{"identity":{"id":"alice"},"task":"plan"}`, 400, "session", "empty", "guide:"},
		{"a scope that is not one", "GET", "/v1/records?scope=bogus", "", 400, "scope", "bogus", "scope: scope:"},
		{"a search in invalid UTF-8", "GET", "/v1/records?q=%FF", "", 400, "q", "UTF-8", "query:"},
		{"a search paged with after", "GET", "/v1/records?q=espresso&after=r1", "", 400, "after", "one page", ""},
		{"a conversation's identity", "DELETE", "/v1/conversations/c1?identity=bad%20id", "", 400, "identity", "", "identity.id"},
		{"a conversation id too long", "DELETE", "/v1/conversations/" + strings.Repeat("c", 257) + "?identity=alice", "", 400, "id", "257 bytes", ""},
		{"evicted left out", "POST", "/v1/conversations/c9/compact", `{"identity":{"id":"alice"},"session":"s1"}`, 400, "evicted", "is required", ""},
		{"k below zero", "POST", "/v1/manifest", `{"identity":{"id":"alice"},"k":-1}`, 400, "k", "0 or absent", ""},
		{"a .. segment", "POST", "/v1/records/x/../../recall", `{"identity":{"id":"alice"},"query":"q"}`, 404, "", "clean form", ""},
		{"an empty segment", "GET", "/v1//records", "", 404, "", "clean form", ""},
		{"an escaped slash is part of the id", "GET", "/v1/records/..%2F..%2Fetc", "", 400, "id", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, srv.URL, strings.NewReader(c.body))
			req.URL.Opaque = c.path // sent as written, .. and // included
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e errorBody
			decodeBody(t, resp, &e)
			if resp.StatusCode != c.status || e.Error.Field != c.field || !strings.Contains(e.Error.Message, c.msg) || e.Error.RequestID == "" {
				t.Fatalf("= %d %+v, want %d, field %q and a message holding %q", resp.StatusCode, e.Error, c.status, c.field, c.msg)
			}
			if c.not != "" && strings.Contains(e.Error.Message, c.not) {
				t.Fatalf("message %q holds %q", e.Error.Message, c.not)
			}
		})
	}
}

func decodeBody(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("answer %d is not JSON: %v", resp.StatusCode, err)
	}
}
