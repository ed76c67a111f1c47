package sqlite

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/memhost/memhost/sdk"
	memindex "github.com/memhost/memhost/sdk/index"
)

// TestIndexRanksAsFTS5 holds sdk/index to this provider's FTS5 recall: the
// same records (two realms sharing the one FTS5 table, some superseded,
// some forgotten, some expired) and the same queries give the same top 10,
// in the same order, with the same scores. That is what lets this provider
// answer recall from the index later without changing a single answer.
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

	ix := indexOf(t, s)
	now := clk.now()
	bitExact, compared := 0, 0
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
		}
		want, err := s.Recall(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		scopes := make([]string, len(q.Scopes))
		for k, sc := range q.Scopes {
			scopes[k] = string(sc)
		}
		got, err := ix.Search(memindex.Query{Realm: q.Realm, Terms: memindex.QueryTerms(q.Query), Scopes: scopes,
			ExcludeIDs: q.ExcludeIDs, Tags: q.Tags, NowMs: now.UnixMilli(), Limit: q.Limit})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("query %d %q: index answers %d hits, FTS5 %d", i, q.Query, len(got), len(want))
		}
		for k := range got {
			w := want[k]
			if got[k].ID != w.Record.ID || math.Abs(got[k].Score-w.Score) > 1e-12*math.Abs(w.Score) {
				t.Fatalf("query %d %q hit %d: index %s (%v), FTS5 %s (%v)", i, q.Query, k, got[k].ID, got[k].Score, w.Record.ID, w.Score)
			}
			compared++
			if got[k].Score == w.Score {
				bitExact++
			}
		}
	}
	t.Logf("%d hits compared, same order; %d scores bit-identical to FTS5's", compared, bitExact)
}

// indexOf builds an index from the active rows, with the rowid as Seq so
// ties break as FTS5's "rowid DESC" does.
func indexOf(t *testing.T, s *Store) *memindex.Index {
	ix, err := memindex.New(memindex.Options{Weights: fieldWeights[:]})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := s.db.r.Query(`SELECT seq, realm, id, scope, expires_ms, tags, title, description, body FROM records WHERE status = 'active'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var d memindex.Doc
		var seq int64
		var tags, title, desc, body string
		if err := rows.Scan(&seq, &d.Realm, &d.ID, &d.Scope, &d.ExpiresMs, &tags, &title, &desc, &body); err != nil {
			t.Fatal(err)
		}
		if tags != "" {
			d.Tags = strings.Split(tags, "\n")
		}
		d.Seq = uint64(seq)
		d.Fields = [][]string{memindex.FieldTerms(strings.Join(d.Tags, " ")), memindex.FieldTerms(title), memindex.FieldTerms(desc), memindex.FieldTerms(body)}
		if err := ix.Put(d); err != nil {
			t.Fatal(fmt.Errorf("put %s: %w", d.ID, err))
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return ix
}
