package httpapi

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/guide"
	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/sdk"
)

// TestContentRefusalsSayWhatIsWrong: a refused content (of a turn, a
// defang request, an evicted message) is answered with the content
// rules' own problem, at the path of the refused block. Before, every
// such refusal reached the client as the strict decoder's words for the
// Go type behind the field: "content: must be an object, not an array"
// for a text block without text, "must be an object, not an object" for
// an object, though content is a string or a list and never an object.
func TestContentRefusalsSayWhatIsWrong(t *testing.T) {
	p, providers, coord := testCoordinator(t, sdk.CapWrite, sdk.CapFetch, sdk.CapForget)
	comp := &echoCompactor{}
	srv := httptest.NewServer(New(Options{
		Provider: providers, Coordinator: coord,
		Guide:      guide.NewSessions(coord, guide.SessionsOptions{Size: 16}),
		Compaction: compaction.New(compaction.Options{Compactor: comp}),
	}).Handler())
	t.Cleanup(srv.Close)
	deep := strings.Repeat(`{"type":"tool_result","content":[`, 10) + `{"type":"text","text":"x"}` + strings.Repeat(`]}`, 10)
	cases := []struct{ content, field, msg string }{
		{`{}`, "content", "content: must be a string or a list of blocks"},
		{`7`, "content", "content: must be a string or a list of blocks"},
		{`[1]`, "content[0]", "content[0]: a block must be a JSON object"},
		{`[{"type":"text"}]`, "content[0]", `content[0]: a text block needs a string "text"`},
		{`["a",{"text":"a"}]`, "content[0]", "content[0]: a block must be a JSON object"},
		{`[{"type":"text","text":"a"},{"text":"a"}]`, "content[1]", `content[1]: a block has no "type"`},
		{`[{"type":"tool_result","content":[{"type":"text","text":"ok"},{"type":"text"}]}]`, "content[0].content[1]", `content[0].content[1]: a text block needs a string "text"`},
		// A tool result's content itself, neither a string nor a list,
		// is named as its member (it was named as the block, content[0]).
		{`[{"type":"tool_result","content":{"type":"text","text":"x"}}]`, "content[0].content", "content[0].content: must be a string or a list of blocks"},
		{`[{"type":"tool_result","content":[{"type":"tool_result","content":7}]}]`, "content[0].content[0].content", "content[0].content[0].content: must be a string or a list of blocks"},
		{`[` + deep + `]`, "content[0].content[0].content[0].content[0].content[0].content[0].content[0].content[0].content[0]", "content[0].content[0].content[0].content[0].content[0].content[0].content[0].content[0].content[0]: tool results nest deeper than 8"},
		// What the body's strict decoder refuses is refused as before.
		{`[{"type":"text","text":"a","text":"b"}]`, "content[0].text", "content[0].text: appears more than once"},
		{`[{"type":"text","text":"\ud800"}]`, "content[0].text", "surrogate"},
	}
	for _, c := range cases {
		for _, route := range []struct{ path, body, field string }{
			{"/v1/turns/inject", `{"identity":{"id":"alice"},"content":%s}`, ""},
			{"/v1/defang", `{"identity":{"id":"alice"},"content":%s}`, ""},
			{"/v1/conversations/c1/compact", `{"identity":{"id":"alice"},"session":"s1","evicted":[{"role":"user","content":"fine"},{"role":"user","content":%s}]}`, "evicted[1]."},
		} {
			status, e := call(t, srv, "POST", route.path, "", fmt.Appendf(nil, route.body, c.content))
			if status != 400 || e.Error.Code != "invalid_argument" || e.Error.Field != route.field+c.field || !strings.Contains(e.Error.Message, c.msg) || !strings.HasPrefix(e.Error.Message, route.field+c.field+": ") {
				t.Errorf("%s with content %.60s = %d %+v, want 400 on %s%s: %q", route.path, c.content, status, e, route.field, c.field, c.msg)
			}
		}
	}
	if n := p.Calls(coordinatortest.MethodRecall); n != 0 || comp.calls != 0 {
		t.Fatalf("refused content reached the provider (%d recalls) or the compactor (%d calls)", n, comp.calls)
	}
	// Good content still works on every route, null included where the
	// field may be left out.
	for _, c := range []struct{ path, body string }{
		{"/v1/turns/inject", `{"identity":{"id":"alice"},"content":[{"type":"tool_result","content":[{"type":"text","text":"hike"}]}]}`},
		{"/v1/defang", `{"identity":{"id":"alice"},"content":"hike"}`},
		{"/v1/conversations/c1/compact", `{"identity":{"id":"alice"},"session":"s1","evicted":[{"role":"user","content":[{"type":"text","text":"fine"}]},{"role":"user","content":null}]}`},
	} {
		if status, e := call(t, srv, "POST", c.path, "", []byte(c.body)); status != 200 {
			t.Errorf("%s %s = %d %+v", c.path, c.body, status, e)
		}
	}
	for _, path := range []string{"/v1/turns/inject", "/v1/defang"} {
		if status, e := call(t, srv, "POST", path, "", []byte(`{"identity":{"id":"alice"},"content":null}`)); status != 400 || e.Error.Field != "content" || e.Error.Message != "content: is required" {
			t.Errorf("%s with null content = %d %+v, want content: is required", path, status, e)
		}
	}
}
