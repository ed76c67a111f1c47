package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
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

// TestTurnBesideACrowdedPlace, through memhost serve on every provider
// plugin: a place of a shared thread crowded past sdk.MaxPlaceReads (a
// flood by anyone who may write to the scope) shows beside a turn only
// from its first 16 records by id, in byte order: of the 19 there, the
// 5 live ones are flood-O, -Q, -S (among the first 16) and flood-p, -r
// (past them); the first three are shown, and flood-p, which the cap of 4
// a place would show were the whole place read, is not. Ids alternating
// case make a store that orders by a case-folding collation show others
// (its first 16 would hold flood-O and flood-p).
func TestTurnBesideACrowdedPlace(t *testing.T) {
	t.Parallel()
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	for _, pc := range providerConfigs {
		t.Run(pc.plugin, func(t *testing.T) {
			t.Parallel()
			m := startMemhost(t, providerDeployment(pc.plugin, pc.config)+"coordinator {\n  max_entries = 1\n}\n", envFor(t, pc.env)...)
			// Imported, as only an import chooses ids.
			now := time.Now().UTC().Format(time.RFC3339)
			turn := func(id, body string, seq int) map[string]any {
				return map[string]any{"id": id, "scope": "realm", "kind": "fact", "title": "turn", "body": body,
					"status": "active", "trust": "agent_observed", "created_at": now, "updated_at": now,
					"thread": map[string]any{"id": "shared-chat", "seq": seq}}
			}
			recs := []map[string]any{turn("reply", "The pottery class moved to Thursday evenings.", 2), turn("after", "Thanks for telling me.", 3)}
			for i := range sdk.MaxPlaceReads + 3 {
				letter := rune('a' + i)
				if i%2 == 0 {
					letter = rune('A' + i)
				}
				r := turn(fmt.Sprintf("flood-%c", letter), fmt.Sprintf("flood line %d", i), 1)
				if i < sdk.MaxPlaceReads-2 {
					r["expires_at"] = past
				}
				recs = append(recs, r)
			}
			var imported struct{ Imported int }
			if code := m.do("POST", "/v1/import", map[string]any{"records": recs}, &imported); code != 200 || imported.Imported != len(recs) {
				t.Fatalf("POST /v1/import = %d, imported %d of %d\n%s", code, imported.Imported, len(recs), m.logs())
			}
			var got turnAnswer
			if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]any{"id": "erin"}, "session": "s1", "content": "when is the pottery class"}, &got); code != 200 {
				t.Fatalf("turns/inject = %d\n%s", code, m.logs())
			}
			// By bytes, the crowd's first 16 are A C E G I K M O Q S b d f h j l.
			if want := []string{"flood-O", "flood-Q", "flood-S", "reply", "after"}; !slices.Equal(got.RecordIDs, want) {
				t.Fatalf("injected %v, want %v: beside the reply, only the live ones among the crowded place's first %d by id\n%s",
					got.RecordIDs, want, sdk.MaxPlaceReads, got.InjectedContext)
			}
		})
	}
}
