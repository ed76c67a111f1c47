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

// TestDuplicateWithNewExpirySaysSo: from an outside review. Remembering
// stored content again with another expires_at (to give a permanent
// record a time to live, or to extend one) answered the existing id and
// left the stored expiry as it was, in silence: the record expired when
// the client believed it extended, or never. The answer now lists it in
// expires_at_not_changed with the expiry kept, on every provider. The
// same instant in another offset is no news, nor is an expired holder
// the write revives with its expiry.
func TestDuplicateWithNewExpirySaysSo(t *testing.T) {
	t.Parallel()
	soon := time.Now().UTC().Add(time.Hour).Truncate(time.Millisecond)
	later := soon.Add(24 * time.Hour)
	past := time.Now().UTC().Add(-time.Hour).Truncate(time.Millisecond)
	type note struct {
		Index     int        `json:"index"`
		ID        string     `json:"id"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	type answer struct {
		IDs       []string `json:"ids"`
		Unchanged []note   `json:"expires_at_not_changed"`
	}
	for _, pc := range providerConfigs {
		t.Run(pc.plugin, func(t *testing.T) {
			t.Parallel()
			m := startMemhost(t, providerDeployment(pc.plugin, pc.config), envFor(t, pc.env)...)
			rec := func(title string, expires time.Time, offset *time.Location) map[string]any {
				r := map[string]any{"scope": "identity:alice", "kind": "fact", "title": title, "body": "Parking pass " + title}
				if !expires.IsZero() {
					r["expires_at"] = expires.In(offset).Format(time.RFC3339Nano)
				}
				return r
			}
			write := func(recs ...map[string]any) answer {
				t.Helper()
				var a answer
				if code := m.do("POST", "/v1/records", map[string]any{"records": recs}, &a); code != 200 || len(a.IDs) != len(recs) {
					t.Fatalf("write = %d %+v\n%s", code, a, m.logs())
				}
				return a
			}
			east := time.FixedZone("", 14*3600)
			first := write(rec("Dated", soon, time.UTC), rec("Permanent", time.Time{}, time.UTC), rec("Lapsed", past, time.UTC))
			if len(first.Unchanged) != 0 {
				t.Fatalf("first writes noted %+v", first.Unchanged)
			}
			for _, c := range []struct {
				name string
				rec  map[string]any
				want *note // nil: no note
			}{
				{"the same expiry in another offset", rec("Dated", soon, east), nil},
				{"an expiry extended", rec("Dated", later, time.UTC), &note{ID: first.IDs[0], ExpiresAt: &soon}},
				{"an expiry given to a permanent record", rec("Permanent", soon, time.UTC), &note{ID: first.IDs[1]}},
				{"an expired record revived with a new expiry", rec("Lapsed", later, time.UTC), nil},
			} {
				a := write(rec("Other "+c.name, time.Time{}, time.UTC), c.rec)
				switch {
				case c.want == nil && len(a.Unchanged) != 0:
					t.Errorf("%s: noted %+v, want nothing", c.name, a.Unchanged)
				case c.want != nil && (len(a.Unchanged) != 1 || a.Unchanged[0].Index != 1 || a.Unchanged[0].ID != c.want.ID ||
					(a.Unchanged[0].ExpiresAt == nil) != (c.want.ExpiresAt == nil) ||
					(c.want.ExpiresAt != nil && !a.Unchanged[0].ExpiresAt.Equal(*c.want.ExpiresAt))):
					t.Errorf("%s: noted %+v, want index 1, %s, kept expiry %v", c.name, a.Unchanged, c.want.ID, c.want.ExpiresAt)
				}
			}
		})
	}
}
