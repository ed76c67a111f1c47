package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestBuildKeepsTheConfiguredBudget: build_budget_bytes is accepted from
// just above the index's 8 KiB, and the protocol and the header come on
// top of the index. Through `memhost serve` with the real sqlite plugin,
// a build whose index fills its 8 KiB stays within the configured budget
// and still lists records.
func TestBuildKeepsTheConfiguredBudget(t *testing.T) {
	t.Parallel()
	const budget = 8<<10 + 1
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+fmt.Sprintf("coordinator {\n  build_budget_bytes = %d\n}\n", budget))
	var recs []map[string]any
	for i := range 40 {
		for _, scope := range []string{"identity:alice", "realm"} {
			recs = append(recs, map[string]any{"scope": scope, "kind": "fact",
				"title":       fmt.Sprintf("%s note %02d %s", scope, i, strings.Repeat("word ", 20)),
				"description": strings.Repeat("describing ", 10), "body": "tea body"})
		}
	}
	remember(t, m, recs...)
	for _, query := range []string{"", "tea"} {
		var out struct {
			Injection *string  `json:"injection"`
			RecordIDs []string `json:"record_ids"`
		}
		if code := m.do("POST", "/v1/builds/inject", map[string]any{"identity": map[string]string{"id": "alice"}, "query_text": query}, &out); code != 200 || out.Injection == nil {
			t.Fatalf("builds/inject = %d %+v\n%s", code, out, m.logs())
		}
		if n := len(*out.Injection); n > budget {
			t.Fatalf("query %q: a build of %d bytes, over build_budget_bytes = %d", query, n, budget)
		}
		if !strings.Contains(*out.Injection, "Memory index") || !strings.Contains(*out.Injection, "- r") {
			t.Fatalf("query %q: the build lists no record:\n%.600s", query, *out.Injection)
		}
	}
}

// TestExcerptDedupAcrossRestartAndIdentities: a session that was shown an
// excerpt of a record is shown it whole by a later turn, after a host
// restart too, and then never again; another identity that uses the same
// session key has its own dedup state and is shown the excerpt.
func TestExcerptDedupAcrossRestartAndIdentities(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	var body strings.Builder
	for i := range 60 {
		fmt.Fprintf(&body, "Day %d of the garden diary: watered the tomatoes and weeded the beds. ", i)
		if i == 40 {
			body.WriteString("The plumber said the boiler pressure valve must be replaced before winter. ")
		}
	}
	ids := remember(t, m, map[string]any{"scope": "realm", "kind": "fact", "title": "House diary", "body": body.String()})
	ask := "what did the plumber say about the boiler valve?"
	turn := func(who string) turnAnswer {
		t.Helper()
		var out turnAnswer
		if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]string{"id": who}, "session": "shared-key", "content": ask}, &out); code != 200 {
			t.Fatalf("turns/inject as %s = %d\n%s", who, code, m.logs())
		}
		return out
	}
	excerpt := func(who string, a turnAnswer) {
		t.Helper()
		if len(a.InjectedContext) != 1 || !strings.Contains(a.InjectedContext[0], `excerpt_of="`+ids[0]+`"`) {
			t.Fatalf("%s: want an excerpt of %s, got %+v", who, ids[0], a)
		}
	}
	excerpt("alice's first turn", turn("alice"))
	m.stop()
	if m, err = startWithConfig(t, cfgPath, dataDir); err != nil {
		t.Fatal(err)
	}
	whole := turn("alice")
	if len(whole.InjectedContext) != 1 || strings.Contains(whole.InjectedContext[0], "excerpt_of") || !strings.Contains(whole.InjectedContext[0], "Day 0 of") {
		t.Fatalf("alice's turn after the restart should inject the record whole: %+v", whole)
	}
	if again := turn("alice"); again.SkipReason == nil || len(again.RecordIDs) != 0 {
		t.Fatalf("alice's session injected the record a third time: %+v", again)
	}
	excerpt("bob, with alice's session key", turn("bob"))
}
