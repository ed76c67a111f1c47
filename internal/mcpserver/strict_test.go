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

// connect serves the tools to an in-memory client, through the SDK's own
// JSON-RPC decoding, as a real client reaches them.
func connect(t *testing.T, provider *coordinatortest.Provider) *mcp.ClientSession {
	t.Helper()
	coord, err := coordinator.New(testConfig(), coordinator.Options{Providers: coordinator.RealmProviders{"default": provider}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { coord.Close(context.Background()) })
	srv := New(Options{
		Provider:    func(string) (sdk.Provider, error) { return provider, nil },
		Coordinator: coord,
		Bind: func(http.Header) (Caller, error) {
			return Caller{Identity: sdk.Identity{Realm: "default", ID: "alice"}}, nil
		},
	})
	st, ct := mcp.NewInMemoryTransports()
	ctx := t.Context()
	if _, err := srv.Connect(ctx, st, nil); err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Tool arguments are decoded like /v1 bodies: a repeated name, a lone
// surrogate or invalid UTF-8 is refused, never resolved by the last name
// winning or replaced by U+FFFD.
func TestToolArgumentsAreStrict(t *testing.T) {
	provider := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	cs := connect(t, provider)
	cases := []struct{ name, tool, args, problem string }{
		{"repeated scope", ToolRemember, `{"title":"t","body":"b","scope":"identity:alice","scope":"realm"}`, "scope"},
		{"repeated title", ToolRemember, `{"title":"a","title":"b","body":"b"}`, "title"},
		{"lone surrogate", ToolRemember, `{"title":"\ud800","body":"b"}`, "surrogate"},
		{"invalid UTF-8", ToolRemember, "{\"title\":\"\xc3\x28\",\"body\":\"b\"}", "UTF-8"},
		{"repeated query", ToolRecall, `{"query":"a","query":"b"}`, "query"},
		{"case-folded name", ToolRecall, `{"QUERY":"a"}`, "QUERY"},
		{"repeated id", ToolForget, `{"id":"a","id":"b"}`, "id"},
		{"repeated cursor", ToolIndex, `{"cursor":"","cursor":"1"}`, "cursor"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tc.tool, Arguments: json.RawMessage(tc.args)})
			if err != nil {
				t.Fatal(err)
			}
			if !res.IsError {
				t.Fatalf("%s accepted %s", tc.tool, tc.args)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if !strings.Contains(text, tc.problem) {
				t.Fatalf("error %q does not name %q", text, tc.problem)
			}
		})
	}
	if n := provider.Calls(coordinatortest.MethodRemember); n != 0 {
		t.Fatalf("refused arguments reached the provider %d times", n)
	}
	// Well-formed arguments still work.
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: ToolRemember, Arguments: json.RawMessage(`{"title":"coffee","body":"flat white"}`)})
	if err != nil || res.IsError {
		t.Fatalf("remember: %v %+v", err, res)
	}
}
