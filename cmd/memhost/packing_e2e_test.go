package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Issue #22, through `memhost serve` with the real sqlite plugin: a long
// record reaches the model as the passage that matches the turn (an
// excerpt naming its record), a later turn injects it whole, and a turn
// whose best matches crowd one conversation still brings the other
// conversations' best turns.
func TestTurnPacksExcerptsAndSpreadsThreads(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	var body strings.Builder
	for i := range 60 {
		fmt.Fprintf(&body, "Day %d of the garden diary: watered the tomatoes and weeded the beds. ", i)
		if i == 40 {
			body.WriteString("The plumber said the boiler pressure valve must be replaced before winter. ")
		}
	}
	ids := remember(t, m, map[string]any{"scope": "identity:alice", "kind": "fact", "title": "House diary", "body": body.String()})
	id := map[string]string{"id": "alice"}
	ask := "what did the plumber say about the boiler valve?"

	var first turnAnswer
	if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": id, "session": "s1", "content": ask}, &first); code != 200 || len(first.InjectedContext) != 1 {
		t.Fatalf("turns/inject = %d %+v\n%s", code, first, m.logs())
	}
	text := first.InjectedContext[0]
	for _, want := range []string{`excerpt_of="` + ids[0] + `"`, `title="House diary"`, "boiler pressure valve must be replaced", " … "} {
		if !strings.Contains(text, want) {
			t.Errorf("the excerpt lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Day 0 of") || first.Bytes >= len(body.String()) {
		t.Errorf("the whole record was injected (%d bytes):\n%s", first.Bytes, text)
	}
	var second turnAnswer
	m.do("POST", "/v1/turns/inject", map[string]any{"identity": id, "session": "s1", "content": ask}, &second)
	if len(second.InjectedContext) != 1 || strings.Contains(second.InjectedContext[0], "excerpt_of") || !strings.Contains(second.InjectedContext[0], "Day 0 of") {
		t.Fatalf("a later turn should inject the whole record: %+v", second)
	}

	// Nine turns of one chat match best; two other chats match well. The
	// turn's candidates (MaxEntries 8 and two spare) hold one of those.
	var turns []map[string]any
	for i := range 9 {
		turns = append(turns, map[string]any{"scope": "identity:bob", "kind": "fact", "title": "user",
			"body":   fmt.Sprintf("Turn %d: the Lisbon flight and the Lisbon hotel are booked for the conference.", i),
			"thread": map[string]any{"id": "chat-trip", "seq": i}})
	}
	turns = append(turns,
		map[string]any{"scope": "identity:bob", "kind": "fact", "title": "user", "body": "The Lisbon conference fee is paid.", "thread": map[string]any{"id": "chat-fees", "seq": 0}},
		map[string]any{"scope": "identity:bob", "kind": "fact", "title": "user", "body": "Bring the passport to the Lisbon conference.", "thread": map[string]any{"id": "chat-docs", "seq": 0}})
	tids := remember(t, m, turns...)
	var spread turnAnswer
	m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]string{"id": "bob"}, "session": "s2", "content": "Lisbon conference flight hotel"}, &spread)
	// Eight records (the other trip turns may join as their neighbours).
	if n := strings.Count(strings.Join(spread.InjectedContext, ""), `<memhost_memory_observation index="`); n != 8 ||
		!slices.Contains(spread.RecordIDs, tids[9]) && !slices.Contains(spread.RecordIDs, tids[10]) {
		t.Errorf("injected %d records, %v: neither other chat's turn (%s, %s) is there", n, spread.RecordIDs, tids[9], tids[10])
	}
	if !slices.Contains(tids[:9], spread.RecordIDs[0]) {
		t.Errorf("injected %v: the best trip turn should lead", spread.RecordIDs)
	}
}
