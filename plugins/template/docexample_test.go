package template

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestAPIDocCompactionExample renders the evicted messages of docs/api.md's
// compaction example as the host hands them over: every summary line the
// page shows (all but its elisions) must be one this plugin writes, so the
// example does not drift from the default compactor's headings.
func TestAPIDocCompactionExample(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	m1 := regexp.MustCompile("(?s)POST /v1/conversations/\\S+/compact\n.*?\n\n200 (\\{.*?\\})\n```").FindSubmatch(doc)
	if m1 == nil {
		t.Fatal("docs/api.md has no compaction example")
	}
	var answer struct {
		Artifact struct{ Content string } `json:"artifact"`
	}
	if err := json.Unmarshal(m1[1], &answer); err != nil {
		t.Fatalf("the example's answer is not JSON: %v", err)
	}
	m2 := regexp.MustCompile("(?s)<memhost_conversation_summary>\n(.*?)\n</memhost_conversation_summary>").FindStringSubmatch(answer.Artifact.Content)
	if m2 == nil {
		t.Fatal("the example's artifact holds no summary")
	}
	got := Render(cfg(4096), 4096, nil, []sdk.Message{
		m("user", "Always reply in French."),
		m("assistant", `[tool call: search] {"q":"x"}`),
		m("tool", "3 hits"),
	})
	lines := strings.Split(got, "\n")
	for _, want := range strings.Split(m2[1], "\n") {
		if want != "…" && !slices.Contains(lines, want) {
			t.Errorf("docs/api.md shows the summary line %q; the template compactor writes:\n%s", want, got)
		}
	}
}
