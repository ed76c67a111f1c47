package postgres

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/sdk"
)

// TestDuplicateOfACopyForgottenMeanwhile: a host writes a record whose
// content is live, and another host forgets that copy between the
// write's insert (which found it) and its read of it. The write stores
// the record anew; it used to fail with "no rows in result set".
func TestDuplicateOfACopyForgottenMeanwhile(t *testing.T) {
	schema := schemaFor(t, t.Name())
	a := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	b := openStoreWith(t, configJSON(schema, "replica", sqlOnly))
	ctx := context.Background()
	dup := note("kingfisher", "a flash of blue over the brook")
	orig, err := a.Remember(ctx, realm, []sdk.Record{dup})
	if err != nil {
		t.Fatal(err)
	}
	// A second record inserted after the duplicate in the write's batch
	// (records go in content order), whose id another transaction holds
	// uncommitted: the write waits there, past its duplicate's insert.
	hash := func(r sdk.Record) string {
		p, err := prepareRecord(realm, r, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return p.rec.ContentHash
	}
	var later sdk.Record
	for i := 0; ; i++ {
		later = note(fmt.Sprintf("heron %d", i), "standing still")
		if hash(later) > hash(dup) {
			break
		}
	}
	later.ID = "held"
	conn, err := pgx.Connect(ctx, testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	holder, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `INSERT INTO `+schema+`.records OVERRIDING SYSTEM VALUE
		SELECT * FROM jsonb_populate_record(null::`+schema+`.records, (SELECT to_jsonb(r) || jsonb_build_object('id', 'held', 'content_hash', 'held', 'seq', 1000000000)
		FROM `+schema+`.records AS r WHERE id = $1))`, orig[0]); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	go func() {
		_, err := b.Remember(ctx, realm, []sdk.Record{dup, later})
		wrote <- err
	}()
	// The write waits on "held": the holder's backend blocks it.
	for blocked := 0; blocked == 0; time.Sleep(10 * time.Millisecond) {
		select {
		case err := <-wrote:
			t.Fatalf("the write ended (%v) before it waited on the held id", err)
		default:
		}
		if err := a.pool.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))", conn.PgConn().PID()).Scan(&blocked); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Forget(ctx, realm, orig); err != nil {
		t.Fatal(err)
	}
	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-wrote; err != nil {
		t.Fatalf("the write of a copy forgotten meanwhile: %v", err)
	}
	hits, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "kingfisher"})
	if err != nil || len(hits) != 1 {
		t.Fatalf("recall of the record written anew: %v, %v", hits, err)
	}
}
