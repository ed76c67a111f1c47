package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/memhost/memhost/sdk"
	sdkindex "github.com/memhost/memhost/sdk/index"
)

// threadWords is a small vocabulary, so turns share terms and context
// changes rankings.
var threadWords = strings.Fields("coffee tea morning deadline report lisbon paris train flight budget garden piano " +
	"meeting friday sister dentist recipe lemon marathon novel camera")

// threadedRecords are turns of three threads, with a crowded place
// (thread t0, seq 5, more records than MaxPlaceDocs) and a few unthreaded
// records among them.
func threadedRecords(rng *rand.Rand) []sdk.Record {
	text := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = threadWords[rng.IntN(len(threadWords))]
		}
		return strings.Join(w, " ")
	}
	var out []sdk.Record
	for i := range 60 {
		r := sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: text(2), Body: text(3 + rng.IntN(8))}
		if i%5 == 2 {
			// Another scope under the same thread ids: no neighbour of
			// the realm's records, nor they of it.
			r.Scope = sdk.IdentityScope("alice")
		}
		if i%3 == 0 {
			r.Tags = []string{threadWords[rng.IntN(len(threadWords))]}
		}
		switch {
		case i%11 == 10:
			// unthreaded
		case i < 8:
			r.Thread = &sdk.Thread{ID: "t0", Seq: 5}
		default:
			r.Thread = &sdk.Thread{ID: fmt.Sprintf("t%d", i%3), Seq: int64(i / 3)}
		}
		r.ID = fmt.Sprintf("rec-%03d", (i*37)%60) // ids out of arrival order
		out = append(out, r)
	}
	return out
}

// refDoc is rec as sdk/index takes it, with the sqlite provider's fields.
func refDoc(r sdk.Record, seq uint64) sdkindex.Doc {
	own := recordTerms(r.Tags, r.Title, r.Description, r.Body)
	d := sdkindex.Doc{ID: r.ID, Realm: realm, Scope: string(r.Scope), Fields: own[:], Seq: seq}
	if r.Thread != nil {
		d.Thread, d.ThreadSeq = r.Thread.ID, r.Thread.Seq
	}
	return d
}

// TestThreadContextRanksAsSDKIndex writes threaded turns one at a time,
// forgets and supersedes some, and checks that every query answers the
// same records with the same scores as sdk/index (the sqlite provider's
// engine) given the same changes, and that the inverted index stays exact.
func TestThreadContextRanksAsSDKIndex(t *testing.T) {
	for _, path := range recallPaths {
		t.Run(path, func(t *testing.T) { testThreadContextRanksAsSDKIndex(t, path) })
	}
}

func testThreadContextRanksAsSDKIndex(t *testing.T, path string) {
	schema := schemaFor(t, t.Name())
	s := openPath(t, schema, path, "statistics", "realm")
	db := rawPool(t, schema)
	ctx := context.Background()
	ref, err := sdkindex.New(sdkindex.Options{Weights: fieldWeights[:], ContextWeight: sdkindex.ContextWeight, Stats: sdkindex.StatsRealm})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	recs := threadedRecords(rng)
	seq := uint64(0)
	byID := map[string]sdk.Record{}
	for _, r := range recs {
		if _, err := s.Remember(ctx, realm, []sdk.Record{r}); err != nil {
			t.Fatal(err)
		}
		seq++
		if err := ref.Put(refDoc(r, seq)); err != nil {
			t.Fatal(err)
		}
		byID[r.ID] = r
	}
	compare := func(stage string) {
		t.Helper()
		checkIndex(t, db)
		for i := 0; i+1 < len(threadWords); i += 2 {
			query := threadWords[i] + " " + threadWords[i+1]
			got, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: query, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			want, err := ref.Search(sdkindex.Query{Realm: realm, Terms: sdkindex.QueryTerms(query), Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Errorf("%s: %q: %d hits, sdk/index %d", stage, query, len(got), len(want))
				continue
			}
			for j := range got {
				if got[j].Record.ID != want[j].ID || math.Abs(got[j].Score-want[j].Score) > 1e-9*math.Abs(want[j].Score) {
					t.Errorf("%s: %q hit %d: %s %.12g, sdk/index %s %.12g", stage, query, j, got[j].Record.ID, got[j].Score, want[j].ID, want[j].Score)
				}
			}
		}
	}
	compare("after writes")

	// Forget a participant of the crowded place (another moves in), a
	// middle turn and an unthreaded record.
	forget := []string{recs[0].ID, recs[30].ID, recs[21].ID}
	if _, err := s.Forget(ctx, realm, forget); err != nil {
		t.Fatal(err)
	}
	for _, id := range forget {
		ref.Delete(realm, id)
	}
	// Supersede a turn with one at the same place.
	old := recs[40]
	rep := sdk.Record{ID: "rec-new", Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "replacement", Body: "lisbon marathon train", Thread: old.Thread}
	if _, err := s.Supersede(ctx, realm, old.ID, rep); err != nil {
		t.Fatal(err)
	}
	ref.Delete(realm, old.ID)
	seq++
	if err := ref.Put(refDoc(rep, seq)); err != nil {
		t.Fatal(err)
	}
	compare("after forget and supersede")

	// Two newcomers with lesser ids in one batch push two records of the
	// crowded place out of taking part.
	var batch []sdk.Record
	for _, id := range []string{"rea-1", "rea-2"} {
		batch = append(batch, sdk.Record{ID: id, Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "newcomer " + id, Body: "piano lemon", Thread: &sdk.Thread{ID: "t0", Seq: 5}})
	}
	if _, err := s.Remember(ctx, realm, batch); err != nil {
		t.Fatal(err)
	}
	for _, r := range batch {
		seq++
		if err := ref.Put(refDoc(r, seq)); err != nil {
			t.Fatal(err)
		}
	}
	compare("after a batch of two newcomers at the crowded place")

	// Re-indexing from the records, one realm or every realm, changes
	// nothing, and reports every active record.
	var active int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM records WHERE status = 'active'").Scan(&active); err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{realm, ""} {
		var lastDone, lastTotal int
		n, err := s.Reindex(ctx, r, func(done, total int) { lastDone, lastTotal = done, total })
		if err != nil {
			t.Fatal(err)
		}
		if n != active || lastDone != active || lastTotal != active {
			t.Errorf("Reindex(%q) = %d, last progress %d of %d; want %d", r, n, lastDone, lastTotal, active)
		}
		compare(fmt.Sprintf("after Reindex(%q)", r))
	}
}

// twinStores stores the same threaded records (drawn from seed) in two
// schemas: the test's "/fresh" one, left as written, and its "/old" one,
// answered with a raw pool for the test to take back to an older version.
func twinStores(t *testing.T, seed uint64) (string, *pgxpool.Pool) {
	t.Helper()
	return twinStoresOf(t, threadedRecords(rand.New(rand.NewPCG(seed, seed))))
}

// twinStoresOf is twinStores of recs.
func twinStoresOf(t *testing.T, recs []sdk.Record) (string, *pgxpool.Pool) {
	t.Helper()
	for _, schema := range []string{schemaFor(t, t.Name()+"/fresh"), schemaFor(t, t.Name()+"/old")} {
		s := openStore(t, schema)
		if _, err := s.Remember(context.Background(), realm, recs); err != nil {
			t.Fatal(err)
		}
		// Closed before the caller rewrites the schema: an open store's
		// background work (heartbeat, change-log trim) locks the tables
		// the caller drops, in an order that can deadlock with the DDL.
		s.Close()
	}
	schema := schemaFor(t, t.Name()+"/old")
	return schema, rawPool(t, schema)
}

// TestMigrationAddsThreadContext opens a schema as version 2 left it
// (threaded records indexed with their own terms only) and checks that
// migrating re-indexes them as a fresh store indexes them.
func TestMigrationAddsThreadContext(t *testing.T) {
	ctx := context.Background()
	schema, db := twinStores(t, 3)
	// Back to version 2: the thread context gone from the index, the
	// version 3 indexes and the version 4 column dropped.
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT DISTINCT thread_id FROM records WHERE thread_id IS NOT NULL`)
		if err != nil {
			return err
		}
		threads, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, th := range threads {
			r, err := tx.Query(ctx, `SELECT seq, id, thread_id, thread_seq, scope, expires_ms, ntok, tags, title, description, body
				FROM records WHERE status = 'active' AND thread_id = $1`, th)
			if err != nil {
				return err
			}
			var trs []*threadRow
			for r.Next() {
				tr := &threadRow{}
				var tags []string
				var title, description, body string
				if err := r.Scan(&tr.seq, &tr.id, &tr.at.thread, &tr.at.seq, &tr.scope, &tr.exp, &tr.ntok, &tags, &title, &description, &body); err != nil {
					return err
				}
				tr.own = recordTerms(tags, title, description, body)
				trs = append(trs, tr)
			}
			if err := r.Err(); err != nil {
				return err
			}
			if err := reindexRows(ctx, tx, realm, trs, nil, true); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `DROP INDEX records_by_thread; DROP INDEX records_by_id_bytes; DROP INDEX terms_by_term;
			ALTER TABLE records DROP COLUMN occurred_ms; DROP TABLE changes, change_horizon, replicas, vectors; DROP FUNCTION vectors_retire() CASCADE;
			DELETE FROM schema_migrations WHERE version >= 3`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	before := postingsByID(t, db)
	openStore(t, schema) // migrates to the current version
	after := postingsByID(t, db)
	want := postingsByID(t, rawPool(t, schemaFor(t, t.Name()+"/fresh")))
	if before == want {
		t.Fatal("the version 2 index already equals a fresh one: the test checks nothing")
	}
	if after != want {
		t.Errorf("after migrating, the index differs from a fresh store's:\n got %.300s\nwant %.300s", after, want)
	}
	checkIndex(t, db)
}

// TestMigrationCapsThreadContext opens a schema as version 4 left it
// (thread context weighed without caps: other frequencies and lengths on
// the threaded records' postings) and checks that migrating re-indexes
// them as a fresh store indexes them.
func TestMigrationCapsThreadContext(t *testing.T) {
	ctx := context.Background()
	schema, db := twinStores(t, 4)
	if _, err := db.Exec(ctx, `
		UPDATE postings AS p SET tf = p.tf + 0.375, dl = p.dl + 100 FROM records AS r
		WHERE r.seq = p.seq AND r.thread_id IS NOT NULL;
		DROP TABLE changes, change_horizon, replicas, vectors; DROP FUNCTION vectors_retire() CASCADE;
		DELETE FROM schema_migrations WHERE version >= 5`); err != nil {
		t.Fatal(err)
	}
	want := postingsByID(t, rawPool(t, schemaFor(t, t.Name()+"/fresh")))
	if before := postingsByID(t, db); before == want {
		t.Fatal("the version 4 index already equals a fresh one: the test checks nothing")
	}
	openStore(t, schema) // migrates to version 5
	if after := postingsByID(t, db); after != want {
		t.Errorf("after migrating, the index differs from a fresh store's:\n got %.300s\nwant %.300s", after, want)
	}
}

// TestMigrationScopesThreadContext opens a schema as version 7 left it
// (thread context joined across scopes: a record's context held the
// words of another scope's records under the same thread id) and checks
// that migrating re-indexes them as a fresh store indexes them.
func TestMigrationScopesThreadContext(t *testing.T) {
	ctx := context.Background()
	schema, db := twinStores(t, 8)
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT seq, id, thread_id, thread_seq, scope, expires_ms, ntok, tags, title, description, body
			FROM records WHERE status = 'active' AND thread_id IS NOT NULL`)
		if err != nil {
			return err
		}
		// Every place keyed without its scope: the rule before version 8.
		byPlace := map[place][]*threadRow{}
		var all []*threadRow
		for rows.Next() {
			tr := &threadRow{}
			var tags []string
			var title, description, body string
			if err := rows.Scan(&tr.seq, &tr.id, &tr.at.thread, &tr.at.seq, &tr.scope, &tr.exp, &tr.ntok, &tags, &title, &description, &body); err != nil {
				return err
			}
			tr.own = recordTerms(tags, title, description, body)
			byPlace[tr.at] = append(byPlace[tr.at], tr)
			all = append(all, tr)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, rs := range byPlace {
			slices.SortFunc(rs, func(a, b *threadRow) int { return strings.Compare(a.id, b.id) })
		}
		if err := reindexRows(ctx, tx, realm, all, byPlace, true); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM schema_migrations WHERE version >= 8`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := postingsByID(t, rawPool(t, schemaFor(t, t.Name()+"/fresh")))
	if before := postingsByID(t, db); before == want {
		t.Fatal("the version 7 index already equals a fresh one: the test checks nothing")
	}
	openStore(t, schema) // migrates to version 8
	if after := postingsByID(t, db); after != want {
		t.Errorf("after migrating, the index differs from a fresh store's:\n got %.300s\nwant %.300s", after, want)
	}
	checkIndex(t, db)
}

// TestMigrationLeavesSystemTagsOutOfText opens a schema as version 9
// left it (memhost's system tags indexed as text: "memhost", "user" in
// the tags field of the records carrying them, and so in their
// neighbours' context) and checks that migrating re-indexes them as a
// fresh store indexes them.
func TestMigrationLeavesSystemTagsOutOfText(t *testing.T) {
	ctx := context.Background()
	recs := threadedRecords(rand.New(rand.NewPCG(10, 10)))
	for i := range recs {
		switch i % 4 {
		case 1:
			recs[i].Tags = append(recs[i].Tags, "memhost:user")
		case 3:
			recs[i].Tags = append(recs[i].Tags, "MEMHOST:Assistant")
		}
	}
	schema, db := twinStoresOf(t, recs)
	// Back to version 9: every active record indexed with its tags as text.
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT seq, id, thread_id, thread_seq, scope, expires_ms, ntok, tags, title, description, body
			FROM records WHERE status = 'active'`)
		if err != nil {
			return err
		}
		byPlace := map[place][]*threadRow{}
		var threaded, loose []*threadRow
		for rows.Next() {
			tr := &threadRow{}
			var thread *string
			var threadSeq *int64
			var tags []string
			var title, description, body string
			if err := rows.Scan(&tr.seq, &tr.id, &thread, &threadSeq, &tr.scope, &tr.exp, &tr.ntok, &tags, &title, &description, &body); err != nil {
				return err
			}
			tr.own = fieldTerms{sdkindex.FieldTerms(strings.Join(tags, " ")), sdkindex.FieldTerms(title),
				sdkindex.FieldTerms(description), sdkindex.FieldTerms(body)}
			if thread == nil {
				loose = append(loose, tr)
				continue
			}
			tr.at = place{scope: tr.scope, thread: *thread, seq: *threadSeq}
			byPlace[tr.at] = append(byPlace[tr.at], tr)
			threaded = append(threaded, tr)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, rs := range byPlace {
			slices.SortFunc(rs, func(a, b *threadRow) int { return strings.Compare(a.id, b.id) })
		}
		if err := reindexRows(ctx, tx, realm, threaded, byPlace, true); err != nil {
			return err
		}
		if err := reindexRows(ctx, tx, realm, loose, nil, true); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM schema_migrations WHERE version >= 10`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := postingsByID(t, rawPool(t, schemaFor(t, t.Name()+"/fresh")))
	before := postingsByID(t, db)
	if before == want || !strings.Contains(before, " memhost ") {
		t.Fatal("the version 9 index holds no system tag's words: the test checks nothing")
	}
	openStore(t, schema) // migrates to version 10
	if after := postingsByID(t, db); after != want {
		t.Errorf("after migrating, the index differs from a fresh store's:\n got %.300s\nwant %.300s", after, want)
	}
	checkIndex(t, db)
}

// postingsByID renders every posting as record id, term, tf and length,
// in order (comparable across schemas, whose seqs and term ids differ).
func postingsByID(t *testing.T, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) string {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT r.id || ' ' || t.term || ' ' || p.tf || ' ' || p.dl
		FROM postings AS p JOIN records AS r ON r.seq = p.seq JOIN terms AS t ON t.term_id = p.term_id
		ORDER BY r.id COLLATE "C", t.term COLLATE "C"`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestConcurrentImports: two stores (two hosts) import the same records
// at once, in batches of different sizes and so in different lock
// orders. Each record is stored once, the export is what was imported,
// and the index is exact, thread context included.
func TestConcurrentImports(t *testing.T) {
	schema := schemaFor(t, t.Name())
	a, b := openStore(t, schema), openStore(t, schema)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(5, 5))
	recs := threadedRecords(rng)
	base := time.Date(2025, 6, 1, 8, 0, 0, 0, time.UTC)
	for i := range recs {
		r := &recs[i]
		r.Realm, r.Trust, r.Status = realm, sdk.TrustApplication, sdk.StatusActive
		if i%7 == 3 {
			r.Status = sdk.StatusQuarantined
		}
		r.CreatedAt, r.UpdatedAt = base.Add(time.Duration(i)*time.Minute), base.Add(time.Duration(i)*time.Minute)
		if i%5 == 0 {
			r.UseCount, r.LastUsedAt = int64(i), r.UpdatedAt.Add(time.Second)
		}
		r.ContentHash = sdk.ContentHash(r.Title, r.Body)
	}
	var wg sync.WaitGroup
	imported := make([]int, 2)
	errs := make([]error, 2)
	for w, st := range []*Store{a, b} {
		size := 7 + 6*w
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := 0; start < len(recs); start += size {
				// The second host walks the batches backwards.
				lo := start
				if w == 1 {
					lo = max(0, len(recs)-start-size)
				}
				res, err := st.Import(ctx, realm, recs[lo:min(len(recs), lo+size)])
				if err != nil {
					errs[w] = err
					return
				}
				imported[w] += res.Imported
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if imported[0]+imported[1] != len(recs) {
		t.Errorf("hosts imported %d + %d records, want %d in all", imported[0], imported[1], len(recs))
	}
	var got []sdk.Record
	for after := ""; ; {
		page, err := a.Export(ctx, realm, after, 25)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, page.Records...)
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	want := slices.Clone(recs)
	slices.SortFunc(want, func(x, y sdk.Record) int { return strings.Compare(x.ID, y.ID) })
	if !reflect.DeepEqual(got, want) {
		t.Errorf("export after concurrent imports differs from the records: %d records, want %d", len(got), len(want))
	}
	db := rawPool(t, schema)
	checkIndex(t, db)
	// The index is the one a single import builds.
	one := openStore(t, schemaFor(t, t.Name()+"/one"))
	if _, err := one.Import(ctx, realm, recs); err != nil {
		t.Fatal(err)
	}
	if got, want := postingsByID(t, db), postingsByID(t, rawPool(t, schemaFor(t, t.Name()+"/one"))); got != want {
		t.Errorf("concurrent imports indexed differently from one import")
	}
}

// TestReadThread reads places of a thread that runs in two scopes: it
// answers exactly the active records at the places asked, in the scope
// asked (not a forgotten or superseded one), and the plan reads them
// through records_by_thread.
func TestReadThread(t *testing.T) {
	schema := schemaFor(t, t.Name())
	s := openStore(t, schema)
	ctx := context.Background()
	alice := sdk.IdentityScope("alice")
	rec := func(id string, scope sdk.Scope, thread string, seq int64) sdk.Record {
		return sdk.Record{ID: id, Scope: scope, Kind: sdk.KindFact, Title: "turn " + id, Body: "body of " + id,
			Thread: &sdk.Thread{ID: thread, Seq: seq}}
	}
	recs := []sdk.Record{
		rec("r1", sdk.RealmScope, "t", 1), rec("r2", sdk.RealmScope, "t", 2),
		rec("r3a", sdk.RealmScope, "t", 3), rec("r3b", sdk.RealmScope, "t", 3),
		rec("r4", sdk.RealmScope, "t", 4), rec("r5", sdk.RealmScope, "t", 5),
		rec("a2", alice, "t", 2), rec("a3", alice, "t", 3),
		rec("u3", sdk.RealmScope, "u", 3),
		{ID: "plain", Scope: sdk.RealmScope, Kind: sdk.KindFact, Body: "in no thread"},
	}
	if _, err := s.Remember(ctx, realm, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Remember(ctx, "other", []sdk.Record{rec("o3", sdk.RealmScope, "t", 3)}); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Forget(ctx, realm, []string{"r4"}); err != nil || n != 1 {
		t.Fatalf("forget: %d, %v", n, err)
	}
	if _, err := s.Supersede(ctx, realm, "r1", rec("r1b", sdk.RealmScope, "t", 1)); err != nil {
		t.Fatal(err)
	}
	at := func(scope sdk.Scope, thread string, seq int64) sdk.ThreadPlace {
		return sdk.ThreadPlace{Scope: scope, Thread: thread, Seq: seq}
	}
	for _, tc := range []struct {
		name   string
		places []sdk.ThreadPlace
		want   []string
	}{
		{"none asked", nil, nil},
		{"one place", []sdk.ThreadPlace{at(sdk.RealmScope, "t", 2)}, []string{"r2"}},
		{"a crowded place", []sdk.ThreadPlace{at(sdk.RealmScope, "t", 3)}, []string{"r3a", "r3b"}},
		{"the other scope", []sdk.ThreadPlace{at(alice, "t", 3)}, []string{"a3"}},
		{"both scopes, twice", []sdk.ThreadPlace{at(sdk.RealmScope, "t", 2), at(alice, "t", 2), at(sdk.RealmScope, "t", 2)}, []string{"a2", "r2"}},
		{"an empty place", []sdk.ThreadPlace{at(sdk.RealmScope, "t", 9), at(alice, "t", 1), at(sdk.RealmScope, "none", 3)}, nil},
		{"a forgotten record", []sdk.ThreadPlace{at(sdk.RealmScope, "t", 4)}, nil},
		{"a superseded record", []sdk.ThreadPlace{at(sdk.RealmScope, "t", 1)}, []string{"r1b"}},
		{"around a gap", []sdk.ThreadPlace{at(sdk.RealmScope, "t", 3), at(sdk.RealmScope, "t", 4), at(sdk.RealmScope, "t", 5), at(sdk.IdentityScope("bob"), "t", 5)}, []string{"r3a", "r3b", "r5"}},
	} {
		got, err := s.ReadThread(ctx, realm, tc.places)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var ids []string
		for _, r := range got {
			if r.Realm != realm || r.Status != sdk.StatusActive || r.Thread == nil || !slices.Contains(tc.places, at(r.Scope, r.Thread.ID, r.Thread.Seq)) {
				t.Errorf("%s: answered %+v, not an active record of realm %s at a place asked", tc.name, r, realm)
			}
			ids = append(ids, r.ID)
		}
		slices.Sort(ids)
		if !slices.Equal(ids, tc.want) {
			t.Errorf("%s: answered %v, want %v", tc.name, ids, tc.want)
		}
	}
	if _, err := s.ReadThread(ctx, "", []sdk.ThreadPlace{at(sdk.RealmScope, "t", 2)}); !errors.Is(err, sdk.ErrInvalid) {
		t.Errorf("an empty realm: %v, want sdk.ErrInvalid", err)
	}
	// A crowded place answers its first sdk.MaxPlaceReads by id in byte
	// order ("Fz" first), whatever the database's collation.
	crowd := []sdk.Record{rec("Fz", sdk.RealmScope, "t", 9)}
	for i := range sdk.MaxPlaceReads + 4 {
		crowd = append(crowd, rec(fmt.Sprintf("f%02d", i), sdk.RealmScope, "t", 9))
	}
	if _, err := s.Remember(ctx, realm, crowd); err != nil {
		t.Fatal(err)
	}
	var first []string
	for _, r := range crowd[:sdk.MaxPlaceReads] {
		first = append(first, r.ID)
	}
	got, err := s.ReadThread(ctx, realm, []sdk.ThreadPlace{at(sdk.RealmScope, "t", 9), at(sdk.RealmScope, "t", 2)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	if want := slices.Sorted(slices.Values(append(first, "r2"))); !slices.Equal(ids, want) {
		t.Errorf("a place of %d records and another: answered %v, want %v", len(crowd), ids, want)
	}

	// The partial index serves the query (the table is too small for the
	// planner to prefer it unprompted).
	db := rawPool(t, schema)
	err = pgx.BeginTxFunc(ctx, db, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL enable_seqscan = off"); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, "EXPLAIN "+readThreadSQL, realm, []string{"realm"}, []string{"t"}, []int64{2}, []int32{sdk.MaxPlaceReads})
		if err != nil {
			return err
		}
		plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		// The index holds a place in id order: its first few are read
		// without sorting the place.
		if text := strings.Join(plan, "\n"); !strings.Contains(text, "records_by_thread") || strings.Contains(text, "Sort") {
			t.Errorf("the plan does not read records_by_thread in order:\n%s", text)
		}
		// In byte order, as sdk/index keeps a place, whatever the
		// database's collation (this test's cluster sorts in C anyway).
		var def string
		if err := tx.QueryRow(ctx, `SELECT indexdef FROM pg_indexes WHERE schemaname = $1 AND indexname = 'records_by_thread'`, schema).Scan(&def); err != nil {
			return err
		}
		if !strings.Contains(def, `scope, id COLLATE "C")`) {
			t.Errorf("records_by_thread is %s, want its places' ids in byte order", def)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestMigrationFoldsTagsInNFC opens a schema as version 12 left it: a tag
// stored as written, e and a combining accent, keyed so. The host sends
// every filter in NFC, so after migrating a filter naming the tag must
// find the record, and an exclusion must keep it out.
func TestMigrationFoldsTagsInNFC(t *testing.T) {
	ctx := context.Background()
	recs := []sdk.Record{
		{Scope: "realm", Kind: "fact", Trust: "application", Title: "Espresso order", Body: "Alice takes espresso without sugar.", Tags: []string{"cafe\u0301", "coffee"}},
		{Scope: "realm", Kind: "fact", Trust: "application", Title: "Espresso machine", Body: "The espresso machine needs descaling."},
	}
	schema, db := twinStoresOf(t, recs)
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE records SET tag_keys = ARRAY[E'cafe\u0301', 'coffee'] WHERE 'coffee' = ANY (tags)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM schema_migrations WHERE version >= 13`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	s := openPath(t, schema, "sql") // migrates from version 12
	for _, q := range []sdk.RecallQuery{
		{Realm: realm, Query: "espresso", Tags: []string{"caf\u00e9"}},
		{Realm: realm, Query: "espresso", ExcludeTags: []string{"CAF\u00c9"}},
	} {
		hits, err := s.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		want := "Espresso order"
		if len(q.ExcludeTags) > 0 {
			want = "Espresso machine"
		}
		if len(hits) != 1 || hits[0].Record.Title != want {
			t.Errorf("tags %q, exclude %q: %d hits, want %q alone", q.Tags, q.ExcludeTags, len(hits), want)
		}
	}
}

// TestMigrationRewritesOnlyChangedTagKeys: migration 13 rewrote every
// record holding a non-ASCII tag, one statement each, though the host had
// sent tags in NFC since the upgrade before, whose keys do not change: at
// a million such records the first start spent minutes in Configure
// (past supervisor.configure_timeout_ms's default, rolled back and
// retried at every start). A record whose keys stand is not written.
func TestMigrationRewritesOnlyChangedTagKeys(t *testing.T) {
	ctx := context.Background()
	recs := []sdk.Record{
		{Scope: "realm", Kind: "fact", Trust: "application", Title: "Espresso order", Body: "Alice takes espresso without sugar.", Tags: []string{"cafe\u0301"}},
		{Scope: "realm", Kind: "fact", Trust: "application", Title: "Cafe hours", Body: "The cafe opens at eight.", Tags: []string{"caf\u00e9", "hours"}},
	}
	schema, db := twinStoresOf(t, recs)
	versions := func() map[string]string {
		rows, err := db.Query(ctx, `SELECT title, xmin::text FROM records`)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		var title, xmin string
		if _, err := pgx.ForEachRow(rows, []any{&title, &xmin}, func() error { out[title] = xmin; return nil }); err != nil {
			t.Fatal(err)
		}
		return out
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE records SET tag_keys = tags WHERE title = 'Espresso order'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM schema_migrations WHERE version >= 13`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	before := versions()
	openPath(t, schema, "sql") // migrates from version 12
	after := versions()
	if before["Cafe hours"] != after["Cafe hours"] {
		t.Errorf("a record whose tag keys were right was rewritten (xmin %s, then %s)", before["Cafe hours"], after["Cafe hours"])
	}
	var keys []string
	if err := db.QueryRow(ctx, `SELECT tag_keys FROM records WHERE title = 'Espresso order'`).Scan(&keys); err != nil {
		t.Fatal(err)
	}
	if want := foldTags([]string{"caf\u00e9"}); !slices.Equal(keys, want) {
		t.Errorf("the decomposed tag is keyed %q, want %q", keys, want)
	}
}

// TestMigrationSaysWhatItDoes: a schema migrating at an upgrade (migration
// 13 over a large store) held the plugin's Configure with nothing in its
// log; the host's "still waiting" lines were all an operator read. The
// plugin says when it migrates, from which version, and when it is done.
func TestMigrationSaysWhatItDoes(t *testing.T) {
	ctx := context.Background()
	schema, db := twinStoresOf(t, []sdk.Record{{Scope: "realm", Kind: "fact", Trust: "application", Title: "Espresso order", Body: "Alice takes espresso."}})
	if _, err := db.Exec(ctx, `DELETE FROM schema_migrations WHERE version >= 13`); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs strings.Builder
	openStoreWith(t, configJSON(schema, "replica", sqlOnly), func(s *Store) {
		s.log = slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
			mu.Lock()
			defer mu.Unlock()
			return logs.Write(p)
		}), nil))
	})
	mu.Lock()
	got := logs.String()
	mu.Unlock()
	for _, want := range []string{"migrating the schema", "from_version=12", fmt.Sprintf("to_version=%d", schemaVersion), "migrated the schema"} {
		if !strings.Contains(got, want) {
			t.Errorf("the migration's log lacks %q:\n%s", want, got)
		}
	}
}

// writerFunc is a func as an io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
