package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/sdk"
)

// bouncerDSNEnv carries the connection string through the test bouncer.
const bouncerDSNEnv = "MEMHOST_POSTGRES_TEST_BOUNCER_DSN"

// TestThroughPgBouncer runs the provider through a real PgBouncer in
// transaction pooling mode, whose two server connections the stores'
// sixteen share: without transaction_pooling the connection is refused
// (the schema and timeout startup parameters); with it, two stores (two
// hosts) migrate at once, write from many goroutines, recall, forget,
// supersede, export and import, every transaction runs with the
// configured schema and timeout, and the index stays exact.
func TestThroughPgBouncer(t *testing.T) {
	direct := testDSN(t)
	b := pgtest.Shared(t).PgBouncer(t)
	pc, err := pgconn.ParseConfig(direct)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(bouncerDSNEnv, b.DSN(pc.Database))
	schema := schemaFor(t, t.Name())
	cfg := func(extra string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"dsn_env": %q, "schema": %q, "pool_size": 8, "statement_timeout": "4s"%s}`, bouncerDSNEnv, schema, extra))
	}
	ctx := context.Background()

	t.Run("without transaction_pooling", func(t *testing.T) {
		s := New()
		defer s.Close()
		err := s.Configure(ctx, cfg(""))
		if err == nil || !strings.Contains(err.Error(), "unsupported startup parameter") {
			t.Fatalf("Configure through transaction pooling without the key = %v; want PgBouncer's refusal of the startup parameters", err)
		}
	})

	stores := make([]*Store, 2)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range stores {
		stores[i] = New()
		t.Cleanup(func() { stores[i].Close() })
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = stores[i].Configure(ctx, cfg(`, "transaction_pooling": true`))
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("Configure through PgBouncer: %v\n%s", err, b.Log())
		}
	}
	db := rawPool(t, schema) // straight to the server, for checks
	var version int
	if err := db.QueryRow(ctx, "SELECT max(version) FROM schema_migrations").Scan(&version); err != nil || version != schemaVersion {
		t.Fatalf("schema %s after migrating through PgBouncer: version %d, %v; want %d", schema, version, err, schemaVersion)
	}

	// Every transaction carries the settings, whichever server connection
	// it lands on.
	for range 20 {
		err := pgx.BeginTxFunc(ctx, stores[0].pool, readOnly, func(tx pgx.Tx) error {
			var path, timeout, idle string
			if err := tx.QueryRow(ctx, "SELECT current_setting('search_path'), current_setting('statement_timeout'), current_setting('idle_in_transaction_session_timeout')").Scan(&path, &timeout, &idle); err != nil {
				return err
			}
			if path != schema || timeout != "4s" || idle != "4s" {
				return fmt.Errorf("search_path %q, statement_timeout %q, idle_in_transaction_session_timeout %q; want %q, 4s, 4s", path, timeout, idle, schema)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}

	// Concurrent writers on both stores, threaded turns included.
	recs := threadedRecords(rand.New(rand.NewPCG(9, 9)))
	errc := make(chan error, len(recs))
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := stores[w%2]
			for i := w; i < len(recs); i += 8 {
				if _, err := s.Remember(ctx, realm, []sdk.Record{recs[i]}); err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("Remember through PgBouncer: %v", err)
	}
	checkIndex(t, db)
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM records").Scan(&n); err != nil || n != len(recs) {
		t.Fatalf("%d records stored, %v; want %d", n, err, len(recs))
	}

	s := stores[1]
	hits, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: recs[12].Title + " " + recs[12].Body, Limit: 5})
	if err != nil || len(hits) == 0 {
		t.Fatalf("Recall through PgBouncer = %v, %v", hits, err)
	}
	if got, err := s.Get(ctx, realm, []string{recs[3].ID}); err != nil || len(got) != 1 {
		t.Fatalf("Get = %v, %v", got, err)
	}
	if rows, err := s.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierFull}); err != nil || len(rows) != len(recs) {
		t.Fatalf("Manifest = %d rows, %v; want %d", len(rows), err, len(recs))
	}
	if _, err := s.Forget(ctx, realm, []string{recs[20].ID}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Supersede(ctx, realm, recs[30].ID, sdk.Record{Title: "replaced", Body: "lemon piano", Thread: recs[30].Thread}); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkUsed(ctx, realm, []string{recs[4].ID}, s.now()); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteLedger(ctx, []sdk.LedgerEntry{{Realm: realm, Identity: "alice", Session: "s", RecordID: recs[4].ID, Surface: "turn", Bytes: 10}}); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, db)

	// Export through one store, import through the other into a new realm.
	page, err := stores[0].Export(ctx, realm, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range page.Records {
		page.Records[i].Realm = "copy"
	}
	res, err := stores[1].Import(ctx, "copy", page.Records)
	if err != nil || res.Imported != len(page.Records) {
		t.Fatalf("Import through PgBouncer = %+v, %v; want %d imported", res, err, len(page.Records))
	}
	checkIndex(t, db)
}
