package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestTemporalRecall, through memhost serve on the sqlite plugin: records
// of equal text relevance that happened in different weeks. (The query
// needs a word the records hold: time words only rank what the text
// finds, and "what did I do" is all stopwords.) A query naming
// a day ranks that day's record first, read against the request's now; a
// query naming no time keeps the provider's order (the newest first); the
// since/until filters keep a window; occurred_at is shown in the envelope
// and survives memhost export and import.
func TestTemporalRecall(t *testing.T) {
	t.Parallel()
	deployment := providerDeployment("sqlite", `{ path = "memory.db" }`)
	m := startMemhost(t, deployment)
	const body = "I did a long hike in the hills with Sam."
	rec := func(title, occurred string) map[string]any {
		r := map[string]any{"scope": "identity:alice", "kind": "fact", "title": title, "body": body}
		if occurred != "" {
			r["occurred_at"] = occurred
		}
		return r
	}
	// The week's record is written first, so the provider's tie-break
	// (newest first) ranks it last.
	ids := remember(t, m,
		rec("Outing alpha", "2023-05-27T09:00:00Z"),   // Saturday
		rec("Outing bravo", "2023-05-20T09:00:00Z"),   // the Saturday before
		rec("Outing charlie", "2023-05-13T09:00:00Z"), // two before
		rec("Outing delta", ""),                       // unknown: judged by created_at, today
	)
	alpha, bravo, charlie, delta := ids[0], ids[1], ids[2], ids[3]
	who := map[string]string{"id": "alice"}
	recallIDs := func(q map[string]any) []string {
		t.Helper()
		q["identity"] = who
		return recallWith(t, m, q).ids()
	}

	if got := recallIDs(map[string]any{"query": "which hike did I do"}); len(got) != 4 || got[0] == alpha {
		t.Fatalf("a query without time answered %v; want all four, the provider's newest first (not %s)", got, alpha)
	}
	tuesday := "2023-05-30T10:00:00Z"
	if got := recallIDs(map[string]any{"query": "which hike did I do last Saturday", "now": tuesday}); len(got) != 4 || got[0] != alpha {
		t.Fatalf("last Saturday, asked on %s: %v; want %s (Saturday the 27th) first of four", tuesday, got, alpha)
	}
	if got := recallIDs(map[string]any{"query": "which hike did I do last Saturday", "now": "2023-05-23T10:00:00-07:00"}); len(got) != 4 || got[0] != bravo {
		t.Fatalf("last Saturday, asked a week earlier: %v; want %s (the 20th) first", got, bravo)
	}
	if got := recallIDs(map[string]any{"query": "which hike did I do two weeks ago", "now": tuesday}); got[0] != charlie && got[0] != bravo {
		t.Fatalf("two weeks ago: %v; want the 13th-20th (%s or %s) first", got, bravo, charlie)
	}

	for _, tc := range []struct {
		since, until string
		want         []string
	}{
		{"2023-05-14T00:00:00Z", "2023-05-21T00:00:00Z", []string{bravo}},
		{"", "2023-05-14T00:00:00Z", []string{charlie}},
		{"2023-05-21T00:00:00Z", "", []string{alpha, delta}},
		{"2023-05-27T09:00:00Z", "2023-05-27T09:00:00.001Z", []string{alpha}},
	} {
		q := map[string]any{"query": "hike with Sam"}
		if tc.since != "" {
			q["since"] = tc.since
		}
		if tc.until != "" {
			q["until"] = tc.until
		}
		got := recallIDs(q)
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("since %q until %q: %v, want %v", tc.since, tc.until, got, want)
		}
	}
	var bad map[string]any
	if code := m.do("POST", "/v1/recall", map[string]any{"identity": who, "query": "hike", "since": "2023-05-21T00:00:00Z", "until": "2023-05-21T00:00:00Z"}, &bad); code != 400 {
		t.Fatalf("an empty window = %d %v; want 400", code, bad)
	}

	// Inject: the same ranking, and the envelope says when it happened.
	var turn turnAnswer
	if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": who, "content": "which hike did I do last Saturday", "now": tuesday}, &turn); code != 200 {
		t.Fatalf("turns/inject = %d\n%s", code, m.logs())
	}
	if len(turn.RecordIDs) == 0 || turn.RecordIDs[0] != alpha {
		t.Fatalf("inject of last Saturday answered %v; want %s first", turn.RecordIDs, alpha)
	}
	if text := strings.Join(turn.InjectedContext, ""); !strings.Contains(text, `occurred="Sat 2023-05-27 09:00 UTC"`) {
		t.Fatalf("the envelope does not show when the record happened:\n%s", text)
	}

	// occurred_at survives export and import into a new store.
	dump, err := runCLI(t, nil, append([]string{"export"}, cliAddr(m)...)...)
	if err != nil {
		t.Fatal(err)
	}
	occurred := map[string]time.Time{}
	for line := range strings.Lines(dump) {
		var r sdk.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		occurred[r.ID] = r.OccurredAt
	}
	if want := time.Date(2023, 5, 27, 9, 0, 0, 0, time.UTC); !occurred[alpha].Equal(want) || !occurred[delta].IsZero() {
		t.Fatalf("exported occurred_at: %v; want %s at %v and none on %s", occurred, alpha, want, delta)
	}
	file := filepath.Join(t.TempDir(), "dump.jsonl")
	if err := os.WriteFile(file, []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	n := startMemhost(t, deployment)
	if imp, _ := importCounts(t, append(cliAddr(n), file)...); imp != 4 {
		t.Fatalf("imported %d records, want 4", imp)
	}
	m = n
	if got := recallIDs(map[string]any{"query": "hike with Sam", "since": "2023-05-14T00:00:00Z", "until": "2023-05-21T00:00:00Z"}); !slices.Equal(got, []string{bravo}) {
		t.Fatalf("after import, the window of the 14th-20th holds %v; want %s", got, bravo)
	}
}
