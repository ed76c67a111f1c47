package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/memhost/memhost/internal/compaction"
	"github.com/memhost/memhost/sdk"
)

// echoCompactor joins carry-over and slice; mode "fail" or "empty" makes
// it misbehave.
type echoCompactor struct {
	mu    sync.Mutex
	mode  string
	calls int
}

func (c *echoCompactor) Compact(_ context.Context, req sdk.CompactRequest) (sdk.Message, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	switch c.mode {
	case "fail":
		return sdk.Message{}, fmt.Errorf("model unreachable: %w", sdk.ErrInvalid)
	case "empty":
		return sdk.Message{Role: "system"}, nil
	}
	var parts []string
	if req.CarryOver != nil {
		parts = append(parts, req.CarryOver.Content)
	}
	for _, m := range req.Evicted {
		parts = append(parts, m.Role+": "+m.Content)
	}
	return sdk.Message{Role: "system", Content: strings.Join(parts, " | ")}, nil
}

func compactBody(realm string, contents ...string) []byte {
	var ev []string
	for _, c := range contents {
		ev = append(ev, fmt.Sprintf(`{"role":"user","content":%s}`, c))
	}
	return []byte(fmt.Sprintf(`{"identity":{"realm":%q,"id":"alice"},"session":"s1","evicted":[%s]}`, realm, strings.Join(ev, ",")))
}

func postCompact(t *testing.T, srv *httptest.Server, conv, token string, body []byte) (int, compactAnswer, errorBody) {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+"/v1/conversations/"+conv+"/compact", strings.NewReader(string(body)))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw json.RawMessage
	json.NewDecoder(resp.Body).Decode(&raw)
	var ok compactAnswer
	var e errorBody
	json.Unmarshal(raw, &ok)
	json.Unmarshal(raw, &e)
	return resp.StatusCode, ok, e
}

func TestCompactEndpoint(t *testing.T) {
	comp := &echoCompactor{}
	svc := compaction.New(compaction.Options{Compactor: comp})
	srv, _ := newTestServer(t, Options{Compaction: svc, Tokens: []Token{{Name: "t", Secret: "tok", Realms: []string{"default"}}}})

	steps := []struct {
		name      string
		conv      string
		body      []byte
		token     string
		status    int
		code      string
		absorbed  int
		compacted int
		artifact  string
	}{
		{"first slice", "c1", compactBody("default", `"Always be brief"`, `[{"type":"tool_use","name":"ls","input":{}}]`), "tok", 200, "", 2, 2, "user: Always be brief | user: [tool call: ls] {}"},
		{"retry answers the same summary", "c1", compactBody("default", `"Always be brief"`, `[{"type":"tool_use","name":"ls","input":{}}]`), "tok", 200, "", 2, 0, "user: Always be brief | user: [tool call: ls] {}"},
		{"shorter history", "c1", compactBody("default", `"Always be brief"`), "tok", 409, "history_mismatch", 0, 0, ""},
		{"rewritten history", "c1", compactBody("default", `"Never be brief"`, `"x"`, `"y"`), "tok", 409, "history_mismatch", 0, 0, ""},
		{"other realm", "c1", compactBody("acme", `"x"`), "tok", 403, "permission_denied", 0, 0, ""},
		{"no token", "c1", compactBody("default", `"x"`), "", 401, "unauthenticated", 0, 0, ""},
		{"bad conversation id", "bad%20id", compactBody("default", `"x"`), "tok", 400, "invalid_argument", 0, 0, ""},
		{"nothing evicted", "c2", compactBody("default"), "tok", 400, "invalid_argument", 0, 0, ""},
		{"bad content", "c2", compactBody("default", `7`), "tok", 400, "invalid_argument", 0, 0, ""},
	}
	for _, st := range steps {
		status, ok, e := postCompact(t, srv, st.conv, st.token, st.body)
		if status != st.status || e.Error.Code != st.code {
			t.Fatalf("%s: %d %q (%s), want %d %q", st.name, status, e.Error.Code, e.Error.Message, st.status, st.code)
		}
		if status == 200 && (ok.Absorbed != st.absorbed || ok.Compacted != st.compacted || ok.Artifact.Content != st.artifact || ok.Artifact.Role != compaction.ArtifactRole) {
			t.Errorf("%s: %+v, want absorbed %d compacted %d artifact %q", st.name, ok, st.absorbed, st.compacted, st.artifact)
		}
	}
	if comp.calls != 1 {
		t.Errorf("%d compactor calls, want 1", comp.calls)
	}

	comp.mode = "fail"
	if status, _, e := postCompact(t, srv, "c1", "tok", compactBody("default", `"Always be brief"`, `[{"type":"tool_use","name":"ls","input":{}}]`, `"more"`)); status != 502 || e.Error.Code != "compaction_failed" || !strings.Contains(e.Error.Message, "model unreachable") {
		t.Errorf("failing compactor: %d %+v", status, e)
	}
	comp.mode = "empty"
	if status, _, e := postCompact(t, srv, "c1", "tok", compactBody("default", `"Always be brief"`, `[{"type":"tool_use","name":"ls","input":{}}]`, `"more"`)); status != 502 || e.Error.Code != "compaction_empty" {
		t.Errorf("empty compactor: %d %+v", status, e)
	}
	comp.mode = ""
	status, ok, _ := postCompact(t, srv, "c1", "tok", compactBody("default", `"Always be brief"`, `[{"type":"tool_use","name":"ls","input":{}}]`, `"more"`))
	if status != 200 || ok.Absorbed != 3 || ok.Compacted != 1 {
		t.Errorf("after failures the watermark must still be 2: %d %+v", status, ok)
	}

	if status, _ := call(t, srv, "DELETE", "/v1/conversations/c1?realm=acme", "tok", nil); status != 403 {
		t.Errorf("DELETE in another realm = %d, want 403", status)
	}
	if status, e := call(t, srv, "DELETE", "/v1/conversations/c1", "tok", nil); status != 400 || e.Error.Code != "invalid_argument" {
		t.Errorf("an agent's DELETE naming no identity = %d %+v, want 400", status, e)
	}
	// A bad conversation is the path's {id}, said once (it read field
	// "conversation", and "forget conversation: id: ..." on DELETE).
	if status, _, e := postCompact(t, srv, "a%20b", "tok", compactBody("default", `"x"`)); status != 400 || e.Error.Field != "id" {
		t.Errorf("compact of a bad id = %d %+v, want 400 on field id", status, e)
	}
	if status, e := call(t, srv, "DELETE", "/v1/conversations/a%20b?identity=alice", "tok", nil); status != 400 || e.Error.Field != "id" || strings.HasPrefix(e.Error.Message, "forget") {
		t.Errorf("DELETE of a bad id = %d %+v, want 400 on field id", status, e)
	}
	for range 2 {
		if status, e := call(t, srv, "DELETE", "/v1/conversations/c1?identity=alice", "tok", nil); status != 204 {
			t.Fatalf("DELETE = %d %+v, want 204", status, e)
		}
	}
	if status, ok, _ := postCompact(t, srv, "c1", "tok", compactBody("default", `"fresh"`)); status != 200 || ok.Absorbed != 1 || ok.Artifact.Content != "user: fresh" {
		t.Errorf("after DELETE: %d %+v, want a fresh summary", status, ok)
	}
}

func TestCompactWithoutCompactor(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	if status, _, e := postCompact(t, srv, "c1", "", compactBody("default", `"x"`)); status != 501 || e.Error.Code != "unsupported" {
		t.Errorf("no compactor: %d %+v, want 501 unsupported", status, e)
	}
	if status, e := call(t, srv, "DELETE", "/v1/conversations/c1", "", nil); status != 501 || e.Error.Code != "unsupported" {
		t.Errorf("DELETE without compactor: %d %+v", status, e)
	}
}

// TestCompactReadsChatCompletionsHistory: an OpenAI Chat Completions
// history is compacted as a client keeps it. Its tool calls, a legacy
// function call, a refusal, a speaker's name and a tool message's
// tool_call_id were refused as unknown fields ("evicted[1].tool_calls"),
// so a client had to strip them and the summary lost them.
func TestCompactReadsChatCompletionsHistory(t *testing.T) {
	comp := &echoCompactor{}
	srv, _ := newTestServer(t, Options{Compaction: compaction.New(compaction.Options{Compactor: comp})})
	body := `{"identity":{"id":"alice"},"session":"s1","evicted":[
		{"role":"user","name":"alice","content":"find hikes near Oslo"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"search","arguments":"{\"q\":\"hikes near Oslo\"}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"3 hits"},
		{"role":"assistant","content":null,"function_call":{"name":"book","arguments":"{\"trail\":\"Vettakollen\"}"}},
		{"role":"assistant","content":null,"refusal":"I cannot book that trail."}]}`
	var got struct {
		Artifact sdk.Message `json:"artifact"`
		Absorbed int         `json:"absorbed"`
	}
	if code := doJSON(t, srv, "POST", "/v1/conversations/c1/compact", "", body, &got); code != 200 || got.Absorbed != 5 {
		t.Fatalf("compact = %d %+v", code, got)
	}
	for _, want := range []string{"user: alice: find hikes near Oslo", `[tool call: search] {"q":"hikes near Oslo"}`, "tool: 3 hits", `[tool call: book] {"trail":"Vettakollen"}`, "[refusal] I cannot book that trail."} {
		if !strings.Contains(got.Artifact.Content, want) {
			t.Errorf("the compactor read %q, missing %q", got.Artifact.Content, want)
		}
	}
}

// TestCompactRefusesCallsOfNothing: a tool call or function call that is
// not an object was compacted as "[tool call]", the summary and watermark
// moved on a call of nothing; it is refused and nothing changes.
func TestCompactRefusesCallsOfNothing(t *testing.T) {
	comp := &echoCompactor{}
	srv, _ := newTestServer(t, Options{Compaction: compaction.New(compaction.Options{Compactor: comp})})
	for field, evicted := range map[string]string{
		"evicted[0].tool_calls[0]": `{"role":"assistant","content":null,"tool_calls":[5]}`,
		"evicted[0].tool_calls[1]": `{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"a","arguments":"{}"}},{"function":7}]}`,
		"evicted[0].function_call": `{"role":"assistant","content":null,"function_call":"book"}`,
	} {
		var e struct {
			Error ErrorDetail `json:"error"`
		}
		code := doJSON(t, srv, "POST", "/v1/conversations/c1/compact", "", `{"identity":{"id":"alice"},"session":"s1","evicted":[`+evicted+`]}`, &e)
		if code != 400 || e.Error.Field != field {
			t.Errorf("%s: %d %+v", evicted, code, e.Error)
		}
	}
	if comp.calls != 0 {
		t.Errorf("the compactor was called %d times", comp.calls)
	}
}
