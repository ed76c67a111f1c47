package markdown

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/tokenize"
)

// TestScoringRules pins each rule of DESIGN section 8: per query term +5
// tag, +4 title term (else +1 for a substring of 5+ bytes), +2 body term
// (else +1 substring); keep a score of 2 or more.
func TestScoringRules(t *testing.T) {
	tests := []struct {
		name  string
		rec   sdk.Record
		query string
		want  float64 // 0: not recalled
	}{
		{"tag term", sdk.Record{Title: "x", Body: "y", Tags: []string{"deploy"}}, "deploy", 5},
		{"tag compared case-folded", sdk.Record{Title: "x", Body: "y", Tags: []string{"DePloy"}}, "DEPLOY", 5},
		{"term inside a multi-word tag", sdk.Record{Title: "x", Body: "y", Tags: []string{"blue-green deploy"}}, "green", 5},
		{"title term", sdk.Record{Title: "Deploy notes", Body: "y"}, "deploy", 4},
		{"body term", sdk.Record{Title: "x", Body: "we deploy daily"}, "deploy", 2},
		{"description counts as body", sdk.Record{Title: "x", Description: "deploy steps", Body: "y"}, "deploy", 2},
		{"every field at once", sdk.Record{Title: "Deploy", Body: "deploy", Tags: []string{"deploy"}}, "deploy", 11},
		{"title substring alone is 1: dropped", sdk.Record{Title: "Redeployment", Body: "y"}, "deploy", 0},
		{"body substring alone is 1: dropped", sdk.Record{Title: "x", Body: "redeployment"}, "deploy", 0},
		{"title substring + body substring", sdk.Record{Title: "Redeployment", Body: "redeployment"}, "deploy", 2},
		{"title substring + body term", sdk.Record{Title: "Redeployment", Body: "deploy"}, "deploy", 3},
		{"title term + body substring", sdk.Record{Title: "Deploy", Body: "redeploys"}, "deploy", 5},
		{"title substring needs 5 bytes", sdk.Record{Title: "Redeployment", Body: "y", Tags: []string{"ploy"}}, "ploy", 5},
		{"body substring has no length floor", sdk.Record{Title: "x", Body: "redeployment", Tags: []string{"ploy"}}, "ploy", 6},
		// Terms are stemmed ("rollbacks" is the term "rollback"), text words
		// are not, so these pick words whose stems are not the query's.
		{"substrings of two terms add up", sdk.Record{Title: "x", Body: "redeployments prerollbacks"}, "deploy rollback", 2},
		{"substring inside a stopword", sdk.Record{Title: "Themselves", Body: "themselves"}, "emselves", 2},
		{"no match", sdk.Record{Title: "x", Body: "y"}, "deploy", 0},
		{"stopwords never match", sdk.Record{Title: "The", Body: "the the"}, "the", 0},
		{"terms add up across the query", sdk.Record{Title: "Deploy", Body: "rollback"}, "deploy rollback", 6},
		{"repeated query terms count once", sdk.Record{Title: "Deploy", Body: "y"}, "deploy deploy DEPLOY", 4},
		{"CJK bigram in title", sdk.Record{Title: "東京都庁", Body: "y"}, "東京", 4},
		{"CJK query bigrams", sdk.Record{Title: "x", Body: "東京都に住む"}, "東京都", 4},
		{"non-Latin script", sdk.Record{Title: "Развёртывание", Body: "y"}, "развёртывание", 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newTestProvider(t, modes[0])
			r := tt.rec
			r.Scope, r.Kind = alice, sdk.KindFact
			id := tp.remember(t, "default", r)[0]
			hits := tp.recall(t, sdk.RecallQuery{Query: tt.query})
			if tt.want == 0 {
				if len(hits) != 0 {
					t.Fatalf("recalled with score %v, want nothing", hits[0].Score)
				}
				return
			}
			if len(hits) != 1 || hits[0].Record.ID != id || hits[0].Score != tt.want {
				t.Fatalf("hits = %+v, want %s scoring %v", hits, id, tt.want)
			}
			if naive := naiveScore(&hits[0].Record, tokenize.Terms(tt.query)); float64(naive) != tt.want {
				t.Fatalf("the reference scorer says %d; the table is wrong", naive)
			}
		})
	}
}

// naiveScore is the scoring rule written as plainly as possible, to check
// the index against.
func naiveScore(r *sdk.Record, terms []string) int {
	set := func(ss ...string) map[string]bool {
		m := map[string]bool{}
		for _, s := range ss {
			for _, t := range tokenize.Terms(s) {
				m[t] = true
			}
		}
		return m
	}
	lower := func(s string) string { return strings.Map(unicode.ToLower, s) }
	tagTerms, titleTerms, bodyTerms := set(r.Tags...), set(r.Title), set(r.Description, r.Body)
	title, body := lower(r.Title), lower(r.Description+"\n"+r.Body)
	score := 0
	for _, t := range terms {
		if tagTerms[t] {
			score += 5
		}
		if titleTerms[t] {
			score += 4
		} else if len(t) >= 5 && strings.Contains(title, t) {
			score++
		}
		if bodyTerms[t] {
			score += 2
		} else if strings.Contains(body, t) {
			score++
		}
	}
	return score
}

// TestIndexMatchesReference checks recall over random corpora built to
// have many substring relations against the reference scorer, through
// adds, edits and removals (so also across compactions).
func TestIndexMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	syll := []string{"de", "ploy", "ment", "roll", "back", "re", "the", "se", "lves", "東京", "都", "ß", "ÉT", "42", "7", "a", "io", "Ü"}
	word := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(3) {
			b.WriteString(syll[rng.IntN(len(syll))])
		}
		return b.String()
	}
	text := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = word()
		}
		return strings.Join(ws, []string{" ", "-", ", ", "\n", "/"}[rng.IntN(5)])
	}
	tp := newTestProvider(t, modes[0])
	live := map[string]bool{}
	for round := range 5 {
		var batch []sdk.Record
		for range 150 {
			r := sdk.Record{Scope: sdk.IdentityScope(fmt.Sprint("u", rng.IntN(3))), Kind: sdk.KindFact, Title: text(1 + rng.IntN(4)), Description: text(rng.IntN(3)), Body: text(rng.IntN(12))}
			for range rng.IntN(3) {
				r.Tags = append(r.Tags, strings.TrimSpace(text(1)))
			}
			if r.Validate() == nil {
				batch = append(batch, r)
			}
		}
		for _, id := range tp.remember(t, "default", batch...) {
			live[id] = true
		}
		// Churn: forget some, supersede some (metadata and text changes).
		ids := slices.Sorted(func(yield func(string) bool) {
			for id := range live {
				if !yield(id) {
					return
				}
			}
		})
		churn := ids[:len(ids)/5]
		for _, id := range churn[:len(churn)/4] {
			if _, err := tp.Supersede(ctx, "default", id, sdk.Record{Title: text(2), Body: text(5)}); err != nil && !strings.Contains(err.Error(), "superseded") {
				t.Fatal(err)
			}
		}
		if _, err := tp.Forget(ctx, "default", churn[len(churn)/4:]); err != nil {
			t.Fatal(err)
		}
		for _, id := range churn {
			delete(live, id)
		}
		for q := range 20 {
			query := text(1 + rng.IntN(3))
			if q%7 == 0 {
				query = syll[rng.IntN(len(syll))]
			}
			compareWithReference(t, tp, query, fmt.Sprintf("round %d", round))
		}
	}
}

func compareWithReference(t *testing.T, tp *testProvider, query, label string) {
	t.Helper()
	terms := tokenize.Terms(query)
	got := map[string]float64{}
	for _, h := range tp.recall(t, sdk.RecallQuery{Query: query, Limit: 1 << 20}) {
		got[h.Record.ID] = h.Score
	}
	tp.st.idx.RLock()
	want := map[string]float64{}
	for _, ri := range tp.st.realms {
		for _, d := range ri.docs {
			if d == nil || !d.rec.Recallable(tp.clock.Now()) {
				continue
			}
			if s := naiveScore(&d.rec, terms); s >= 2 {
				want[d.rec.ID] = float64(s)
			}
		}
	}
	tp.st.idx.RUnlock()
	if len(got) != len(want) {
		t.Fatalf("%s: query %q: index recalls %d records, reference %d", label, query, len(got), len(want))
	}
	for id, s := range want {
		if got[id] != s {
			t.Fatalf("%s: query %q: record %s scores %v, reference %v", label, query, id, got[id], s)
		}
	}
}

func TestTieOrderAndLimit(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	var ids []string
	for i := range 15 {
		ids = append(ids, tp.remember(t, "default", rec(alice, fmt.Sprint("harbor ", i), "boats"))[0])
		if i%5 != 4 {
			tp.clock.Advance(time.Second) // every fifth shares the next one's time
		}
	}
	strong := tp.remember(t, "default", rec(alice, "harbor boats", "harbor"))[0]
	tp.clock.Advance(time.Second)
	hits := tp.recall(t, sdk.RecallQuery{Query: "harbor", Limit: 100})
	if len(hits) != 16 || hits[0].Record.ID != strong || hits[0].Score != 6 {
		t.Fatalf("best hit %v (of %d), want %s scoring 6", hits[0], len(hits), strong)
	}
	for i := 2; i < len(hits); i++ {
		a, b := hits[i-1].Record, hits[i].Record
		if hits[i-1].Score != hits[i].Score {
			t.Fatalf("scores differ in a tie group: %v", hits)
		}
		if a.UpdatedAt.Before(b.UpdatedAt) || a.UpdatedAt.Equal(b.UpdatedAt) && a.ID > b.ID {
			t.Fatalf("hit %d (%s, %v) ranks above hit %d (%s, %v): want newest first, then id", i-1, a.ID, a.UpdatedAt, i, b.ID, b.UpdatedAt)
		}
	}
	if n := len(tp.recall(t, sdk.RecallQuery{Query: "harbor"})); n != sdk.DefaultRecallLimit {
		t.Fatalf("default limit answered %d hits", n)
	}
	top3 := hitIDs(tp.recall(t, sdk.RecallQuery{Query: "harbor", Limit: 3}))
	if all := hitIDs(hits); !slices.Equal(top3, all[:3]) {
		t.Fatalf("limit 3 = %v, want the first three of %v", top3, all)
	}
}

func TestRecallFilters(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	ids := tp.remember(t, "default",
		rec(alice, "garden", "tomatoes", "Plants", "summer"),
		rec(alice, "garden", "roses", "plants"),
		rec(alice, "garden", "weeds", "chores"),
		rec(alice, "garden", "nothing"),
	)
	tests := []struct {
		name string
		q    sdk.RecallQuery
		want []string
	}{
		{"no filter", sdk.RecallQuery{}, ids},
		{"tag, case-folded", sdk.RecallQuery{Tags: []string{"PLANTS"}}, ids[:2]},
		{"all tags required", sdk.RecallQuery{Tags: []string{"plants", "summer"}}, ids[:1]},
		{"exclude any tag", sdk.RecallQuery{ExcludeTags: []string{"summer", "Chores"}}, []string{ids[1], ids[3]}},
		{"exclude ids", sdk.RecallQuery{ExcludeIDs: []string{ids[0], ids[3]}}, ids[1:3]},
		{"everything excluded", sdk.RecallQuery{Tags: []string{"plants"}, ExcludeIDs: ids[:2]}, nil},
		{"empty query", sdk.RecallQuery{Query: " ", Tags: []string{"plants"}}, nil},
		{"only stopwords", sdk.RecallQuery{Query: "the and of"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := tt.q
			if q.Query == "" {
				q.Query = "garden"
			}
			if got := hitIDs(tp.recall(t, q)); !sameSet(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	// Exclusion makes room for the next-best record rather than shrinking the answer.
	if got := tp.recall(t, sdk.RecallQuery{Query: "garden", Limit: 2, ExcludeIDs: ids[:2]}); len(got) != 2 {
		t.Fatalf("limit 2 with 2 excluded answered %d hits", len(got))
	}
}

func TestHitsDoNotAliasIndex(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	id := tp.remember(t, "default", rec(alice, "alias", "check", "orig"))[0]
	h := tp.recall(t, sdk.RecallQuery{Query: "alias"})
	h[0].Record.Tags[0] = "mutated"
	g := tp.get(t, "default", id)
	g[0].Tags[0] = "mutated"
	if got := tp.get(t, "default", id)[0].Tags[0]; got != "orig" {
		t.Fatalf("caller mutation reached the index: tag %q", got)
	}
}

func TestCompaction(t *testing.T) {
	// Records written straight to disk (no fsync per record) and loaded.
	var ids []string
	tp := newTestProvider(t, modes[0], func(root string) {
		for i := range 3000 {
			r := rec(alice, fmt.Sprint("note ", i), fmt.Sprint("churn body ", i%7))
			r.ID = fmt.Sprintf("n%04d", i)
			if err := prepare(&r, "default", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(root, filepath.FromSlash(fileKey{"default", alice, r.ID}.rel())), string(renderRecord(&r)))
			ids = append(ids, r.ID)
		}
	})
	for _, part := range [][]string{ids[:1000], ids[1000:2000], ids[2000:2200]} {
		if _, err := tp.Forget(ctx, "default", part); err != nil {
			t.Fatal(err)
		}
	}
	tp.st.idx.RLock()
	ri := tp.st.realms["default"]
	slots, live := len(ri.docs), ri.live
	tp.st.idx.RUnlock()
	if live != 800 || slots >= 3000 || slots-live >= compactMinDead {
		t.Fatalf("after forgetting 2200 of 3000: %d slots for %d live records; want compaction to bound the dead slots", slots, live)
	}
	compareWithReference(t, tp, "churn body 3", "after compaction")
	if got := tp.get(t, "default", ids[2999]); len(got) != 1 {
		t.Fatal("record lost in compaction")
	}
}
