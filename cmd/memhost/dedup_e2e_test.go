package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/testbin"
)

// TestDuplicatesAcrossRestart: writes are idempotent by content through
// memhost serve and the real plugin processes, and stay so after a
// restart, when each provider has to find its live contents again (sqlite
// reads them back from its records at open).
func TestDuplicatesAcrossRestart(t *testing.T) {
	t.Parallel()
	for _, pc := range providerConfigs {
		t.Run(pc.plugin, func(t *testing.T) {
			t.Parallel()
			env := envFor(t, pc.env)
			cfgPath, dataDir := writeConfig(t, providerDeployment(pc.plugin, pc.config))
			m, err := startWithConfig(t, cfgPath, dataDir, env...)
			if err != nil {
				t.Fatal(err)
			}
			coffee := map[string]any{"scope": "identity:alice", "kind": "preference", "title": "Coffee order", "body": "Alice drinks her espresso without sugar."}
			id := remember(t, m, coffee)[0]
			if again := remember(t, m, coffee)[0]; again != id {
				t.Fatalf("duplicate write answered %s, want %s", again, id)
			}
			m.stop()
			if m, err = startWithConfig(t, cfgPath, dataDir, env...); err != nil {
				t.Fatal(err)
			}
			if again := remember(t, m, coffee)[0]; again != id {
				t.Fatalf("duplicate write after a restart answered %s, want %s", again, id)
			}
			bob := map[string]any{"scope": "identity:bob", "kind": "preference", "title": coffee["title"], "body": coffee["body"]}
			if other := remember(t, m, bob)[0]; other == id {
				t.Fatalf("the same content in another scope answered %s, alice's record", other)
			}
			if code := m.do("DELETE", "/v1/records/"+id, nil, nil); code != 204 {
				t.Fatalf("DELETE = %d\n%s", code, m.logs())
			}
			if fresh := remember(t, m, coffee)[0]; fresh == id {
				t.Fatalf("the content of a deleted record answered the deleted id %s", id)
			}
		})
	}
}

// TestDuplicateWithNewTagsSaysSo: remembering stored content again with
// tags it lacks answers the existing id and names the tags not added,
// through the API and the CLI; tags it has (in any case) are no news.
// The CLI's --body - drops the one line end standard input adds.
func TestDuplicateWithNewTagsSaysSo(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	rec := func(tags ...string) map[string]any {
		return map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Deploys", "body": "Deploys go out on Tuesdays.", "tags": tags}
	}
	type answer struct {
		IDs          []string `json:"ids"`
		TagsNotAdded []struct {
			Index int      `json:"index"`
			ID    string   `json:"id"`
			Tags  []string `json:"tags"`
		} `json:"tags_not_added"`
	}
	var first, same, more answer
	if code := m.do("POST", "/v1/records", map[string]any{"records": []any{rec("ops")}}, &first); code != 200 || len(first.TagsNotAdded) != 0 {
		t.Fatalf("first write = %d %+v", code, first)
	}
	if code := m.do("POST", "/v1/records", map[string]any{"records": []any{rec("OPS")}}, &same); code != 200 || same.IDs[0] != first.IDs[0] || len(same.TagsNotAdded) != 0 {
		t.Fatalf("duplicate with the same tag = %d %+v", code, same)
	}
	other := map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Other", "body": "new", "tags": []string{"x"}}
	if code := m.do("POST", "/v1/records", map[string]any{"records": []any{other, rec("ops", "weekly")}}, &more); code != 200 || more.IDs[1] != first.IDs[0] ||
		len(more.TagsNotAdded) != 1 || more.TagsNotAdded[0].Index != 1 || more.TagsNotAdded[0].ID != first.IDs[0] || !slices.Equal(more.TagsNotAdded[0].Tags, []string{"weekly"}) {
		t.Fatalf("duplicate with a new tag = %d %+v", code, more)
	}

	cmd := testbin.Command(testbin.Build(t, "./cmd/memhost"), append([]string{"remember", "--scope", "identity:alice", "--title", "Deploys", "--tag", "friday", "--body", "-"}, cliAddr(m)...)...)
	cmd.Stdin = strings.NewReader("Deploys go out on Tuesdays.\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || strings.TrimSpace(string(out)) != first.IDs[0] || !strings.Contains(stderr.String(), "friday not added") {
		t.Fatalf("memhost remember of the duplicate from standard input: %q %v\n%s", out, err, stderr.String())
	}
}

// TestDuplicateWithNewOccurredAtSaysSo: remembering stored content again
// with another occurred_at answers the existing id and says the stored
// time was kept (it was dropped in silence); the same instant written in
// another offset, or a first write at the epoch (stored as the
// millisecond before it), is no news.
func TestDuplicateWithNewOccurredAtSaysSo(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	rec := func(title, occurred string) map[string]any {
		r := map[string]any{"scope": "identity:alice", "kind": "fact", "title": title, "body": "The concert was loud."}
		if occurred != "" {
			r["occurred_at"] = occurred
		}
		return r
	}
	type answer struct {
		IDs       []string `json:"ids"`
		Unchanged []struct {
			Index      int        `json:"index"`
			ID         string     `json:"id"`
			OccurredAt *time.Time `json:"occurred_at"`
		} `json:"occurred_at_not_changed"`
	}
	write := func(recs ...map[string]any) answer {
		t.Helper()
		var a answer
		if code := m.do("POST", "/v1/records", map[string]any{"records": recs}, &a); code != 200 {
			t.Fatalf("write = %d\n%s", code, m.logs())
		}
		return a
	}
	if a := write(rec("Concert", "2023-05-27T09:00:00Z"), rec("Epoch", "1970-01-01T00:00:00Z"), rec("Undated", "")); len(a.Unchanged) != 0 {
		t.Fatalf("first writes noted %+v", a.Unchanged)
	}
	if a := write(rec("Concert", "2023-05-27T02:00:00-07:00"), rec("Epoch", "1970-01-01T00:00:00Z")); len(a.Unchanged) != 0 {
		t.Fatalf("duplicates of the same instants noted %+v", a.Unchanged)
	}
	a := write(rec("Other", ""), rec("Concert", "2020-01-01T00:00:00Z"), rec("Undated", "2021-06-01T00:00:00Z"))
	stored := time.Date(2023, 5, 27, 9, 0, 0, 0, time.UTC)
	if len(a.Unchanged) != 2 || a.Unchanged[0].Index != 1 || a.Unchanged[0].ID != a.IDs[1] ||
		a.Unchanged[0].OccurredAt == nil || !a.Unchanged[0].OccurredAt.Equal(stored) ||
		a.Unchanged[1].Index != 2 || a.Unchanged[1].OccurredAt != nil {
		t.Fatalf("duplicates with other times noted %+v; want the concert (kept at %v) and the undated record (kept without one)", a.Unchanged, stored)
	}
}
