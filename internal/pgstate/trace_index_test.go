package pgstate

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/pgtest"
)

// TestSharedTracesForgetReadsOnlyTheTracesNamingIt: a forget, and a
// record's history, read the traces that name the record and no other
// (they read every trace of the realm). A trace of another shape, which
// a read of it would fail on, shows which were read.
func TestSharedTracesForgetReadsOnlyTheTracesNamingIt(t *testing.T) {
	ctx := context.Background()
	db := open(t, 1)[0]
	tr := NewTraces(db)
	if err := tr.Append(ctx, []coordinator.TurnTrace{{Realm: "r", Identity: "alice", Session: "s", Kind: coordinator.TraceInject, At: time.Now().UTC(),
		Included: []coordinator.TraceRecord{{ID: "gone", Title: "the secret"}}, Excluded: []coordinator.TraceRecord{}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.pool.Exec(ctx, db.q(`INSERT INTO turn_trace (realm, identity, session, at_ms, bytes, trace) VALUES ('r', 'alice', 's', 0, 0, '{"included": {"id": "x"}, "excluded": {"id": "y"}}')`)); err != nil {
		t.Fatal(err)
	}
	if err := tr.Forget(ctx, "r", []string{"gone"}); err != nil {
		t.Fatalf("forget: %v", err)
	}
	if got, err := tr.Record(ctx, "r", nil, "gone", 10); err != nil || len(got) != 1 || !got[0].Included[0].Forgotten {
		t.Fatalf("the record's history = %+v, %v", got, err)
	}
}

// TestMigrationIndexesTraces: traces written before the record index are
// indexed when the schema migrates, so a forget still finds them.
func TestMigrationIndexesTraces(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Shared(t).NewDatabase(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	before := slices.IndexFunc(migrations, func(m string) bool { return strings.Contains(m, "turn_trace_by_record") })
	if before < 0 {
		t.Fatal("no migration indexes the traces by record")
	}
	old := coordinator.TurnTrace{Realm: "r", Identity: "alice", Session: "s", Kind: coordinator.TraceInject, At: time.Now().UTC(),
		Included: []coordinator.TraceRecord{{ID: "gone", Title: "the secret"}, {ID: "kept", Title: "kept"}},
		Excluded: []coordinator.TraceRecord{{ID: "left", Title: "left out", Reason: coordinator.ExcludedBudget}}}
	body, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	setup := []string{
		`CREATE SCHEMA ` + DefaultSchema,
		`CREATE TABLE ` + DefaultSchema + `.state_migrations (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`,
		`SET search_path TO ` + DefaultSchema,
	}
	setup = append(setup, migrations[:before]...)
	setup = append(setup,
		`INSERT INTO state_migrations (version) SELECT generate_series(1, `+strconv.Itoa(before)+`)`,
		`INSERT INTO turn_trace (realm, identity, session, at_ms, bytes, trace) VALUES ('r', 'alice', 's', 0, 0, '`+string(body)+`')`,
		`RESET search_path`,
	)
	for _, stmt := range setup {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	db, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tr := NewTraces(db)
	if err := tr.Forget(ctx, "r", []string{"gone", "left"}); err != nil {
		t.Fatal(err)
	}
	got, err := tr.Record(ctx, "r", nil, "kept", 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("the old trace by a record it injected: %d traces, %v", len(got), err)
	}
	if r := got[0].Included[0]; r.Title != "" || !r.Forgotten {
		t.Errorf("the old trace's forgotten row is %+v", r)
	}
	if r := got[0].Excluded[0]; r.Title != "" || !r.Forgotten {
		t.Errorf("the old trace's forgotten left-out row is %+v", r)
	}
}

// TestTracesOfAnEarlierHostAreForgotten: a host of the version before the
// records column, still running in a rolling upgrade, writes its traces
// with its own INSERT, which leaves the column empty; they must still be
// found by a forget and by the record's history.
func TestTracesOfAnEarlierHostAreForgotten(t *testing.T) {
	ctx := context.Background()
	db := open(t, 1)[0]
	tr := NewTraces(db)
	old := coordinator.TurnTrace{Realm: "r", Identity: "alice", Session: "s", Kind: coordinator.TraceInject, At: time.Now().UTC(),
		Included: []coordinator.TraceRecord{{ID: "gone", Title: "the secret"}}, Excluded: []coordinator.TraceRecord{}}
	body, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	// The earlier version's statement, without the records column.
	if _, err := db.pool.Exec(ctx, db.q(`INSERT INTO turn_trace (realm, identity, session, at_ms, bytes, trace) VALUES ($1, $2, $3, $4, $5, $6)`),
		old.Realm, old.Identity, old.Session, old.At.UnixMilli(), 0, string(body)); err != nil {
		t.Fatal(err)
	}
	if rec, err := tr.Record(ctx, "r", nil, "gone", 10); err != nil || len(rec) != 1 {
		t.Fatalf("the record's history: %d traces (%v), want the earlier host's one", len(rec), err)
	}
	if err := tr.Forget(ctx, "r", []string{"gone"}); err != nil {
		t.Fatal(err)
	}
	got, err := tr.Session(ctx, "r", nil, "s", 10)
	if err != nil || len(got) != 1 {
		t.Fatalf("the session's traces: %d (%v)", len(got), err)
	}
	if r := got[0].Included[0]; r.Title != "" || !r.Forgotten {
		t.Errorf("after the record was forgotten, the earlier host's trace still shows %+v", r)
	}
}
