package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
	sdkindex "github.com/memhost/memhost/sdk/index"
	"github.com/memhost/memhost/sdk/tokenize"
)

const realm = "test"

func TestParseConfig(t *testing.T) {
	const secretDSN = "postgres://memhost:hunter2@db.internal:5433/mem?sslmode=disable"
	env := map[string]string{"GOOD_DSN": secretDSN, "BAD_DSN": "postgres://memhost:hunter2@db:notaport/x"}
	getenv := func(k string) string { return env[k] }
	for _, tc := range []struct {
		name   string
		config string
		want   string // substring of the error; "" for success
	}{
		{"defaults need the default variable", `{}`, "MEMHOST_POSTGRES_DSN is unset"},
		{"named variable", `{"dsn_env": "GOOD_DSN"}`, ""},
		{"all keys", `{"dsn_env": "GOOD_DSN", "schema": "mem_2", "pool_size": 3, "statement_timeout": "1500ms"}`, ""},
		{"unset variable", `{"dsn_env": "MISSING_DSN"}`, "MISSING_DSN is unset or empty"},
		{"variable name", `{"dsn_env": "GOOD-DSN"}`, "dsn_env"},
		{"dsn in the file", `{"dsn": "` + secretDSN + `"}`, "unknown field"},
		{"unparsable dsn", `{"dsn_env": "BAD_DSN"}`, "connection string in BAD_DSN does not parse"},
		{"pool size zero", `{"dsn_env": "GOOD_DSN", "pool_size": 0}`, "pool_size: is 0"},
		{"pool size huge", `{"dsn_env": "GOOD_DSN", "pool_size": 1000}`, "pool_size: is 1000"},
		{"timeout syntax", `{"dsn_env": "GOOD_DSN", "statement_timeout": "10"}`, "statement_timeout"},
		{"timeout zero", `{"dsn_env": "GOOD_DSN", "statement_timeout": "0s"}`, "must be 1ms"},
		{"schema case", `{"dsn_env": "GOOD_DSN", "schema": "Memhost"}`, "schema"},
		{"schema injection", `{"dsn_env": "GOOD_DSN", "schema": "x; DROP TABLE y"}`, "schema"},
		{"not an object", `["GOOD_DSN"]`, "JSON object"},
		{"realm statistics", `{"dsn_env": "GOOD_DSN", "statistics": "realm"}`, ""},
		{"statistics value", `{"dsn_env": "GOOD_DSN", "statistics": "global"}`, "statistics: is \"global\""},
		{"replica keys", `{"dsn_env": "GOOD_DSN", "replica": {"enabled": true, "poll_interval": "250ms", "read_wait": "0s", "max_lag": "5s", "change_retention": "24h"}}`, ""},
		{"replica off", `{"dsn_env": "GOOD_DSN", "replica": {"enabled": false}}`, ""},
		{"replica poll too fast", `{"dsn_env": "GOOD_DSN", "replica": {"poll_interval": "5ms"}}`, "replica.poll_interval: is 5ms, must be 10ms to 1m0s"},
		{"replica wait too long", `{"dsn_env": "GOOD_DSN", "replica": {"read_wait": "11s"}}`, "replica.read_wait: is 11s"},
		{"replica lag syntax", `{"dsn_env": "GOOD_DSN", "replica": {"max_lag": "soon"}}`, "replica.max_lag: \"soon\" is not a duration"},
		{"replica retention too short", `{"dsn_env": "GOOD_DSN", "replica": {"change_retention": "30s"}}`, "replica.change_retention: is 30s"},
		{"replica unknown key", `{"dsn_env": "GOOD_DSN", "replica": {"lag": "1s"}}`, "unknown field"},
		{"replica not an object", `{"dsn_env": "GOOD_DSN", "replica": true}`, "replica"},
		{"ledger bounds", `{"dsn_env": "GOOD_DSN", "ledger_retention_hours": 2562047, "ledger_max_rows": 1}`, ""},
		{"ledger retention negative", `{"dsn_env": "GOOD_DSN", "ledger_retention_hours": -1}`, "ledger_retention_hours: is -1"},
		{"ledger retention overflows", `{"dsn_env": "GOOD_DSN", "ledger_retention_hours": 2562048}`, "ledger_retention_hours: is 2562048"},
		{"ledger rows negative", `{"dsn_env": "GOOD_DSN", "ledger_max_rows": -5}`, "ledger_max_rows: is -5"},
		{"replica behind a pooler", `{"dsn_env": "GOOD_DSN", "transaction_pooling": true, "replica": {"enabled": true}}`, "replica.enabled: cannot be true with transaction_pooling"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseConfig([]byte(tc.config), getenv)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %s", tc.config)
			}
			if !errors.Is(err, sdk.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want sdk.ErrInvalid naming %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q repeats the password", err)
			}
			_ = s
		})
	}
	s, err := parseConfig([]byte(`{"dsn_env": "GOOD_DSN", "schema": "mem_2", "pool_size": 3, "statement_timeout": "1500ms"}`), getenv)
	if err != nil {
		t.Fatal(err)
	}
	rp := s.pool.ConnConfig.RuntimeParams
	if s.pool.MaxConns != 3 || rp["search_path"] != "mem_2" || rp["statement_timeout"] != "1500" {
		t.Errorf("pool config: max %d, params %v", s.pool.MaxConns, rp)
	}
	pooled, err := parseConfig([]byte(`{"dsn_env": "GOOD_DSN", "transaction_pooling": true}`), getenv)
	if err != nil {
		t.Fatal(err)
	}
	// PgBouncer refuses these startup parameters; pgdb sets them per
	// transaction instead.
	if cc := pooled.pool.ConnConfig; cc.RuntimeParams["search_path"] != "" || cc.RuntimeParams["statement_timeout"] != "" ||
		cc.DefaultQueryExecMode != pgx.QueryExecModeExec || cc.StatementCacheCapacity != 0 {
		t.Errorf("transaction pooling config: params %v, exec mode %v, statement cache %d", cc.RuntimeParams, cc.DefaultQueryExecMode, cc.StatementCacheCapacity)
	}
	// The replica is on by default, off behind a transaction pooler.
	if want := (replicaSettings{enabled: true, poll: time.Second, readWait: 200 * time.Millisecond, maxLag: 2 * time.Second, retention: time.Hour}); s.replica != want {
		t.Errorf("replica defaults %+v, want %+v", s.replica, want)
	}
	if pooled.replica.enabled {
		t.Error("the replica is on under transaction pooling, which cannot carry LISTEN")
	}
	if got := describeTarget(s.pool); strings.Contains(got, "hunter2") || !strings.Contains(got, "db.internal") {
		t.Errorf("target %q: want the host, never the password", got)
	}
}

// TestConnectFailureIsUnavailable: a server that is not there fails
// Configure with sdk.ErrUnavailable, naming the database but not the
// password.
func TestConnectFailureIsUnavailable(t *testing.T) {
	s := New()
	s.getenv = func(string) string {
		return "host=/nonexistent-socket-dir port=5 user=memhost password=hunter2 dbname=gone connect_timeout=2"
	}
	defer s.Close()
	err := s.Configure(context.Background(), []byte(`{}`))
	if !errors.Is(err, sdk.ErrUnavailable) || !strings.Contains(err.Error(), `database "gone"`) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Configure against no server: %v; want sdk.ErrUnavailable naming the database, not the password", err)
	}
}

// TestConcurrentMigrations starts many stores on one fresh schema at once,
// as hosts starting together do: every one comes up, and the schema is
// migrated exactly once.
func TestConcurrentMigrations(t *testing.T) {
	testDSN(t)
	schema := schemaFor(t, t.Name())
	const hosts = 8
	errs := make(chan error, hosts)
	var wg sync.WaitGroup
	for range hosts {
		wg.Go(func() {
			s := New()
			defer s.Close()
			errs <- s.Configure(context.Background(), configJSON(schema))
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	db := rawPool(t, schema)
	var n, max int
	if err := db.QueryRow(context.Background(), "SELECT count(*), max(version) FROM schema_migrations").Scan(&n, &max); err != nil {
		t.Fatal(err)
	}
	if n != schemaVersion || max != schemaVersion {
		t.Errorf("schema_migrations holds %d rows up to version %d, want %d", n, max, schemaVersion)
	}
}

func TestSchemaRefusals(t *testing.T) {
	testDSN(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup string
		want  string
	}{
		{"foreign tables", "CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.customers (id int)", "not a memhost schema"},
		{"newer version", "CREATE SCHEMA %[1]s; CREATE TABLE %[1]s.schema_migrations (version int PRIMARY KEY, applied_at timestamptz); INSERT INTO %[1]s.schema_migrations VALUES (99, now())", "upgrade the plugin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema := schemaFor(t, t.Name())
			db := rawPool(t, "public")
			if _, err := db.Exec(ctx, fmt.Sprintf(tc.setup, schema)); err != nil {
				t.Fatal(err)
			}
			s := New()
			defer s.Close()
			err := s.Configure(ctx, configJSON(schema))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), schema) {
				t.Errorf("Configure = %v, want an error naming schema %s and saying %q", err, schema, tc.want)
			}
		})
	}
}

// TestStatementTimeout: a statement over the configured timeout fails
// with sdk.ErrDeadline.
func TestStatementTimeout(t *testing.T) {
	testDSN(t)
	set, err := parseConfig(configJSON("public", "statement_timeout", "50ms"), func(k string) string { return testDB.dsn })
	if err != nil {
		t.Fatal(err)
	}
	db, err := pgxpool.NewWithConfig(context.Background(), set.pool)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = db.Exec(context.Background(), "SELECT pg_sleep(2)")
	if err = classify(err); !errors.Is(err, sdk.ErrDeadline) {
		t.Errorf("a 2 s statement under a 50 ms timeout: %v, want sdk.ErrDeadline", err)
	}
}

// rawPool connects to the test database with search_path set to schema.
func rawPool(tb testing.TB, schema string) *pgxpool.Pool {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN(tb))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	db, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(db.Close)
	return db
}

// checkIndex verifies the inverted index against the records table: the
// totals count exactly the active records and their lengths, every
// document frequency counts its postings, and postings belong to active
// records only, one per distinct term.
func checkIndex(t *testing.T, db *pgxpool.Pool) {
	t.Helper()
	ctx := context.Background()
	var bad int
	checks := []struct{ what, sql string }{
		{"realms whose totals differ from their active records", `
			SELECT count(*) FROM (
				SELECT realm, count(*) AS docs, sum(ntok) AS tokens FROM records WHERE status = 'active' GROUP BY realm
			) AS a FULL JOIN (
				SELECT realm, sum(docs) AS docs, sum(tokens) AS tokens FROM index_totals GROUP BY realm HAVING sum(docs) <> 0
			) AS b USING (realm)
			WHERE a.docs IS DISTINCT FROM b.docs OR a.tokens IS DISTINCT FROM b.tokens`},
		{"terms whose df differs from their postings", `
			SELECT count(*) FROM terms AS t
			WHERE t.df <> (SELECT count(*) FROM postings AS p WHERE p.term_id = t.term_id)`},
		{"postings of records that are not active", `
			SELECT count(*) FROM postings AS p LEFT JOIN records AS r ON r.seq = p.seq
			WHERE r.seq IS NULL OR r.status <> 'active' OR r.scope <> p.scope OR r.expires_ms <> p.expires_ms OR r.ntok <> p.dl`},
		{"active records with terms but no postings", `
			SELECT count(*) FROM records AS r WHERE r.status = 'active' AND r.ntok > 0
			AND NOT EXISTS (SELECT 1 FROM postings AS p WHERE p.seq = r.seq)`},
	}
	for _, c := range checks {
		if err := db.QueryRow(ctx, c.sql).Scan(&bad); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if bad != 0 {
			t.Errorf("index: %d %s", bad, c.what)
		}
	}
}

// TestConcurrentWritersOnTwoPlugins runs two plugin processes on one
// schema, as two hosts do, with writers on both racing to store
// overlapping batches of the same contents in different orders. Every
// content ends up stored once, every writer is answered its one id, and
// the index stays exact.
func TestConcurrentWritersOnTwoPlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	testDSN(t)
	schema := schemaFor(t, t.Name())
	cfg := configJSON(schema)
	_, a := launchPlugin(t, cfg)
	_, b := launchPlugin(t, cfg)
	const contents, writersPerHost, rounds = 120, 4, 6
	recs := make([]sdk.Record, contents)
	for i := range recs {
		recs[i] = sdk.Record{
			Scope: []sdk.Scope{sdk.RealmScope, sdk.IdentityScope("alice")}[i%2],
			Kind:  sdk.KindFact,
			Title: fmt.Sprintf("shared note w%04dz", i),
			Body:  fmt.Sprintf("written by every host at once, content w%04dz with common words racing", i),
		}
	}
	var mu sync.Mutex
	idsOf := make([]map[string]bool, contents)
	for i := range idsOf {
		idsOf[i] = map[string]bool{}
	}
	ctx := context.Background()
	errs := make(chan error, 2*writersPerHost)
	var wg sync.WaitGroup
	for h, p := range []*conformance.Client{a, b} {
		for w := range writersPerHost {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(h), uint64(w)))
				for range rounds {
					order := r.Perm(contents)
					for len(order) > 0 {
						n := min(len(order), 1+r.IntN(30))
						batch := make([]sdk.Record, n)
						for k, i := range order[:n] {
							batch[k] = recs[i]
						}
						ids, err := p.Remember(ctx, realm, batch)
						if err != nil {
							errs <- fmt.Errorf("host %d writer %d: %w", h, w, err)
							return
						}
						mu.Lock()
						for k, i := range order[:n] {
							idsOf[i][ids[k]] = true
						}
						mu.Unlock()
						order = order[n:]
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i, ids := range idsOf {
		if len(ids) != 1 {
			t.Errorf("content %d was answered %d ids across hosts, want 1: %v", i, len(ids), ids)
		}
	}
	db := rawPool(t, schema)
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM records").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != contents {
		t.Errorf("%d records stored for %d distinct contents", n, contents)
	}
	checkIndex(t, db)
	// Either host recalls a record the other wrote, once.
	hits, err := b.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "w0007z"})
	if err != nil || len(hits) != 1 || hits[0].Record.Title != recs[7].Title {
		t.Errorf("recall of one shared content = %v, %v", hits, err)
	}
}

// TestIndexStaysExact drives every write path (duplicates, expiry revival,
// supersede, forget, quarantined writes) and checks the index after each.
func TestIndexStaysExact(t *testing.T) {
	schema := schemaFor(t, t.Name())
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := openStore(t, schema, func(s *Store) { s.now = func() time.Time { return now } })
	db := rawPool(t, schema)
	ctx := context.Background()
	rec := func(title, body string) sdk.Record {
		return sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: title, Body: body, Tags: []string{"Ops"}}
	}
	ids, err := s.Remember(ctx, realm, []sdk.Record{rec("alpha one", "apple banana"), rec("beta two", "banana cherry"), rec("alpha one", "apple banana")})
	if err != nil {
		t.Fatal(err)
	}
	if ids[0] != ids[2] || ids[0] == ids[1] {
		t.Errorf("ids %v: the repeated content must answer the first id", ids)
	}
	checkIndex(t, db)
	short := rec("gamma", "expires soon")
	short.ExpiresAt = now.Add(time.Minute)
	gone, err := s.Remember(ctx, realm, []sdk.Record{short})
	if err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour)
	if hits, _ := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "gamma"}); len(hits) != 0 {
		t.Errorf("expired record recalled: %v", hits)
	}
	short.ExpiresAt = now.Add(time.Hour)
	again, err := s.Remember(ctx, realm, []sdk.Record{short})
	if err != nil || again[0] != gone[0] {
		t.Fatalf("rewrite of an expired record = %v, %v; want its id %s", again, err, gone[0])
	}
	if hits, _ := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "gamma"}); len(hits) != 1 {
		t.Errorf("revived record: %d hits, want 1", len(hits))
	}
	checkIndex(t, db)
	if _, err := s.Supersede(ctx, realm, ids[1], rec("beta three", "cherry date")); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, db)
	q := rec("quarantined", "held back")
	q.Status = sdk.StatusQuarantined
	if _, err := s.Remember(ctx, realm, []sdk.Record{q}); err != nil {
		t.Fatal(err)
	}
	checkIndex(t, db)
	if n, err := s.Forget(ctx, realm, []string{ids[0], ids[1], "missing-id"}); err != nil || n != 2 {
		t.Errorf("Forget = %d, %v; want 2", n, err)
	}
	checkIndex(t, db)
	if hits, _ := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "apple"}); len(hits) != 0 {
		t.Errorf("forgotten record recalled: %v", hits)
	}
}

// TestScoresAreBM25 recomputes the documented formula in Go over the
// records written and compares every score recall answers.
func TestScoresAreBM25(t *testing.T) {
	for _, path := range recallPaths {
		t.Run(path, func(t *testing.T) { testScoresAreBM25(t, path) })
	}
}

func testScoresAreBM25(t *testing.T, path string) {
	s := openPath(t, schemaFor(t, t.Name()), path)
	ctx := context.Background()
	recs := []sdk.Record{
		{Title: "Espresso order", Description: "coffee habits", Body: "Alice takes espresso without sugar, espresso twice.", Tags: []string{"coffee"}},
		{Title: "Deploy checklist", Body: "Run the migrations before deploying the espresso service."},
		{Title: "Tea", Body: "Bob prefers green tea in the afternoon."},
		{Title: "会議の予定", Body: "明日の会議は十時から。コーヒーを用意する。"},
		{Title: "Empty-ish", Body: "the and of"},
	}
	for i := range recs {
		recs[i].Scope, recs[i].Kind = sdk.RealmScope, sdk.KindFact
	}
	if _, err := s.Remember(ctx, realm, recs); err != nil {
		t.Fatal(err)
	}
	// The same statistics, from the records as written.
	docs := make([]indexDoc, len(recs))
	var tokens float64
	df := map[string]float64{}
	for i := range recs {
		docs[i] = newIndexDoc(&recs[i])
		tokens += float64(docs[i].ntok)
		for term := range docs[i].tf {
			df[term]++
		}
	}
	n := float64(len(recs))
	avgdl := tokens / n
	for _, query := range []string{"espresso", "espresso coffee sugar", "green tea afternoon migrations", "会議 コーヒー", "nothing matches zzqx"} {
		hits, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: query, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]float64{}
		for i, d := range docs {
			var score float64
			for _, term := range tokenize.Terms(query) {
				tf := d.tf[term]
				if tf == 0 {
					continue
				}
				idf := max(math.Log((n-df[term]+0.5)/(df[term]+0.5)), 1e-6)
				score += idf * tf * (bm25K1 + 1) / (tf + bm25K1*(1-bm25B+bm25B*float64(d.ntok)/avgdl))
			}
			if score > 0 {
				want[recs[i].Title] = score
			}
		}
		if len(hits) != len(want) {
			t.Errorf("%q: %d hits, want %d (%v)", query, len(hits), len(want), want)
		}
		for k, h := range hits {
			if w, ok := want[h.Record.Title]; !ok || math.Abs(h.Score-w) > 1e-9*max(1, w) {
				t.Errorf("%q: %s scored %v, want %v", query, h.Record.Title, h.Score, w)
			}
			if k > 0 && hits[k-1].Score < h.Score {
				t.Errorf("%q: hits not best first", query)
			}
		}
	}
}

// TestStatistics: with statistics = "realm", writes to one realm do not
// change another realm's scores; with the default ("store") they do, and
// the scores are sdk/index's over every realm (StatsIndex, as the sqlite
// provider ranks).
func TestStatistics(t *testing.T) {
	for _, c := range [][2]string{{"realm", "sql"}, {"store", "sql"}, {"realm", "replica"}, {"store", "replica"}} {
		mode := c[0]
		t.Run(mode+"/"+c[1], func(t *testing.T) {
			s := openPath(t, schemaFor(t, t.Name()), c[1], "statistics", mode)
			ctx := context.Background()
			ref, err := sdkindex.New(sdkindex.Options{Weights: fieldWeights[:], ContextWeight: sdkindex.ContextWeight})
			if err != nil {
				t.Fatal(err)
			}
			mk := func(title string) sdk.Record {
				return sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: title, Body: "shared body words"}
			}
			put := func(realm string, recs []sdk.Record) {
				t.Helper()
				ids, err := s.Remember(ctx, realm, recs)
				if err != nil {
					t.Fatal(err)
				}
				for i, r := range recs {
					own := recordTerms(r.Tags, r.Title, r.Description, r.Body)
					if err := ref.Put(sdkindex.Doc{ID: ids[i], Realm: realm, Scope: string(r.Scope), Fields: own[:]}); err != nil {
						t.Fatal(err)
					}
				}
			}
			put("a", []sdk.Record{mk("kiwi fruit"), mk("plum fruit")})
			before, err := s.Recall(ctx, sdk.RecallQuery{Realm: "a", Query: "kiwi"})
			if err != nil || len(before) != 1 {
				t.Fatal(before, err)
			}
			var many []sdk.Record
			for i := range 50 {
				many = append(many, mk(fmt.Sprintf("apple %d", i)))
			}
			put("b", many)
			after, err := s.Recall(ctx, sdk.RecallQuery{Realm: "a", Query: "kiwi"})
			if err != nil || len(after) != 1 {
				t.Fatal(after, err)
			}
			switch mode {
			case "realm":
				if after[0].Score != before[0].Score {
					t.Errorf("realm a's score moved from %v to %v after writes to realm b", before[0].Score, after[0].Score)
				}
			case "store":
				want, err := ref.Search(sdkindex.Query{Realm: "a", Terms: []string{"kiwi"}, Limit: 10})
				if err != nil || len(want) != 1 {
					t.Fatal(want, err)
				}
				if after[0].Score == before[0].Score || math.Abs(after[0].Score-want[0].Score) > 1e-9*want[0].Score {
					t.Errorf("realm a's score %v before and %v after writes to realm b; sdk/index over every realm scores %v", before[0].Score, after[0].Score, want[0].Score)
				}
			}
		})
	}
}

// TestRecallFiltersInSQL covers filters the conformance kit checks only
// lightly: tags (case-folded), excluded tags and ids, scopes, with more
// matches than the limit; from SQL and from the replica.
func TestRecallFiltersInSQL(t *testing.T) {
	for _, path := range recallPaths {
		t.Run(path, func(t *testing.T) { testRecallFilters(t, path) })
	}
}

func testRecallFilters(t *testing.T, path string) {
	s := openPath(t, schemaFor(t, t.Name()), path)
	ctx := context.Background()
	var recs []sdk.Record
	for i := range 40 {
		r := sdk.Record{Scope: sdk.IdentityScope(fmt.Sprintf("u%d", i%4)), Kind: sdk.KindFact,
			Title: fmt.Sprintf("note %d", i), Body: strings.Repeat("lantern ", 1+i%5)}
		if i%3 == 0 {
			r.Tags = []string{"Night"}
		}
		recs = append(recs, r)
	}
	ids, err := s.Remember(ctx, realm, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		q    sdk.RecallQuery
		ok   func(i int) bool
	}{
		{"tag", sdk.RecallQuery{Tags: []string{"NIGHT"}}, func(i int) bool { return i%3 == 0 }},
		{"exclude tag", sdk.RecallQuery{ExcludeTags: []string{"night"}}, func(i int) bool { return i%3 != 0 }},
		{"scope", sdk.RecallQuery{Scopes: []sdk.Scope{sdk.IdentityScope("u1")}}, func(i int) bool { return i%4 == 1 }},
		{"exclude ids", sdk.RecallQuery{ExcludeIDs: ids[:30]}, func(i int) bool { return i >= 30 }},
		{"tag and scope", sdk.RecallQuery{Tags: []string{"night"}, Scopes: []sdk.Scope{sdk.IdentityScope("u0")}}, func(i int) bool { return i%3 == 0 && i%4 == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Realm, q.Query, q.Limit = realm, "lantern", 5
			hits, err := s.Recall(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var want int
			for i := range recs {
				if tc.ok(i) {
					want++
				}
			}
			if len(hits) != min(want, 5) {
				t.Errorf("%d hits, want %d", len(hits), min(want, 5))
			}
			for _, h := range hits {
				i := slices.Index(ids, h.Record.ID)
				if i < 0 || !tc.ok(i) {
					t.Errorf("hit %s (record %d) does not pass the filter", h.Record.Title, i)
				}
			}
		})
	}
}

// TestPrunedRecallIsExact compares recall with MaxScore pruning against
// scoring every posting, over the benchmark corpus: the same records with
// the same scores, for every query, and pruning really happened.
func TestPrunedRecallIsExact(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 2000 records")
	}
	schema := schemaFor(t, t.Name())
	plans := map[string]int{}
	var mu sync.Mutex
	pruned := openStoreWith(t, configJSON(schema, "replica", sqlOnly), func(s *Store) {
		// Thresholds scaled to the small corpus, so most queries prune.
		s.recall.pruneMin, s.recall.seed, s.recall.probeCost = 1, 40, 1
		s.recall.plan = func(p string) { mu.Lock(); plans[p]++; mu.Unlock() }
	})
	whole := openStoreWith(t, configJSON(schema, "replica", sqlOnly), func(s *Store) { s.recall.noPrune = true })
	ctx := context.Background()
	const n = 2000
	for i := 0; i < n; i += 1000 {
		if _, err := pruned.Remember(ctx, realm, benchRecordsIn(i, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	c := benchCorpus()
	for i := range 300 {
		q := sdk.RecallQuery{Realm: realm, Query: c.query(i, n), Limit: 10}
		if i%7 == 0 {
			q.Scopes = []sdk.Scope{benchScope(i), sdk.RealmScope}
		}
		sameRanking(t, q, "pruned", pruned, "whole", whole)
	}
	t.Logf("plans: %v", plans)
	if plans["pruned"]+plans["seeded"] == 0 {
		t.Errorf("no query was pruned (plans %v): the test does not exercise pruning", plans)
	}
}

// recaller is a store in-process or a plugin process.
type recaller interface {
	Recall(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error)
}

// sameRanking recalls q from stores a and b (named for messages) and
// checks that they answer the same records, scores within 1e-9 (either of
// two records tied at the cut may fill the last place).
func sameRanking(t *testing.T, q sdk.RecallQuery, aName string, a recaller, bName string, b recaller) {
	t.Helper()
	ctx := context.Background()
	got, err := a.Recall(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	want, err := b.Recall(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("query %q: %d hits %s, %d %s", q.Query, len(got), aName, len(want), bName)
	}
	for k := range got {
		if math.Abs(got[k].Score-want[k].Score) > 1e-9*want[k].Score {
			t.Errorf("query %q: hit %d scores %v %s, %v %s", q.Query, k, got[k].Score, aName, want[k].Score, bName)
		}
	}
	gotIDs, wantIDs := hitIDs(got), hitIDs(want)
	slices.Sort(gotIDs)
	slices.Sort(wantIDs)
	if !slices.Equal(gotIDs, wantIDs) && !tiedAtCut(want) {
		t.Errorf("query %q: %s answer %v, %s %v", q.Query, aName, gotIDs, bName, wantIDs)
	}
}

func hitIDs(hits []sdk.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Record.ID
	}
	return out
}

// tiedAtCut reports whether the last hit ties the one before it, when
// either of two tied records may fill the last place.
func tiedAtCut(hits []sdk.Hit) bool {
	k := len(hits)
	return k >= 2 && math.Abs(hits[k-1].Score-hits[k-2].Score) <= 1e-9*hits[k-1].Score
}

// benchRecordsIn is benchRecords for a test.
func benchRecordsIn(start, n int) []sdk.Record {
	c := benchCorpus()
	out := make([]sdk.Record, n)
	for i := range out {
		out[i] = c.record(start + i)
	}
	return out
}

// TestServerOutage stops PostgreSQL under a configured plugin: calls fail
// with sdk.ErrUnavailable while it is down, the plugin serves again once
// it is back (the pool reconnects), and every acknowledged write is there.
func TestServerOutage(t *testing.T) {
	ctx := context.Background()
	c, dsn := ownCluster(t)
	s := New()
	s.getenv = func(string) string { return dsn }
	defer s.Close()
	if err := s.Configure(ctx, []byte(`{"statement_timeout": "5s"}`)); err != nil {
		t.Fatal(err)
	}
	rec := func(i int) sdk.Record {
		return sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: fmt.Sprintf("outage note %d", i), Body: "kept across the outage"}
	}
	before, err := s.Remember(ctx, realm, []sdk.Record{rec(1), rec(2)})
	if err != nil {
		t.Fatal(err)
	}
	c.StopServer()
	if _, err := s.Remember(ctx, realm, []sdk.Record{rec(3)}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("Remember while the server is down: %v, want sdk.ErrUnavailable", err)
	}
	if _, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "outage"}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Errorf("Recall while the server is down: %v, want sdk.ErrUnavailable", err)
	}
	if err := c.StartServer(ctx); err != nil {
		t.Fatal(err)
	}
	// For refusalPause after a refused connection the provider fails fast
	// rather than connect again; retried past it, the write goes through.
	var after []string
	deadline := time.Now().Add(10 * refusalPause)
	for attempt := 0; ; attempt++ {
		after, err = s.Remember(ctx, realm, []sdk.Record{rec(4)})
		if err == nil {
			break
		}
		if !errors.Is(err, sdk.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("Remember after the server came back (attempt %d): %v", attempt, err)
		}
		time.Sleep(refusalPause / 4)
	}
	got, err := s.Get(ctx, realm, append(before, after...))
	if err != nil || len(got) != 3 {
		t.Fatalf("Get after the outage = %d records, %v; want the 3 acknowledged", len(got), err)
	}
	hits, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "outage note"})
	if err != nil || len(hits) != 3 {
		t.Errorf("Recall after the outage = %d hits, %v; want 3", len(hits), err)
	}
}

// TestWriteWhoseBackendDiesIsUnavailable: a write whose server process
// dies under it (the OOM killer, a crash) reads a bare EOF from its
// connection; that is an outage (503), not an internal error, and nothing
// of the write was stored: retried once the server is back, it stores the
// record once.
func TestWriteWhoseBackendDiesIsUnavailable(t *testing.T) {
	ctx := context.Background()
	_, dsn := ownCluster(t)
	s := New()
	s.getenv = func(string) string { return dsn }
	defer s.Close()
	if err := s.Configure(ctx, []byte(`{"statement_timeout": "20s", "replica": {"enabled": false}}`)); err != nil {
		t.Fatal(err)
	}
	// Another session holds the thread's lock, so the write waits in the
	// server until its process is killed.
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", threadLockKey(realm, "t1")); err != nil {
		t.Fatal(err)
	}
	r := note("killed write", "its server process dies")
	r.Thread = &sdk.Thread{ID: "t1", Seq: 1}
	done := make(chan error, 1)
	go func() {
		_, err := s.Remember(ctx, realm, []sdk.Record{r})
		done <- err
	}()
	var pid int
	for deadline := time.Now().Add(10 * time.Second); ; {
		err := holder.QueryRow(ctx, "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() LIMIT 1").Scan(&pid)
		if err == nil {
			break
		}
		if !errors.Is(err, pgx.ErrNoRows) || time.Now().After(deadline) {
			t.Fatalf("the write never waited on the lock: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, sdk.ErrUnavailable) || strings.Contains(err.Error(), "EOF") {
		t.Fatalf("a write whose server process died answered %v; want unavailable", err)
	}
	// The server restarts every process after one was killed.
	var ids []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(refusalPause / 4) {
		if ids, err = s.Remember(ctx, realm, []sdk.Record{r}); err == nil {
			break
		}
		if !errors.Is(err, sdk.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("the write retried once the server was back: %v", err)
		}
	}
	hits, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "killed write"})
	if err != nil || len(hits) != 1 || hits[0].Record.ID != ids[0] {
		t.Fatalf("recall after the retry = %v, %v; want the record once", titles(hits), err)
	}
}

// TestDeadPooledConnectionIsReplaced: after a restart or failover every
// pooled connection is dead, and one used less than a second ago is not
// pinged before reuse. A transaction and a read on it (the replica's read
// of its hits too, which answered a recall 503) must go through on a
// fresh connection, not fail the call.
func TestDeadPooledConnectionIsReplaced(t *testing.T) {
	ctx := context.Background()
	schema := schemaFor(t, t.Name())
	openStore(t, schema).Close() // the tables the replica's read needs
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	const app = "memhost_dead_conn_test"
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = 1                                                                       // the dead connection is the one reused
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false } // as for one idle under a second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	db := newPGDB(pool, settings{})
	admin := rawPool(t, "public")
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"transaction", func() error {
			return inTx(ctx, db, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, "SELECT 1"); return err })
		}},
		{"read on the pool", func() error {
			return db.run(ctx, readOnly, func(q dbtx) error { var n int; return q.QueryRow(ctx, "SELECT 1").Scan(&n) })
		}},
		{"the replica's read of its hits", func() error {
			_, _, _, err := readHitRows(ctx, db, realm, 0, []sdkindex.Hit{{ID: "gone", Seq: 1}})
			return err
		}},
	} {
		if err := tc.call(); err != nil {
			t.Fatalf("%s before: %v", tc.name, err)
		}
		if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1", app); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; {
			var n int
			if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d backends still there", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := tc.call(); err != nil {
			t.Errorf("%s on a connection the server closed: %v, want it run on a new one", tc.name, err)
		}
	}
}

// TestReadOnlyServerIsUnavailable: a server that turns read-only under a
// running plugin (a primary demoted, a failover's address still on the
// standby, default_transaction_read_only set) fails writes as an outage
// (503), never an internal error carrying the server's words.
func TestReadOnlyServerIsUnavailable(t *testing.T) {
	ctx := context.Background()
	_, dsn := ownCluster(t)
	s := New()
	s.getenv = func(string) string { return dsn }
	defer s.Close()
	if err := s.Configure(ctx, []byte(`{"statement_timeout": "5s"}`)); err != nil {
		t.Fatal(err)
	}
	ids, err := s.Remember(ctx, realm, []sdk.Record{note("before read-only", "stored")})
	if err != nil {
		t.Fatal(err)
	}
	pgtest.SetReadOnly(t, dsn)
	// A pooled session takes the reloaded setting at its next command
	// boundary, which may come after a transaction began: write until one
	// is refused (each success stores a record), within a bound.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		_, err = s.Remember(ctx, realm, []sdk.Record{note("while read-only", time.Now().String())})
		if err != nil || time.Now().After(deadline) {
			break
		}
	}
	if !errors.Is(err, sdk.ErrUnavailable) || strings.Contains(err.Error(), "ERROR") {
		t.Errorf("Remember on a read-only server: %v, want unavailable", err)
	}
	if _, err := s.Forget(ctx, realm, ids); !errors.Is(err, sdk.ErrUnavailable) || strings.Contains(err.Error(), "ERROR") {
		t.Errorf("Forget on a read-only server: %v, want unavailable", err)
	}
}

// newIndexDoc is a record's own terms as the index weighs them, with no
// thread context.
func newIndexDoc(r *sdk.Record) indexDoc {
	return buildDoc(recordTerms(r.Tags, r.Title, r.Description, r.Body), nil)
}
