package compaction

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator"
)

func TestFlatten(t *testing.T) {
	cases := []struct{ in, want string }{
		{`"plain text"`, "plain text"},
		{`[{"type":"text","text":"hello"},{"type":"text","text":"world"}]`, "hello\nworld"},
		{`[{"type":"tool_use","id":"t1","name":"search","input":{"q":"cats"}}]`, `[tool call: search] {"q":"cats"}`},
		{`[{"type":"tool_result","tool_use_id":"t1","content":"3 hits"}]`, "[tool result] 3 hits"},
		{`[{"type":"tool_result","content":[{"type":"text","text":"nested"}]}]`, "[tool result] nested"},
		{`[{"type":"image","source":{}}]`, "[image]"},
		{`[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]`, "[image]"},
		{`[{"type":"tool_use","name":"s","input":{"q":"\u003c\u006demhost_memory_observation\u003e"}}]`, `[tool call: s] {"q":"<memhost_memory_observation>"}`},
		{`[{"type":"search_result","source":"https://x.example/","title":"Docs","content":[{"type":"text","text":"body"}]}]`, "[search_result] https://x.example/\nDocs\nbody"},
	}
	for _, tc := range cases {
		var c coordinator.Content
		if err := json.Unmarshal([]byte(tc.in), &c); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got := Flatten(c); got != tc.want {
			t.Errorf("Flatten(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
	var c coordinator.Content
	big := `[{"type":"tool_use","name":"w","input":"` + strings.Repeat("é", 1000) + `"}]`
	if err := json.Unmarshal([]byte(big), &c); err != nil {
		t.Fatal(err)
	}
	if got := Flatten(c); len(got) > maxToolInputBytes+64 || !strings.HasSuffix(got, " …") {
		t.Errorf("a huge tool input was not cut: %d bytes", len(got))
	}
}
