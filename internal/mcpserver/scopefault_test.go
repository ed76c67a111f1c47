package mcpserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// scopeBlind ignores the scopes of its recalls and manifests, as a buggy
// provider plugin might.
type scopeBlind struct{ *coordinatortest.Provider }

func (p scopeBlind) Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
	q.Scopes = nil
	return p.Provider.Recall(ctx, q)
}

func (p scopeBlind) Manifest(ctx context.Context, q sdk.ManifestQuery) ([]sdk.ManifestRow, error) {
	q.Scopes = nil
	return p.Provider.Manifest(ctx, q)
}

// connectAlice connects a client acting as alice of the default realm to
// tools over p and a coordinator of its own.
func connectAlice(t *testing.T, p sdk.Provider) *mcp.ClientSession {
	t.Helper()
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.RealmProviders{"default": p}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(context.Background()) })
	return connectWith(t, Options{
		Provider:    func(string) (sdk.Provider, error) { return p, nil },
		Coordinator: coord,
		Bind: func(http.Header) (Caller, error) {
			return Caller{Identity: sdk.Identity{Realm: "default", ID: "alice"}}, nil
		},
	})
}

// TestToolsKeepToTheirScopes: from an outside review. memory_recall
// checked the provider's hits against the caller's scopes, but
// memory_index passed a scope-blind provider's manifest on whole: alice's
// agent listed bob's private records' ids and titles.
func TestToolsKeepToTheirScopes(t *testing.T) {
	provider := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	provider.MustAdd("default",
		sdk.Record{Scope: sdk.IdentityScope("alice"), Kind: sdk.KindFact, Title: "harbour walk", Body: "alice likes the harbour"},
		sdk.Record{Scope: sdk.IdentityScope("bob"), Kind: sdk.KindFact, Title: "BOB-PRIVATE harbour diagnosis", Body: "bob only"})
	cs := connectAlice(t, scopeBlind{provider})
	for _, c := range []struct{ tool, args string }{
		{ToolIndex, `{}`},
		{ToolRecall, `{"query":"harbour"}`},
	} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: c.tool, Arguments: json.RawMessage(c.args)})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", c.tool, err, res)
		}
		out, _ := json.Marshal(res)
		if !strings.Contains(string(out), "harbour walk") {
			t.Errorf("%s answered %s, want alice's record", c.tool, out)
		}
		if strings.Contains(string(out), "BOB-PRIVATE") || strings.Contains(string(out), "identity:bob") {
			t.Errorf("%s answered bob's record to alice: %s", c.tool, out)
		}
	}
}
