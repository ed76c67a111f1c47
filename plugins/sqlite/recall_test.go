package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// fts5Scores answers -bm25 of every active record of realm matching any
// of the query's terms, straight from FTS5: the reference recall must equal.
func fts5Scores(t *testing.T, s *Store, query string) map[string]float64 {
	t.Helper()
	rows, err := s.db.r.Query(`SELECT r.id, `+bm25Call+` FROM records_fts JOIN records AS r ON r.seq = records_fts.rowid
		WHERE records_fts MATCH ? AND r.realm = ?`, matchExpr(queryTerms(query)), realm)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]float64{}
	for rows.Next() {
		var id string
		var bm25 float64
		if err := rows.Scan(&id, &bm25); err != nil {
			t.Fatal(err)
		}
		out[id] = -bm25
	}
	return out
}

func closeTo(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// TestPlannedRecallScoresAreFTS5Scores checks the query plan: whatever
// terms FTS5 matches and whichever are added in Go, a hit's score is its
// FTS5 bm25 over every query term, also after deletes and supersedes.
func TestPlannedRecallScoresAreFTS5Scores(t *testing.T) {
	s, _ := open(t, nil)
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
	checkTotals(t, s)
	split := 0
	for i := range 60 {
		query := c.query(i, n)
		want := fts5Scores(t, s, query)
		for _, budget := range []int{0, 1, 50, 500, math.MaxInt32} {
			s.db.opts.postingBudget = budget
			hits := mustRecall(t, s, sdk.RecallQuery{Realm: realm, Query: query, Limit: 20})
			if (budget == 0 || budget == math.MaxInt32) && len(hits) != min(20, len(want)) {
				t.Errorf("query %q: %d hits, FTS5 matches %d", query, len(hits), len(want))
			}
			for k, h := range hits {
				ref, ok := want[h.Record.ID]
				switch {
				case !ok:
					t.Errorf("query %q budget %d: hit %s does not match in FTS5", query, budget, h.Record.ID)
				case !closeTo(h.Score, ref):
					t.Errorf("query %q budget %d: hit %s scores %v, FTS5 %v", query, budget, h.Record.ID, h.Score, ref)
				case k > 0 && h.Score > hits[k-1].Score:
					t.Errorf("query %q budget %d: hits out of order", query, budget)
				}
			}
			if budget == 1 && len(queryTerms(query)) > 1 {
				split++
			}
		}
	}
	if split == 0 {
		t.Error("no query exercised the split plan")
	}
}

// TestRecallWidensWhenRareTermsFindTooFew: a query whose rare term finds
// one record still fills its limit from the common terms.
func TestRecallWidensWhenRareTermsFindTooFew(t *testing.T) {
	s, _ := open(t, nil, func(o *options) { o.postingBudget = 5 })
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
		terms := queryTerms(q)
		if len(terms) > maxQueryTerms {
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
	checkTotals(t, s)
}

// TestDocFreqCacheFollowsWrites: cached document frequencies stay exact
// across small writes, forgets and supersedes (scores computed from them
// keep equal FTS5's), and a bulk write empties the cache.
func TestDocFreqCacheFollowsWrites(t *testing.T) {
	s, _ := open(t, nil, func(o *options) { o.postingBudget = 1 })
	ctx := context.Background()
	const query = "walrus tusk ivory"
	check := func(step string) {
		t.Helper()
		want := fts5Scores(t, s, query)
		hits := mustRecall(t, s, sdk.RecallQuery{Realm: realm, Query: query, Limit: 100})
		if len(hits) != len(want) {
			t.Fatalf("%s: %d hits, FTS5 matches %d", step, len(hits), len(want))
		}
		for _, h := range hits {
			if !closeTo(h.Score, want[h.Record.ID]) {
				t.Errorf("%s: %s scores %v, FTS5 %v", step, h.Record.ID, h.Score, want[h.Record.ID])
			}
		}
	}
	ids := mustRemember(t, s, realm, rec(alice, "walrus", "walrus tusk"), rec(alice, "tusk", "ivory tusk tusk"), rec(alice, "other", "unrelated"))
	check("first query fills the cache")
	var dfs [3]int64
	var cached [3]bool
	s.db.df.lookup([]string{"walrus", "tusk", "ivory"}, dfs[:], cached[:])
	if cached != [3]bool{true, true, true} || dfs != [3]int64{1, 2, 1} {
		t.Fatalf("cache after the first query: %v %v", cached, dfs)
	}
	mustRemember(t, s, realm, rec(bob, "walrus again", "walrus walrus ivory"))
	check("after a small write")
	if _, err := s.Forget(ctx, realm, ids[:1]); err != nil {
		t.Fatal(err)
	}
	check("after a forget")
	if _, err := s.Supersede(ctx, realm, ids[1], rec(alice, "tusk v2", "no ivory now")); err != nil {
		t.Fatal(err)
	}
	check("after a supersede")
	s.db.df.lookup([]string{"walrus", "tusk", "ivory"}, dfs[:], cached[:])
	if dfs != [3]int64{1, 1, 2} {
		t.Errorf("cached frequencies %v, want [1 1 2]", dfs)
	}
	var bulk []sdk.Record
	for i := range maxExactUpdate + 1 {
		bulk = append(bulk, rec(team, fmt.Sprintf("bulk %d", i), "tusk"))
	}
	mustRemember(t, s, realm, bulk...)
	s.db.df.lookup([]string{"walrus"}, dfs[:1], cached[:1])
	if cached[0] {
		t.Error("a bulk write kept the cache")
	}
	check("after a bulk write")
}

func TestPostingBudgetComesFromConfig(t *testing.T) {
	s := newStore()
	defer s.Close()
	if err := s.Configure(context.Background(), json.RawMessage(`{"path": "`+t.TempDir()+`/m.db", "posting_budget": 700}`)); err != nil {
		t.Fatal(err)
	}
	if s.db.opts.postingBudget != 700 {
		t.Errorf("posting budget %d, want 700", s.db.opts.postingBudget)
	}
}

// TestFilterStrategiesAgree: ranking first and filtering in Go answers
// what filtering first in SQL answers, for every kind of filter, and the
// planner's choice between them answers the same.
func TestFilterStrategiesAgree(t *testing.T) {
	s, c := open(t, nil)
	ctx := context.Background()
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
	for i, q := range queries {
		q.Realm, q.Query = realm, "otter river"
		tx, err := s.db.r.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		match := matchExpr(queryTerms(q.Query))
		f := newRecallFilter(q, c.now(), 1)
		ranked, complete, err := rankThenFilter(ctx, tx, match, &f, 1000)
		if err != nil || !complete {
			t.Fatalf("rankThenFilter: complete %v, %v", complete, err)
		}
		ranked = ranked[:min(len(ranked), 25)]
		filtered, err := filterThenRank(ctx, tx, match, &f, 25)
		if err != nil {
			t.Fatal(err)
		}
		var planned [2][]candidate
		for k, share := range []float64{1, 0.01} {
			f := newRecallFilter(q, c.now(), share)
			if planned[k], err = candidates(ctx, tx, match, &f, 25); err != nil {
				t.Fatal(err)
			}
		}
		tx.Rollback()
		same := func(a, b candidate) bool { return a.hit.Record.ID == b.hit.Record.ID && a.hit.Score == b.hit.Score }
		if len(ranked) == 0 || !slices.EqualFunc(ranked, filtered, same) {
			t.Errorf("query %d: rank-first %d hits, filter-first %d hits, or they differ", i, len(ranked), len(filtered))
		}
		if !slices.EqualFunc(planned[0], filtered, same) || !slices.EqualFunc(planned[1], filtered, same) {
			t.Errorf("query %d: planned answers differ", i)
		}
		for _, h := range ranked {
			if !h.hit.Record.Recallable(c.now()) || h.hit.Record.Realm != realm {
				t.Errorf("query %d: answered %s (realm %s, expires %v)", i, h.hit.Record.ID, h.hit.Record.Realm, h.hit.Record.ExpiresAt)
			}
		}
	}
}

// checkTotals compares fts_totals and scope_totals with a count of the
// active records and of their tokens.
func checkTotals(t *testing.T, s *Store) {
	t.Helper()
	var docs, tokens, wantDocs, wantTokens int64
	if err := s.db.r.QueryRow("SELECT docs, tokens FROM fts_totals").Scan(&docs, &tokens); err != nil {
		t.Fatal(err)
	}
	if err := s.db.r.QueryRow("SELECT count(*), coalesce(sum(ntok), 0) FROM records WHERE status = 'active'").Scan(&wantDocs, &wantTokens); err != nil {
		t.Fatal(err)
	}
	if docs != wantDocs || tokens != wantTokens {
		t.Errorf("fts_totals = %d docs %d tokens, records hold %d and %d", docs, tokens, wantDocs, wantTokens)
	}
	var mismatched int
	if err := s.db.r.QueryRow(`SELECT count(*) FROM (
		SELECT realm, scope, count(*) AS n FROM records WHERE status = 'active' GROUP BY realm, scope) AS a
		FULL JOIN (SELECT realm, scope, docs FROM scope_totals WHERE docs != 0) AS b USING (realm, scope)
		WHERE a.n IS NOT b.docs`).Scan(&mismatched); err != nil {
		t.Fatal(err)
	}
	if mismatched > 0 {
		t.Errorf("scope_totals disagrees with the records on %d scopes", mismatched)
	}
}
