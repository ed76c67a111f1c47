package sqlite

import (
	"context"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestIndexRanksAsFTS5 holds recall (sdk/index) to FTS5's bm25 over the
// same records: two realms in the store and only the queried one in the
// reference table (a realm is ranked by its own statistics, so the other
// realm's 1,000 records must not move a score), some records superseded,
// some forgotten, some expired, and scoped, unscoped, tagged and excluding
// queries give the same top 10, in the same order, with the same scores.
func TestIndexRanksAsFTS5(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 4,000 records")
	}
	ctx := context.Background()
	s, clk := open(t, nil)
	c := newCorpus()
	const n = 3000
	var ids []string
	for start := 0; start < n+1000; start += 500 {
		realm := "default"
		if start >= n {
			realm = "other"
		}
		batch := make([]sdk.Record, 0, 500)
		for i := start; i < start+500; i++ {
			r := c.record(i)
			if i%50 == 7 {
				r.ExpiresAt = clk.now().Add(30 * 60e9) // expires before the queries run
			}
			batch = append(batch, r)
		}
		got, err := s.Remember(ctx, realm, batch)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, got...)
	}
	for i := 0; i < n; i += 37 {
		r := c.record(n + 1000 + i)
		r.Scope = benchScope(i)
		if _, err := s.Supersede(ctx, "default", ids[i], r); err != nil {
			t.Fatal(err)
		}
	}
	var forget []string
	for i := 5; i < n; i += 41 {
		forget = append(forget, ids[i])
	}
	if _, err := s.Forget(ctx, "default", forget); err != nil {
		t.Fatal(err)
	}
	clk.advance(3600e9)

	ref := fts5Ref(t, s, "default")
	nowMs := clk.now().UnixMilli()
	compared := 0
	for i := range 300 {
		q := sdk.RecallQuery{Realm: "default", Query: c.query(i, n), Limit: 10,
			Scopes: []sdk.Scope{benchScope(i + 1), sdk.RealmScope}}
		switch i % 5 {
		case 1:
			q.Scopes = nil
		case 2:
			q.Tags = []string{c.tags[i%len(c.tags)]}
		case 3:
			q.ExcludeIDs = ids[i : i+20]
		case 4:
			q.ExcludeTags = []string{c.tags[i%len(c.tags)]}
		}
		got, err := s.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if err := sameAsRef(got, refRecall(t, ref, q, nowMs)); err != nil {
			t.Fatalf("query %d %q: %v", i, q.Query, err)
		}
		compared += len(got)
	}
	if compared < 1000 {
		t.Errorf("only %d hits compared", compared)
	}
}
