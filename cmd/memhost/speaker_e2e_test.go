package main

import (
	"fmt"
	"slices"
	"testing"

	"github.com/memhost/memhost/coordinator/speaker"
)

// TestUserTurnsRankFirst, through memhost serve on the sqlite plugin: in a
// conversation whose assistant answers repeat a question's words, the
// user's own turn that holds the fact sits below them. Tagged with its
// speaker, the user's turn reaches the top of a question about the user,
// on POST /v1/recall; a question about what the assistant said, and the
// same turns without speakers' tags, keep the plain order.
func TestUserTurnsRankFirst(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	turns := []struct{ role, body string }{
		{"user", "Can you help me plan my running week?"},
		{"assistant", "A long Saturday morning jog builds endurance. Jog slowly on Saturday morning, and jog long only once a week."},
		{"user", "I jogged for 30 minutes on Saturday morning."},
		{"assistant", "On a Saturday morning jog, how long you jog matters less than how often you jog."},
		{"assistant", "Saturday morning is a good time for a long jog before the day warms up."},
	}
	write := func(identity string, tagged bool) []string {
		var ts []conversationTurn
		for _, tn := range turns {
			ct := conversationTurn{title: tn.role, body: tn.body}
			if tagged {
				ct.tags = speaker.Tags(tn.role)
			}
			ts = append(ts, ct)
		}
		return rememberConversation(t, m, identity, ts)
	}
	top := func(identity, query string) []string {
		t.Helper()
		return recallWith(t, m, map[string]any{"identity": map[string]string{"id": identity}, "query": query, "limit": 2}).ids()
	}
	plain, tagged := write("plain", false), write("tagged", true)
	const question = "How long did I jog on Saturday morning?"
	if got := top("plain", question); len(got) != 2 || slices.Contains(got, plain[2]) {
		t.Fatalf("without speakers' tags the top 2 %v should be the assistant's answers, not the user's turn %s", got, plain[2])
	}
	if got := top("tagged", question); len(got) != 2 || got[0] != tagged[2] {
		t.Fatalf("with speakers' tags the top 2 %v should start with the user's turn %s", got, tagged[2])
	}
	if got := top("tagged", "What did you say about how long to jog on Saturday morning?"); slices.Contains(got, tagged[2]) {
		t.Fatalf("a question about what the assistant said ranked the user's turn in its top 2 %v", got)
	}
}

// TestSystemTagsAreNotText: through memhost serve on sqlite, a turn tagged
// memhost:user is not found by the tag's words, while the tag still
// filters; an ordinary tag's words still find its record.
func TestSystemTagsAreNotText(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	ids := remember(t, m,
		map[string]any{"scope": "identity:ann", "kind": "episode", "title": "Turn", "body": "I bought coffee beans.",
			"tags": []string{"memhost:user"}, "thread": map[string]any{"id": "c1", "seq": 0}},
		map[string]any{"scope": "identity:ann", "kind": "fact", "title": "Note", "body": "Roast on Fridays.",
			"tags": []string{"team:user"}})
	recall := func(query string, tags ...string) []string {
		t.Helper()
		body := map[string]any{"identity": map[string]string{"id": "ann"}, "query": query}
		if len(tags) > 0 {
			body["tags"] = tags
		}
		return recallWith(t, m, body).ids()
	}
	if got := recall("memhost user"); !slices.Equal(got, ids[1:]) {
		t.Errorf(`recall "memhost user" = %v, want only the team:user note %v`, got, ids[1:])
	}
	if got := recall("coffee", "MEMHOST:User"); !slices.Equal(got, ids[:1]) {
		t.Errorf(`recall "coffee" with tag MEMHOST:User = %v, want the turn %v`, got, ids[:1])
	}
}

// TestNamedSpeakerTurnsRankFirst, through memhost serve on the sqlite
// plugin: in a conversation between two people, the other's replies
// repeat a question's words while the named speaker's own turn holds the
// fact, below them. Tagged with their speakers' names, the named
// speaker's turn reaches the top of a question naming her (a speaker is
// known from the turns the recall answers: here all three); a question
// naming both, and the same turns without tags, keep the plain order.
func TestNamedSpeakerTurnsRankFirst(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	turns := []struct{ name, body string }{
		{"Melanie", "Your painting of the lake at sunset is lovely! A lake painting at sunset is hard to get right."},
		{"Caroline", "Thanks! I painted the lake last week."},
		{"Melanie", "Painting a lake at sunset takes patience; my lake painting never looks like the lake."},
	}
	write := func(identity string, tagged bool) []string {
		var ts []conversationTurn
		for _, tn := range turns {
			ct := conversationTurn{title: tn.name, body: tn.body}
			if tagged {
				ct.tags = []string{speaker.NameTag(tn.name)}
			}
			ts = append(ts, ct)
		}
		return rememberConversation(t, m, identity, ts)
	}
	top := func(identity, query string) []string {
		t.Helper()
		return recallWith(t, m, map[string]any{"identity": map[string]string{"id": identity}, "query": query, "limit": 3}).ids()
	}
	plain, tagged := write("plain", false), write("tagged", true)
	const question = "When did Caroline paint the lake at sunset?"
	if got := top("plain", question); len(got) != 3 || got[2] != plain[1] {
		t.Fatalf("without speakers' tags the top 3 %v should end with Caroline's turn %s", got, plain[1])
	}
	if got := top("tagged", question); len(got) != 3 || got[0] != tagged[1] {
		t.Fatalf("with speakers' tags the top 3 %v should start with Caroline's turn %s", got, tagged[1])
	}
	if got := top("tagged", "When did Caroline and Melanie paint the lake at sunset?"); len(got) != 3 || got[2] != tagged[1] {
		t.Fatalf("a question naming both speakers should keep Caroline's turn last in its top 3 %v", got)
	}
}

// conversationTurn is a turn rememberConversation writes.
type conversationTurn struct {
	title, body string
	tags        []string
}

// rememberConversation remembers turns as one thread of identity's scope,
// beside 30 notes on another subject (so a question's words are rare
// ones), and answers the turns' ids in order.
func rememberConversation(t *testing.T, m *instance, identity string, turns []conversationTurn) []string {
	t.Helper()
	var recs []map[string]any
	for i, tn := range turns {
		r := map[string]any{"scope": "identity:" + identity, "kind": "episode", "title": tn.title, "body": tn.body,
			"thread": map[string]any{"id": "c1", "seq": i}}
		if tn.tags != nil {
			r["tags"] = tn.tags
		}
		recs = append(recs, r)
	}
	for i := range 30 {
		recs = append(recs, map[string]any{"scope": "identity:" + identity, "kind": "fact", "title": "Garden",
			"body": fmt.Sprintf("Note %d on the garden: the tomatoes and the weather.", i)})
	}
	return remember(t, m, recs...)[:len(turns)]
}
