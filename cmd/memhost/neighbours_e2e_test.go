package main

import (
	"slices"
	"strings"
	"testing"
)

// TestTurnShowsThreadNeighbours, through memhost serve on every provider
// plugin: a conversation where the assistant's reply holds the turn's
// words best. With one entry a turn, the reply is the record shown; the
// user's turn before it (the evidence) and the turns around it arrive
// beside it as its neighbours, marked as such, and another identity's
// turn of the same thread id never does. A later turn of the session does
// not show them again.
func TestTurnShowsThreadNeighbours(t *testing.T) {
	t.Parallel()
	for _, pc := range providerConfigs {
		t.Run(pc.plugin, func(t *testing.T) {
			t.Parallel()
			m := startMemhost(t, providerDeployment(pc.plugin, pc.config)+"coordinator {\n  max_entries = 1\n}\n", envFor(t, pc.env)...)
			turn := func(who, title, body string, seq int) map[string]any {
				return map[string]any{"scope": "identity:" + who, "kind": "fact", "title": title, "body": body,
					"thread": map[string]any{"id": "chat-7", "seq": seq}}
			}
			ids := remember(t, m,
				turn("erin", "user", "We are moving in March.", 0),
				turn("erin", "user", "My sister Joan lives in Lisbon.", 1),
				turn("erin", "assistant", "Lisbon trams are a good way to visit your sister.", 2),
				turn("erin", "user", "Thanks, noted.", 3),
				turn("erin", "user", "Anything else?", 4),
				turn("erin", "user", "Unrelated far turn.", 5),
				turn("frank", "user", "Frank's secret in the same thread id.", 1),
			)
			var first turnAnswer
			if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]any{"id": "erin"}, "session": "s1", "content": "which trams go to Lisbon"}, &first); code != 200 {
				t.Fatalf("turns/inject = %d\n%s", code, m.logs())
			}
			// Two places each side of the reply, in thread order.
			if want := ids[0:5]; !slices.Equal(first.RecordIDs, want) {
				t.Fatalf("injected %v, want %v (the reply %s and its neighbours)\n%s", first.RecordIDs, want, ids[2], first.InjectedContext)
			}
			text := strings.Join(first.InjectedContext, "")
			if n := strings.Count(text, `neighbour_of="`+ids[2]+`"`); n != 4 || !strings.Contains(text, "My sister Joan lives in Lisbon.") {
				t.Fatalf("%d observations marked as the reply's neighbours:\n%s", n, text)
			}
			if strings.Contains(text, "Frank") {
				t.Fatalf("another identity's turn of the same thread id was shown:\n%s", text)
			}
			var again turnAnswer
			if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]any{"id": "erin"}, "session": "s1", "content": "Joan sister March far turn"}, &again); code != 200 {
				t.Fatalf("turns/inject = %d\n%s", code, m.logs())
			}
			if want := ids[5:6]; !slices.Equal(again.RecordIDs, want) {
				t.Fatalf("the session's second turn injected %v, want only %v: the first turn's records are not shown again", again.RecordIDs, want)
			}
		})
	}
}
