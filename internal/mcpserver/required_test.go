package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMissingArgumentsAreNamedAsV1Does: an argument the tool's schema
// requires and the call leaves out is refused as /v1 refuses a missing
// field ("id: is required"), like every other argument refusal. Before,
// the SDK's schema check answered it in words of its own ("validating
// \"arguments\": validating root: required: missing properties: [\"id\"]").
func TestMissingArgumentsAreNamedAsV1Does(t *testing.T) {
	provider := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	cs := connect(t, provider)
	cases := []struct {
		tool string
		args json.RawMessage
		want string
	}{
		{ToolForget, json.RawMessage(`{}`), "id: is required"},
		{ToolForget, nil, "id: is required"},
		{ToolForget, json.RawMessage(`null`), "id: is required"},
		{ToolRemember, json.RawMessage(`{"title":"t"}`), "body: is required"},
		{ToolRemember, json.RawMessage(`{"body":"b","tags":["x"]}`), "title: is required"},
		{ToolRecall, json.RawMessage(`{"limit":5}`), "query: is required"},
	}
	for _, tc := range cases {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError || text != tc.want {
			t.Errorf("%s %s: error %v %q, want %q", tc.tool, tc.args, res.IsError, text, tc.want)
		}
	}
	if n := provider.Calls(coordinatortest.MethodRemember) + provider.Calls(coordinatortest.MethodRecall) + provider.Calls(coordinatortest.MethodForget); n != 0 {
		t.Fatalf("refused calls reached the provider %d times", n)
	}
	// A tool without required arguments takes none.
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: ToolIndex})
	if err != nil || res.IsError {
		t.Fatalf("index without arguments: %v %+v", err, res)
	}
}
