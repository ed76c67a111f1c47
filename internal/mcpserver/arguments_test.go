package mcpserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestArgumentRefusalsAreV1s: arguments of the wrong shape are refused
// before the SDK's own checks, in /v1's words for the same field (the
// strict decoder's), never in Go's: before, the SDK answered "json: cannot
// unmarshal \"[]\" into Go value of type map[string]interface {}" and
// "type: <invalid reflect.Value> has type \"null\"", and a wrong type,
// an unknown name and null each in words of its own.
func TestArgumentRefusalsAreV1s(t *testing.T) {
	provider := coordinatortest.NewProvider(coordinatortest.AllCapabilities...)
	cs := connect(t, provider)
	cases := []struct{ tool, args, want string }{
		{ToolRecall, `{"query":"q","limit":"5"}`, "limit: must be an integer, not a string"},
		{ToolRecall, `{"query":"q","limit":1.5}`, "limit: must be an integer (no fraction or exponent)"},
		{ToolRecall, `{"query":"q","now":1685178000}`, "now: must be a string, not a number"},
		{ToolRecall, `{"query":"q","now":null}`, "now: must be a string, not null"},
		{ToolRecall, `{"query":null}`, "query: must be a string, not null"},
		{ToolRecall, `{"query":"q","tags":"a"}`, "tags: must be an array, not a string"},
		{ToolRecall, `{"query":"q","tags":["a",null]}`, "tags[1]: must be a string, not null"},
		{ToolRecall, `{"query":"q","tags":[1]}`, "tags[0]: must be a string, not a number"},
		{ToolRecall, `{"query":"q","extra":1}`, "extra: unknown field"},
		{ToolRecall, `[]`, "arguments: must be a JSON object"},
		{ToolRecall, `"x"`, "arguments: must be a JSON object"},
		{ToolRecall, `7`, "arguments: must be a JSON object"},
		{ToolRemember, `{"title":1,"body":"b"}`, "title: must be a string, not a number"},
		{ToolRemember, `{"title":"t","body":"b","tags":{}}`, "tags: must be an array, not an object"},
		{ToolRemember, `{"title":"t","body":"b","occurred_at":null}`, "occurred_at: must be a string, not null"},
		{ToolForget, `{"id":1}`, "id: must be a string, not a number"},
		{ToolIndex, `{"limit":true}`, "limit: must be an integer, not a boolean"},
	}
	for _, tc := range cases {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tc.tool, Arguments: json.RawMessage(tc.args)})
		if err != nil {
			t.Fatal(err)
		}
		text := res.Content[0].(*mcp.TextContent).Text
		if !res.IsError || text != tc.want {
			t.Errorf("%s %s: error %v %q, want %q", tc.tool, tc.args, res.IsError, text, tc.want)
		}
	}
	if n := provider.Calls(coordinatortest.MethodRemember) + provider.Calls(coordinatortest.MethodRecall); n != 0 {
		t.Fatalf("refused arguments reached the provider %d times", n)
	}
	// Well-formed arguments still reach the tools.
	for _, tc := range []struct{ tool, args string }{
		{ToolRemember, `{"title":"coffee","body":"flat white","tags":["drink"]}`},
		{ToolRecall, `{"query":"coffee","limit":5}`},
		{ToolIndex, `{}`},
	} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tc.tool, Arguments: json.RawMessage(tc.args)})
		if err != nil || res.IsError {
			t.Fatalf("%s %s: %v %+v", tc.tool, tc.args, err, res)
		}
		if text := res.Content[0].(*mcp.TextContent).Text; strings.Contains(text, "No memory matched") && tc.tool == ToolRecall {
			t.Fatalf("recall found nothing: %s", text)
		}
	}
}
