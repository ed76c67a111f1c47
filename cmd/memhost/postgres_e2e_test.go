package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/internal/pgtest"
)

// TestPostgresRealm serves one realm from the postgres provider beside a
// default realm on sqlite: records written to it through HTTP land in
// PostgreSQL (read back with SQL), are recalled and fetched through HTTP,
// and are gone from PostgreSQL once forgotten.
func TestPostgresRealm(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Shared(t).NewDatabase(t)
	m := startMemhost(t, `
provider "main" {
  plugin = "sqlite"
  config = { path = "memory.db" }
}
provider "shared" {
  plugin = "postgres"
  config = { dsn_env = "TEAM_PG_DSN", schema = "team_memory", pool_size = 2, statement_timeout = "5s" }
}
realm "default" { provider = "main" }
realm "team"    { provider = "shared" }
`, "TEAM_PG_DSN="+dsn)
	var out struct {
		IDs []string `json:"ids"`
	}
	if code := m.do("POST", "/v1/records", map[string]any{"realm": "team", "records": []map[string]any{{
		"scope": "realm", "kind": "procedure", "title": "Release train",
		"body": "Every Thursday the release train leaves at noon.", "tags": []string{"ops"},
	}}}, &out); code != 200 || len(out.IDs) != 1 {
		t.Fatalf("POST /v1/records in realm team = %d %v\n%s", code, out, m.logs())
	}
	id := out.IDs[0]

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	stored := func() (title string, n int) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT coalesce(max(title), ''), count(*) FROM team_memory.records WHERE realm = 'team' AND id = $1`, id).Scan(&title, &n); err != nil {
			t.Fatal(err)
		}
		return title, n
	}
	if title, n := stored(); n != 1 || title != "Release train" {
		t.Fatalf("PostgreSQL holds %d rows (%q) for record %s, want the one written", n, title, id)
	}

	var hits recallAnswer
	if code := m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"realm": "team", "id": "alice"}, "query": "when does the release train leave"}, &hits); code != 200 {
		t.Fatalf("recall in realm team = %d\n%s", code, m.logs())
	}
	if len(hits.Hits) != 1 || hits.Hits[0].Record.ID != id || hits.Hits[0].Score <= 0 {
		t.Fatalf("recall in realm team = %+v, want record %s with a positive score", hits, id)
	}
	// The default realm is another store: it does not see the team's record.
	if other := recall(t, m, "alice", "release train"); len(other.Hits) != 0 {
		t.Fatalf("the default realm recalled the team realm's record: %+v", other)
	}
	var rec map[string]any
	if code := m.do("GET", "/v1/records/"+id+"?realm=team", nil, &rec); code != 200 || rec["title"] != "Release train" {
		t.Fatalf("GET record in realm team = %d %v", code, rec)
	}
	if code := m.do("DELETE", "/v1/records/"+id+"?realm=team", nil, nil); code != 204 {
		t.Fatalf("DELETE in realm team = %d\n%s", code, m.logs())
	}
	if _, n := stored(); n != 0 {
		t.Fatalf("record %s still in PostgreSQL after DELETE", id)
	}
	if code := m.do("GET", "/v1/records/"+id+"?realm=team", nil, nil); code != 404 {
		t.Fatalf("GET after DELETE = %d, want 404", code)
	}
}
