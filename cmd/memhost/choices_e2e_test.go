package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestChoiceQuestionRecallsEachChoice, through memhost serve on the sqlite
// plugin: the records about one choice of "Which did I buy first, the dog
// bed or the training pads?" crowd the whole question's top (they hold
// more of its words), so the other choice's record is missing there. A
// question ending in choices is recalled per choice too, and each
// choice's best record reaches the top, on POST /v1/recall and in a
// turn's injection; the same words not asked as a choice stay crowded.
func TestChoiceQuestionRecallsEachChoice(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	var recs []map[string]any
	for i := range 4 {
		// The pads said more often each day, so no two score alike.
		recs = append(recs, map[string]any{"scope": "identity:dana", "kind": "fact", "title": "Luna",
			"body": fmt.Sprintf("Day %d of potty training: the training pads work%s, Luna the dog likes the pads.", i, strings.Repeat(", training pads again", i))})
	}
	recs = append(recs, map[string]any{"scope": "identity:dana", "kind": "fact", "title": "Max", "body": "Max has a new dog bed."})
	// Other memories, so that the question's words are rare ones.
	for i := range 30 {
		recs = append(recs, map[string]any{"scope": "identity:dana", "kind": "fact", "title": "Garden",
			"body": fmt.Sprintf("Note %d on the garden: the tomatoes and the weather.", i)})
	}
	ids := remember(t, m, recs...)
	bed := ids[4]
	who := map[string]string{"id": "dana"}
	recallIDs := func(query string) []string {
		t.Helper()
		return recallWith(t, m, map[string]any{"identity": who, "query": query, "limit": 3}).ids()
	}
	if got := recallIDs("Which did I buy first the dog bed or the training pads"); slices.Contains(got, bed) {
		t.Fatalf("not asked as a choice, the top 3 %v already hold the dog bed %s: the records do not crowd", got, bed)
	}
	const question = "Which did I buy first, the dog bed or the training pads?"
	got := recallIDs(question)
	if len(got) != 3 || !slices.Contains(got, bed) || !slices.ContainsFunc(got, func(id string) bool { return slices.Contains(ids[:4], id) }) {
		t.Fatalf("the top 3 %v should hold the dog bed %s and a training pads record %v", got, bed, ids[:4])
	}
	var turn struct {
		RecordIDs []string `json:"record_ids"`
	}
	if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": who, "session": "s1", "content": question}, &turn); code != 200 || !slices.Contains(turn.RecordIDs, bed) {
		t.Fatalf("turns/inject = %d, injected %v without the dog bed %s\n%s", code, turn.RecordIDs, bed, m.logs())
	}
}
