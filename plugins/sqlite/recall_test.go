package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
)

// TestRecallMatchesFTS5 holds recall to the reference (FTS5's bm25 over
// the same records): same hits, order and scores, also after deletes and
// supersedes.
func TestRecallMatchesFTS5(t *testing.T) {
	s, clk := open(t, nil)
	ctx := context.Background()
	c := newCorpus()
	const n = 800
	ids := mustRemember(t, s, realm, benchRecords(0, n)...)
	if _, err := s.Forget(ctx, realm, ids[:n/10]); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[n/10 : n/10+20] {
		if _, err := s.Supersede(ctx, realm, id, sdk.Record{Title: "replaced " + id, Body: "replacement body"}); err != nil {
			t.Fatal(err)
		}
	}
	checkIndex(t, s)
	ref := fts5Ref(t, s, realm)
	for i := range 60 {
		q := sdk.RecallQuery{Realm: realm, Query: c.query(i, n), Limit: 20}
		if err := sameAsRef(mustRecall(t, s, q), refRecall(t, ref, q, clk.now().UnixMilli())); err != nil {
			t.Errorf("query %q: %v", q.Query, err)
		}
	}
}

// TestRecallWidensWhenRareTermsFindTooFew: a query whose rare term finds
// one record still fills its limit from the common terms.
func TestRecallWidensWhenRareTermsFindTooFew(t *testing.T) {
	s, _ := open(t, nil)
	var recs []sdk.Record
	for i := range 30 {
		recs = append(recs, rec(alice, fmt.Sprintf("Common walrus %d", i), "walrus habits"))
	}
	recs = append(recs, rec(alice, "Rare narwhal", "a narwhal"))
	ids := mustRemember(t, s, realm, recs...)
	hits := mustRecall(t, s, sdk.RecallQuery{Realm: realm, Query: "narwhal walrus", Limit: 10})
	if len(hits) != 10 || hits[0].Record.ID != ids[30] {
		t.Fatalf("hits %d, first %v; want 10 with the narwhal first", len(hits), hits[0].Record.ID)
	}
	// Filters that leave few rare matches widen too.
	hits = mustRecall(t, s, sdk.RecallQuery{Realm: realm, Query: "narwhal walrus", Limit: 5, ExcludeIDs: []string{ids[30]}})
	if len(hits) != 5 {
		t.Errorf("with the rare record excluded: %d hits, want 5", len(hits))
	}
}

func FuzzQuery(f *testing.F) {
	for _, seed := range []string{
		`NEAR(a b, 3)`, `"`, `a"b`, `*`, `a*`, `AND`, `a OR b NOT c`, `title:x`, `{a b}:c`, `^a`, `(a`, `-a +b`,
		"\x00", "\xff", `北京天气`, `ｆｕｌｌｗｉｄｔｈ`, `e\u0301`, strings.Repeat("long", 40), `''`, `\`, `a:b:c`,
	} {
		f.Add(seed)
	}
	db, err := sql.Open("sqlite3", ":memory:")
	if err != nil {
		f.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE VIRTUAL TABLE records_fts USING fts5 (tags, title, description, body, tokenize = 'ascii');
		INSERT INTO records_fts VALUES ('a', 'near and', 'or not', 'title body');`); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, q string) {
		terms := index.QueryTerms(q)
		if len(terms) > index.MaxQueryTerms {
			t.Fatalf("%d terms", len(terms))
		}
		if len(terms) == 0 {
			return
		}
		expr := matchExpr(terms)
		rows, err := db.Query(`SELECT rowid, `+bm25Call+` FROM records_fts WHERE records_fts MATCH ?`, expr)
		if err != nil {
			t.Fatalf("query %q: MATCH %q: %v", q, expr, err)
		}
		for rows.Next() {
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("query %q: MATCH %q: %v", q, expr, err)
		}
		rows.Close()
		// Each term is one phrase of one token: FTS5 sees exactly the
		// tokens recall planned with.
		for _, term := range terms {
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM records_fts WHERE records_fts MATCH ?`, `"`+strings.ReplaceAll(term, `"`, `""`)+`" AND "`+strings.ReplaceAll(term, `"`, `""`)+`"`).Scan(&n); err != nil {
				t.Fatalf("term %q: %v", term, err)
			}
		}
	})
}

func TestConcurrentUse(t *testing.T) {
	s, _ := open(t, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	kept := make([][]string, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				scope := sdk.IdentityScope(fmt.Sprintf("w%d", w))
				ids, err := s.Remember(ctx, realm, []sdk.Record{
					rec(scope, fmt.Sprintf("worker %d note %d", w, i), "shared concurrency word"),
					rec(scope, fmt.Sprintf("worker %d temp %d", w, i), "shared concurrency temp"),
				})
				if err != nil {
					errs <- err
					return
				}
				kept[w] = append(kept[w], ids[0])
				if _, err := s.Forget(ctx, realm, ids[1:]); err != nil {
					errs <- err
				}
				if err := s.MarkUsed(ctx, realm, ids[:1], time.Time{}); err != nil {
					errs <- err
				}
			}
		}()
	}
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				if _, err := s.Recall(ctx, sdk.RecallQuery{Realm: realm, Query: "shared concurrency word note"}); err != nil {
					errs <- err
				}
				if _, err := s.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: 5}); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var all []string
	for _, ids := range kept {
		all = append(all, ids...)
	}
	got := mustGet(t, s, realm, all...)
	if len(got) != 100 {
		t.Errorf("%d of 100 kept records found", len(got))
	}
	for _, r := range got {
		if r.UseCount != 1 {
			t.Errorf("record %s used %d times, want 1", r.ID, r.UseCount)
		}
	}
	if hits := mustRecall(t, s, sdk.RecallQuery{Realm: realm, Query: "temp"}); len(hits) != 0 {
		t.Errorf("forgotten records recalled: %d", len(hits))
	}
	checkIndex(t, s)
}

// TestPostingBudgetIsIgnored: configurations from before the index still
// load, and recall stays exact.
func TestPostingBudgetIsIgnored(t *testing.T) {
	s := New()
	t.Cleanup(func() { s.Close() })
	if err := s.Configure(context.Background(), json.RawMessage(`{"path": "`+t.TempDir()+`/m.db", "posting_budget": 700}`)); err != nil {
		t.Fatal(err)
	}
}

// TestFiltersMatchReference: scopes, expiry, excluded ids and tags give
// the reference's answers.
func TestFiltersMatchReference(t *testing.T) {
	s, c := open(t, nil)
	var recs []sdk.Record
	for i := range 120 {
		scope := []sdk.Scope{alice, bob, team, sdk.RealmScope}[i%4]
		r := rec(scope, fmt.Sprintf("otter note %d", i), strings.Repeat("otter ", 1+i%5)+"river", []string{"Wild", "zoo", "Rare"}[i%3])
		if i%7 == 0 {
			r.ExpiresAt = c.now().Add(time.Minute)
		}
		recs = append(recs, r)
	}
	ids := mustRemember(t, s, realm, recs...)
	mustRemember(t, s, "other", rec(alice, "otter elsewhere", "otter otter"))
	c.advance(2 * time.Minute) // every seventh record has expired
	queries := []sdk.RecallQuery{
		{},
		{Scopes: []sdk.Scope{bob}},
		{Scopes: []sdk.Scope{alice, team}},
		{ExcludeIDs: ids[:30]},
		{ExcludeTags: []string{"WILD"}},
		{Tags: []string{"zoo"}},
		{Scopes: []sdk.Scope{alice}, ExcludeIDs: ids[1:9], ExcludeTags: []string{"rare"}},
	}
	ref := fts5Ref(t, s, realm)
	for i, q := range queries {
		q.Realm, q.Query, q.Limit = realm, "otter river", 25
		hits := mustRecall(t, s, q)
		if err := sameAsRef(hits, refRecall(t, ref, q, c.now().UnixMilli())); err != nil {
			t.Errorf("query %d: %v", i, err)
		}
		if len(hits) == 0 {
			t.Errorf("query %d: no hits", i)
		}
		for _, h := range hits {
			if !h.Record.Recallable(c.now()) || h.Record.Realm != realm {
				t.Errorf("query %d: answered %s (realm %s, expires %v)", i, h.Record.ID, h.Record.Realm, h.Record.ExpiresAt)
			}
		}
	}
}

// checkIndex compares the recall index with the active records.
func checkIndex(t *testing.T, s *Store) {
	t.Helper()
	s.db.awaitIndex(context.Background())
	var want int
	if err := s.db.r.QueryRow("SELECT count(*) FROM records WHERE status = 'active'").Scan(&want); err != nil {
		t.Fatal(err)
	}
	if got := s.db.ix.Len(); got != want {
		t.Errorf("the index holds %d records, the table %d active ones", got, want)
	}
}

// A window ending at the Unix epoch is a real end: 0 is an open end on the
// wire and in the index, and an end there used to read as one, so until
// the epoch answered every record and since the epoch the earlier ones too.
func TestWindowEndingAtTheEpoch(t *testing.T) {
	s, _ := open(t, nil)
	old := rec(alice, "moon landing", "apollo eleven landed")
	old.OccurredAt = time.Date(1969, 7, 20, 20, 17, 0, 0, time.UTC)
	recent := rec(alice, "apollo anniversary", "apollo eleven anniversary party")
	recent.OccurredAt = time.Date(2019, 7, 20, 0, 0, 0, 0, time.UTC)
	ids := mustRemember(t, s, realm, old, recent)
	epoch := time.Unix(0, 0).UTC()
	for _, tc := range []struct {
		what         string
		since, until time.Time
		want         []string
	}{
		{"until the epoch", time.Time{}, epoch, ids[:1]},
		{"since the epoch", epoch, time.Time{}, ids[1:]},
		{"since half a millisecond before the epoch", epoch.Add(-500 * time.Microsecond), time.Time{}, ids[1:]},
		{"until half a millisecond before the epoch", time.Time{}, epoch.Add(-500 * time.Microsecond), ids[:1]},
	} {
		got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: "apollo eleven", Since: tc.since, Until: tc.until})
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: recall answered %v, want %v", tc.what, got, tc.want)
		}
	}
}

// A word recalls its record whatever case or Unicode form either side
// wrote it in: final sigma is a sigma (tags already matched so), and a
// letter with a combining accent is its precomposed form.
func TestSameWordInAnyFormRecalls(t *testing.T) {
	s, _ := open(t, nil)
	for _, tc := range []struct{ stored, query string }{
		{"ΟΔΟΣ ΑΘΗΝΑΣ", "οδος"},
		{"Meeting at the cafe\u0301", "café"},
		{"Crème brûlée recipe", "cre\u0300me"},
	} {
		ids := mustRemember(t, s, realm, rec(alice, "note", tc.stored))
		got := recallIDs(t, s, sdk.RecallQuery{Realm: realm, Query: tc.query})
		if len(got) == 0 || got[0] != ids[0] {
			t.Errorf("record %q: recall %q answered %v, want %s first", tc.stored, tc.query, got, ids[0])
		}
	}
}
