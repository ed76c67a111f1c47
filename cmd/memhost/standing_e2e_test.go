package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestStandingInstructionSurvivesCompactions: through memhost serve and
// the template plugin, a conversation whose first slice says "always
// answer in French from now on", compacted three times under max_bytes =
// 4096 while 80 chatter messages a slice say "important", keeps the
// instruction; a later "stop answering in French" retires it.
func TestStandingInstructionSurvivesCompactions(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, markdownConfig+`
compactor "summary" {
  plugin = "template"
  config = { max_bytes = 4096 }
}
coordinator { compactor = "summary" }
`)
	history := []map[string]any{
		{"role": "user", "content": "Hi! Always answer in French from now on."},
		{"role": "assistant", "content": "D'accord, je répondrai en français."},
	}
	for slice := range 3 {
		for i := range 80 {
			history = append(history, map[string]any{"role": "user", "content": fmt.Sprintf("this is important: slice %d, chatter %d about the build and lunch", slice, i)})
		}
		code, ans, e := compact(t, m, "conv-fr", "", history)
		if code != 200 || ans.Compacted != 80+2*btoi(slice == 0) {
			t.Fatalf("compaction %d = %d %+v %+v", slice+1, code, ans, e)
		}
		if !strings.Contains(ans.Artifact.Content, "Always answer in French from now on.") {
			t.Fatalf("compaction %d lost the standing instruction:\n%s", slice+1, ans.Artifact.Content)
		}
	}
	history = append(history, map[string]any{"role": "user", "content": "Please stop answering in French."})
	code, ans, e := compact(t, m, "conv-fr", "", history)
	if code != 200 || ans.Compacted != 1 {
		t.Fatalf("fourth compaction = %d %+v %+v", code, ans, e)
	}
	if strings.Contains(ans.Artifact.Content, "in French from now on") {
		t.Fatalf("the retired instruction still stands:\n%s", ans.Artifact.Content)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
