package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/guide"
	"github.com/memhost/memhost/internal/hybrid"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/sdk"
)

// downPlugins is a plugin host with one crashed plugin whose status names
// its binary, pid and an error holding a path.
type downPlugins struct{}

func (downPlugins) Ready() bool { return false }
func (downPlugins) Status() []pluginhost.Status {
	return []pluginhost.Status{{Instance: "store", Plugin: "memhost-sqlite", Version: "1.2.3", Pid: 4242,
		LastError: "open /var/lib/memhost/default.db: permission denied"}}
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// /readyz names the plugins to a valid token, and their errors only to
// the host's operator (Server.operator).
func TestReadyzHidesPluginDetailWithoutAToken(t *testing.T) {
	tokens := []Token{
		{Name: "bot", Secret: "s3cret", Realms: []string{"default"}},
		{Name: "ops", Secret: "0ps-s3cret", Realms: []string{"default"}, Role: RoleApplication},
	}
	cases := []struct {
		name          string
		tokens        []Token
		token         string
		detail, error bool
	}{
		{"tokens configured, none sent", tokens, "", false, false},
		{"tokens configured, unknown token", tokens, "guess", false, false},
		{"tokens configured, agent token", tokens, "s3cret", true, false},
		{"tokens configured, operator's token", tokens, "0ps-s3cret", true, true},
		{"no tokens configured", nil, "", true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newTestServer(t, Options{Tokens: tc.tokens, Plugins: downPlugins{}})
			status, body := get(t, srv.URL+"/readyz", tc.token)
			if status != http.StatusServiceUnavailable || !strings.Contains(body, `"not ready"`) {
				t.Fatalf("status %d body %s", status, body)
			}
			for _, secret := range []string{"memhost-sqlite", "1.2.3", "4242"} {
				if strings.Contains(body, secret) != tc.detail {
					t.Fatalf("%q in body is %v, want %v: %s", secret, !tc.detail, tc.detail, body)
				}
			}
			for _, secret := range []string{"/var/lib", "permission denied"} {
				if strings.Contains(body, secret) != tc.error {
					t.Fatalf("%q in body is %v, want %v: %s", secret, !tc.error, tc.error, body)
				}
			}
		})
	}
}

// warnedPlugins is a plugin host whose provider logged a warning naming
// a file of another tenant's realm.
type warnedPlugins struct{}

func (warnedPlugins) Ready() bool { return true }
func (warnedPlugins) Status() []pluginhost.Status {
	return []pluginhost.Status{{Instance: "store", Plugin: "memhost-markdown", State: pluginhost.StateReady, Healthy: true,
		LastError: "rival: write failed", Warnings: []string{"skipping record file that is not a valid record file=/data/md/rival/identity/ceo/r1.md"}}}
}

// failingSemantic reports a realm whose embedding backlog fails with
// what the embedder's endpoint answered, as the host's status carries it.
type failingSemantic struct{}

func (failingSemantic) Status() []hybrid.Status {
	return []hybrid.Status{{Realm: "default", State: hybrid.StateFailing,
		LastError: "embed: openai: http://10.1.2.3:8080/v1/embeddings answered HTTP 401: Incorrect API key provided: sk-live-0123"}}
}

// An instance's warnings and last error quote what its plugin logged,
// which names other realms' files, identities and ids: /v1/plugins gave
// them to every token, an agent of another realm included. Only the
// host's operator reads them now, and a realm's semantic last error
// likewise (it quoted the embedder's endpoint and answer, an echoed API
// key included, to any token of the realm).
func TestPluginWarningsAreTheOperators(t *testing.T) {
	tokens := []Token{
		{Name: "ops", Secret: "ops-secret-0123456789", Realms: []string{"default", "rival"}, Role: RoleApplication},
		{Name: "app", Secret: "app-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication},
		{Name: "bot", Secret: "bot-secret-0123456789", Realms: []string{"default", "rival"}, Role: RoleAgent},
		{Name: "alice", Secret: "alice-secret-0123456789", Realms: []string{"default", "rival"}, Role: RoleApplication, Identities: []string{"alice"}},
		// A realm with no block of its own, served by the default realm's
		// provider: the config's realms alone made "app" an operator.
		{Name: "beta", Secret: "beta-secret-0123456789", Realms: []string{"beta"}, Role: RoleApplication},
		{Name: "ops2", Secret: "ops2-secret-0123456789", Realms: []string{"default", "rival", "beta"}, Role: RoleApplication},
	}
	withTokens, _ := newTestServer(t, Options{Tokens: tokens, Realms: []string{"default", "rival"}, Plugins: warnedPlugins{}, Semantic: failingSemantic{}})
	oneRealm, _ := newTestServer(t, Options{Tokens: []Token{tokens[1], tokens[4]}, Plugins: warnedPlugins{}, Semantic: failingSemantic{}})
	open, _ := newTestServer(t, Options{Realms: []string{"default", "rival"}, Plugins: warnedPlugins{}, Semantic: failingSemantic{}})
	cases := []struct {
		name, url, token string
		operator         bool
	}{
		{"application token of every realm", withTokens.URL, "ops2-secret-0123456789", true},
		{"application token of every configured realm, not of every token's", withTokens.URL, "ops-secret-0123456789", false},
		{"application token of the default realm beside another tenant's realm", oneRealm.URL, "app-secret-0123456789", false},
		{"application token of one realm", withTokens.URL, "app-secret-0123456789", false},
		{"agent token of every realm", withTokens.URL, "bot-secret-0123456789", false},
		{"application token bound to an identity", withTokens.URL, "alice-secret-0123456789", false},
		{"no tokens configured", open.URL, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(t, tc.url+"/v1/plugins", tc.token)
			if status != 200 || !strings.Contains(body, "memhost-markdown") || !strings.Contains(body, `"state":"failing"`) {
				t.Fatalf("status %d: %s", status, body)
			}
			for _, text := range []string{"ceo", "/data/md", "write failed", "10.1.2.3", "sk-live-0123"} {
				if strings.Contains(body, text) != tc.operator {
					t.Errorf("%q in the answer is %v, want %v: %s", text, !tc.operator, tc.operator, body)
				}
			}
		})
	}
}

// leakyProvider fails every recall with the text a real plugin failure
// carries: a binary, a pid and a database path.
type leakyProvider struct{}

var errLeaky = fmt.Errorf("plugin store (memhost-sqlite) crashed (plugin exited, pid 31337): open /var/lib/memhost/default.db: read-only file system: %w", sdk.ErrUnavailable)

func (leakyProvider) Recall(context.Context, sdk.RecallQuery) ([]sdk.Hit, error) {
	return nil, errLeaky
}

func TestErrorBodiesHoldNoPathOrPid(t *testing.T) {
	var logs strings.Builder
	providers := func(string) (sdk.Provider, error) { return leakyProvider{}, nil }
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.ProvidersFunc(providers)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(t.Context()) })
	srv := httptest.NewServer(New(Options{
		Logger:   hclog.New(&hclog.LoggerOptions{Output: &logs}),
		Provider: providers, Coordinator: coord, Guide: guide.NewSessions(coord, guide.SessionsOptions{Size: 4}),
	}).Handler())
	t.Cleanup(srv.Close)
	status, e := call(t, srv, "POST", "/v1/recall", "", []byte(`{"identity":{"id":"alice"},"query":"tea"}`))
	if status != http.StatusServiceUnavailable || e.Error.Code != "unavailable" {
		t.Fatalf("status %d, %+v", status, e)
	}
	for _, leak := range []string{"/var/lib", "31337"} {
		if strings.Contains(e.Error.Message, leak) {
			t.Fatalf("error body leaks %q: %s", leak, e.Error.Message)
		}
	}
	if !strings.Contains(e.Error.Message, "…/default.db: read-only file system") {
		t.Fatalf("the sanitised message lost its meaning: %s", e.Error.Message)
	}
	srv.Close() // the log is complete once the server is
	if !strings.Contains(logs.String(), "/var/lib/memhost/default.db") || !strings.Contains(logs.String(), "31337") {
		t.Fatalf("the log should keep the full error:\n%s", logs.String())
	}
}
