package markdown

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// TestRanking pins what BM25F over the weighted fields means for a few
// plain cases: where a term is found and how often, stemming, scripts.
func TestRanking(t *testing.T) {
	tests := []struct {
		name  string
		recs  []sdk.Record // the first ranks first
		query string
	}{
		{"tag beats title beats description beats body", []sdk.Record{
			{Title: "a", Body: "b", Tags: []string{"deploy"}},
			{Title: "deploy", Body: "c"},
			{Title: "d", Description: "deploy", Body: "e"},
			{Title: "f", Body: "deploy"},
		}, "deploy"},
		{"more query terms beat one", []sdk.Record{
			{Title: "x", Body: "deploy rollback"},
			{Title: "y", Body: "deploy"},
		}, "deploy rollback"},
		{"tags compared case-folded, terms inside a tag", []sdk.Record{
			{Title: "x", Body: "y", Tags: []string{"Blue-Green DEPLOY"}},
			{Title: "z", Body: "green"},
		}, "green"},
		{"stemmed", []sdk.Record{{Title: "Deployments", Body: "y"}}, "deploying"},
		{"CJK bigrams", []sdk.Record{{Title: "x", Body: "東京都に住む"}}, "東京都"},
		{"other scripts", []sdk.Record{{Title: "Развёртывание", Body: "y"}}, "развёртывание"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp := newTestProvider(t, modes[0])
			var ids []string
			for _, r := range tt.recs {
				r.Scope, r.Kind = alice, sdk.KindFact
				ids = append(ids, tp.remember(t, "default", r)[0])
			}
			hits := tp.recall(t, sdk.RecallQuery{Query: tt.query})
			if got := hitIDs(hits); !slices.Equal(got, ids) {
				t.Fatalf("ranked %v, want %v", got, ids)
			}
			for i := 1; i < len(hits); i++ {
				if !(hits[i-1].Score > hits[i].Score) {
					t.Fatalf("scores %v and %v do not fall", hits[i-1].Score, hits[i].Score)
				}
			}
			compareWithReference(t, tp, sdk.RecallQuery{Query: tt.query}, tt.name)
		})
	}
	t.Run("nothing matches", func(t *testing.T) {
		tp := newTestProvider(t, modes[0])
		tp.remember(t, "default", rec(alice, "The", "the the"))
		for _, q := range []string{"deploy", "the", " "} {
			if hits := tp.recall(t, sdk.RecallQuery{Query: q}); len(hits) != 0 {
				t.Fatalf("%q recalled %v", q, hitIDs(hits))
			}
		}
	})
}

// TestIndexMatchesReference holds recall to the reference (reference_test.go)
// over two realms through writes, ties (the same text in several scopes,
// records of one batch sharing an update time), supersedes, forgets, hand
// edits, additions and deletions, expiry and thread context; queries
// unscoped, scoped, by tag, excluding tags and ids. Then again after a
// reindex and after reopening from the snapshot.
func TestIndexMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vocab := []string{"deploy", "deploys", "deployment", "rollback", "harbor", "lighthouse", "keeper", "garden",
		"tomato", "river", "bridge", "castle", "winter", "summer", "coffee", "tea", "pizza", "pineapple",
		"東京", "都庁", "42", "7", "the", "and", "of", "ÉTÉ", "straße"}
	word := func() string { return vocab[min(rng.IntN(len(vocab)), rng.IntN(len(vocab)))] } // skewed
	text := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = word()
		}
		return strings.Join(ws, []string{" ", "-", ", ", "\n"}[rng.IntN(4)])
	}
	tags := []string{"ops", "OPS", "home", "food", "travel"}
	scopes := []sdk.Scope{alice, bob, sdk.MobScope("team"), sdk.RealmScope}
	tp := newTestProvider(t, modes[0])
	seq := map[string]int64{}
	newRec := func() sdk.Record {
		r := sdk.Record{Scope: scopes[rng.IntN(len(scopes))], Kind: sdk.KindFact, Title: text(1 + rng.IntN(3)),
			Description: text(rng.IntN(3)), Body: text(rng.IntN(10))}
		for range rng.IntN(3) {
			r.Tags = append(r.Tags, tags[rng.IntN(len(tags))])
		}
		switch rng.IntN(10) {
		case 0, 1:
			r.ExpiresAt = tp.clock.Now().Add(30 * time.Minute)
		case 2, 3, 4:
			n := rng.IntN(3)
			th := fmt.Sprint("conv", n)
			if rng.IntN(4) != 0 {
				// Mostly its thread's own scope, so context joins; now
				// and then another's, which must join none of it.
				r.Scope = scopes[n]
			}
			if rng.IntN(8) != 0 {
				seq[th]++ // now and then two turns share a place
			}
			r.Thread = &sdk.Thread{ID: th, Seq: seq[th]}
		}
		return r
	}
	var live []string
	compared, ties := 0, 0
	check := func(label string) {
		t.Helper()
		files := refFilesOf(t, tp)
		for i := range 40 {
			q := sdk.RecallQuery{Query: text(1 + rng.IntN(4)), Limit: []int{10, 10, 3, 50}[i%4]}
			if i%3 == 0 {
				q.Realm = "other"
			}
			switch i % 6 {
			case 1:
				q.Scopes = []sdk.Scope{alice, sdk.RealmScope}
			case 2:
				q.Tags = []string{tags[i%len(tags)]}
			case 3:
				q.ExcludeTags = []string{tags[i%len(tags)]}
			case 4:
				q.ExcludeIDs = live[:min(len(live), 15)]
			case 5:
				q.Scopes = []sdk.Scope{bob}
				q.Tags = []string{"ops"}
			}
			if q.Realm == "" {
				q.Realm = sdk.DefaultRealm
			}
			got := tp.recall(t, q)
			if err := sameAsRef(got, refRecall(files[q.Realm], q, tp.clock.Now())); err != nil {
				t.Fatalf("%s: query %+v: %v", label, q, err)
			}
			compared += len(got)
			for k := 1; k < len(got); k++ {
				if got[k].Score == got[k-1].Score {
					ties++
				}
			}
		}
	}
	for round := range 5 {
		for _, realm := range []string{"default", "other"} {
			var batch []sdk.Record
			for i := range 120 {
				r := newRec()
				batch = append(batch, r)
				if i%10 == 0 { // the same text in another scope: a tie
					dup := r
					dup.Scope = scopes[(slices.Index(scopes, r.Scope)+1)%len(scopes)]
					dup.Thread = nil
					batch = append(batch, dup)
				}
			}
			ids := tp.remember(t, realm, batch...)
			if realm == "default" {
				live = append(live, ids...)
			}
			tp.clock.Advance(time.Second)
		}
		slices.Sort(live)
		live = slices.Compact(live)
		// Churn in "default": supersede, forget, edit and delete by hand,
		// add by hand.
		rng.Shuffle(len(live), func(i, j int) { live[i], live[j] = live[j], live[i] })
		churn := live[:40]
		for _, id := range churn[:10] {
			newID, err := tp.Supersede(ctx, "default", id, newRec())
			if err != nil && !strings.Contains(err.Error(), "superseded") {
				t.Fatal(err)
			}
			if err == nil {
				live = append(live, newID)
			}
		}
		if _, err := tp.Forget(ctx, "default", churn[10:25]); err != nil {
			t.Fatal(err)
		}
		for _, id := range churn[25:35] {
			got := tp.get(t, "default", id)
			if len(got) == 0 {
				continue
			}
			p := tp.path("default", got[0].Scope, id)
			if rng.IntN(3) == 0 {
				os.Remove(p)
				continue
			}
			editInPlace(t, p, func(s string) string { return s + "\n" + text(4) + "\n" })
		}
		for i := range 5 {
			id := fmt.Sprintf("hand%d-%d", round, i)
			body := text(6)
			thread := ""
			if i%2 == 0 {
				seq["conv0"]++
				thread = fmt.Sprintf("thread: \"conv0\"\nthread_seq: %d\n", seq["conv0"])
			}
			writeFile(t, tp.path("default", alice, id), fmt.Sprintf("---\nkind: \"fact\"\ntitle: %q\n%s---\n%s\n", text(2), thread, body))
			live = append(live, id)
		}
		live = live[40:]
		tp.clock.Advance(time.Hour) // expires this round's expiring records
		check(fmt.Sprintf("round %d", round))
	}
	n, err := tp.Reindex(ctx, "", nil)
	if err != nil || n == 0 {
		t.Fatalf("Reindex = %d, %v", n, err)
	}
	check("after reindex")
	before := exportAll(t, tp, "default", "other")
	defer func(n int) { docChunk = n }(docChunk)
	docChunk = 7 // records over many snapshot messages
	if err := tp.Close(); err != nil {
		t.Fatal(err)
	}
	tp2 := openTestProvider(t, tp.root, modes[0])
	tp2.clock.Advance(tp.clock.Now().Sub(tp2.clock.Now()))
	if !tp2.st.fromSnapshot {
		t.Fatal("reopened without the snapshot")
	}
	tp = tp2
	if after := exportAll(t, tp, "default", "other"); !reflect.DeepEqual(before, after) {
		t.Fatal("records read back from the snapshot differ from those written")
	}
	check("reopened from the snapshot")
	t.Logf("%d hits compared, %d tied", compared, ties)
	if compared < 1500 || ties < 20 {
		t.Fatalf("only %d hits compared, %d of them tied: the corpus does not test enough", compared, ties)
	}
}

// compareWithReference checks one query's hits against the reference
// over the files.
func compareWithReference(t *testing.T, tp *testProvider, q sdk.RecallQuery, label string) {
	t.Helper()
	if q.Realm == "" {
		q.Realm = sdk.DefaultRealm
	}
	got := tp.recall(t, q)
	want := refRecall(refFilesOf(t, tp)[q.Realm], q, tp.clock.Now())
	if err := sameAsRef(got, want); err != nil {
		t.Fatalf("%s: query %+v: %v", label, q, err)
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
	if len(hits) != 16 || hits[0].Record.ID != strong || !(hits[0].Score > hits[1].Score) {
		t.Fatalf("best hit %v (of %d), want %s alone on top", hits[0], len(hits), strong)
	}
	if rest := hitIDs(hits[1:]); !sameSet(rest, ids) {
		t.Fatalf("the tied hits are %v, want the 15 harbor records %v", rest, ids)
	}
	for i := 2; i < len(hits); i++ {
		if hits[i-1].Score != hits[i].Score {
			t.Fatalf("scores differ in a tie group: %v", hits)
		}
	}
	// Later writes first, those sharing a millisecond included.
	want := slices.Clone(ids)
	slices.Reverse(want)
	if got := hitIDs(hits[1:]); !slices.Equal(got, want) {
		t.Fatalf("tied hits %v, want the reverse of the write order %v", got, ids)
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

// TestThreadContext: a turn is found by words its neighbours in the
// thread hold (at a lower weight than its own), in writes and in hand
// edits; without the thread it is not.
func TestThreadContext(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	turns := []string{"What should we cook for the party?", "Pizza with pineapple, always.", "Fine, and lemonade."}
	var threaded, plain []sdk.Record
	for i, text := range turns {
		r := rec(alice, "turn", text)
		plain = append(plain, r)
		r.Thread = &sdk.Thread{ID: "party", Seq: int64(i + 1)}
		threaded = append(threaded, r)
	}
	ids := tp.remember(t, "default", threaded...)
	tp.remember(t, "other", plain...)
	hits := tp.recall(t, sdk.RecallQuery{Query: "cook party"})
	if got := hitIDs(hits); len(got) != 3 || got[0] != ids[0] {
		t.Fatalf("cook party recalls %v, want the question first and both answers by context", got)
	}
	if got := hitIDs(tp.recall(t, sdk.RecallQuery{Realm: "other", Query: "cook party"})); len(got) != 1 {
		t.Fatalf("without a thread, cook party recalls %v, want the question alone", got)
	}
	compareWithReference(t, tp, sdk.RecallQuery{Query: "cook party pineapple"}, "threaded")
	// A hand edit that takes the answer out of the thread.
	editInPlace(t, tp.path("default", alice, ids[1]), func(s string) string {
		return strings.Replace(s, "thread: \"party\"", "thread: \"other\"", 1)
	})
	if got := hitIDs(tp.recall(t, sdk.RecallQuery{Query: "cook party"})); slices.Contains(got, ids[1]) {
		t.Fatalf("after leaving the thread, cook party still recalls %s: %v", ids[1], got)
	}
	compareWithReference(t, tp, sdk.RecallQuery{Query: "cook party pineapple lemonade"}, "after the edit")
}

// exportAll answers every record of the realms, of any status.
func exportAll(t *testing.T, tp *testProvider, realms ...string) []sdk.Record {
	t.Helper()
	var out []sdk.Record
	for _, realm := range realms {
		for after := ""; ; {
			page, err := tp.Export(ctx, realm, after, 100)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, page.Records...)
			if page.Next == "" {
				break
			}
			after = page.Next
		}
	}
	if len(out) == 0 {
		t.Fatal("nothing exported")
	}
	return out
}

// TestReadThread: ReadThread answers exactly the records at the places
// asked, in their own scope, realm and thread, and follows forgets and
// hand edits as Get does.
func TestReadThread(t *testing.T) {
	at := func(scope sdk.Scope, thread string, seq int64) sdk.ThreadPlace {
		return sdk.ThreadPlace{Scope: scope, Thread: thread, Seq: seq}
	}
	threaded := func(scope sdk.Scope, text, thread string, seq int64) sdk.Record {
		r := rec(scope, "turn", text)
		r.Thread = &sdk.Thread{ID: thread, Seq: seq}
		return r
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			tp := newTestProvider(t, m)
			// alice's thread "chat" holds two records at seq 2; bob's
			// thread of the same id is another thread.
			a := tp.remember(t, "default", threaded(alice, "one", "chat", 1), threaded(alice, "two", "chat", 2),
				threaded(alice, "two again", "chat", 2), threaded(alice, "three", "chat", 3), threaded(alice, "aside", "side", 1))
			b := tp.remember(t, "default", threaded(bob, "one", "chat", 1), threaded(bob, "two", "chat", 2))
			tp.remember(t, "other", threaded(alice, "elsewhere", "chat", 1))
			tests := []struct {
				name   string
				realm  string
				places []sdk.ThreadPlace
				want   []string
			}{
				{"one place", "default", []sdk.ThreadPlace{at(alice, "chat", 1)}, []string{a[0]}},
				{"a place holding two", "default", []sdk.ThreadPlace{at(alice, "chat", 2)}, []string{a[1], a[2]}},
				{"the same thread id in two scopes", "default", []sdk.ThreadPlace{at(alice, "chat", 3), at(bob, "chat", 1)}, []string{a[3], b[0]}},
				{"another thread of the scope", "default", []sdk.ThreadPlace{at(alice, "side", 1)}, []string{a[4]}},
				{"a place with nothing", "default", []sdk.ThreadPlace{at(alice, "chat", 4), at(bob, "chat", 0)}, nil},
				{"a scope without the thread", "default", []sdk.ThreadPlace{at(sdk.RealmScope, "chat", 1)}, nil},
				{"a realm without the thread", "empty", []sdk.ThreadPlace{at(alice, "chat", 1)}, nil},
				{"no places", "default", nil, nil},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					assertThread(t, tp, tt.realm, tt.places, tt.want...)
				})
			}
			if n, err := tp.Forget(ctx, "default", []string{a[1]}); err != nil || n != 1 {
				t.Fatalf("Forget = %d, %v", n, err)
			}
			assertThread(t, tp, "default", []sdk.ThreadPlace{at(alice, "chat", 2)}, a[2])
			// A hand edit moving a record to another place.
			editInPlace(t, tp.path("default", alice, a[3]), func(s string) string {
				return strings.Replace(s, "thread_seq: 3", "thread_seq: 7", 1)
			})
			tp.settle(m)
			assertThread(t, tp, "default", []sdk.ThreadPlace{at(alice, "chat", 3), at(alice, "chat", 7)}, a[3])
			if got := tp.get(t, "default", a[3])[0].Thread; got == nil || got.Seq != 7 {
				t.Fatalf("after the edit, %s is at %+v, want seq 7", a[3], got)
			}
			// A crowded place answers its first sdk.MaxPlaceReads by id.
			var crowd []sdk.Record
			for i := range sdk.MaxPlaceReads + 5 {
				crowd = append(crowd, threaded(alice, fmt.Sprint("crowd ", i), "chat", 9))
			}
			c := tp.remember(t, "default", crowd...)
			assertThread(t, tp, "default", []sdk.ThreadPlace{at(alice, "chat", 9), at(alice, "chat", 7)},
				append(slices.Sorted(slices.Values(c))[:sdk.MaxPlaceReads], a[3])...)
		})
	}
}

func assertThread(t *testing.T, tp *testProvider, realm string, places []sdk.ThreadPlace, want ...string) {
	t.Helper()
	recs, err := tp.ReadThread(ctx, realm, places)
	if err != nil {
		t.Fatalf("ReadThread(%v): %v", places, err)
	}
	got := recordIDs(recs)
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("ReadThread(%v) = %v, want %v", places, got, want)
	}
}

// TestEqualScoresInWriteOrder: records of equal score rank in write
// order, later first, as the sqlite provider ranks them (its row ids):
// within one batch, and across writes in one millisecond; a hand edit
// that leaves a record's update time keeps its place. A reindex and the
// snapshot keep that order; files alone know only each record's update
// time, to the millisecond, and order records sharing one by id.
func TestEqualScoresInWriteOrder(t *testing.T) {
	tp := newTestProvider(t, modes[0])
	note := func(id, body string) sdk.Record {
		r := rec(alice, "note", body)
		r.ID = id
		return r
	}
	tp.remember(t, "default", note("r1", "alpha beta"), note("r2", "alpha gamma"))
	tp.remember(t, "default", note("r0", "alpha delta")) // the same millisecond
	tp.clock.Advance(time.Second)
	tp.remember(t, "default", note("q9", "alpha epsilon"))
	steps := []struct {
		name string
		do   func()
		want []string
	}{
		{"live", func() {}, []string{"q9", "r0", "r2", "r1"}},
		{"reindexed", func() {
			if _, err := tp.Reindex(ctx, "", nil); err != nil {
				t.Fatal(err)
			}
		}, []string{"q9", "r0", "r2", "r1"}},
		{"from the snapshot, then an edit and a write", func() {
			tp.Close()
			tp = openTestProvider(t, tp.root, modes[0]) // its clock is back at the first write's
			if !tp.st.fromSnapshot {
				t.Fatal("reopened without the snapshot")
			}
			editInPlace(t, tp.path("default", alice, "r2"), func(s string) string { return strings.Replace(s, "gamma", "zeta", 1) })
			tp.remember(t, "default", note("r3", "alpha eta"))
		}, []string{"r3", "q9", "r0", "r2", "r1"}},
		{"from the files alone", func() {
			tp.Close()
			if err := os.Remove(filepath.Join(tp.root, DefaultSnapshot)); err != nil {
				t.Fatal(err)
			}
			tp = openTestProvider(t, tp.root, modes[0])
		}, []string{"q9", "r0", "r1", "r2", "r3"}},
	}
	for _, st := range steps {
		st.do()
		hits := tp.recall(t, sdk.RecallQuery{Query: "alpha"})
		for _, h := range hits[1:] {
			if h.Score != hits[0].Score {
				t.Fatalf("%s: scores differ: %v", st.name, hits)
			}
		}
		if got := hitIDs(hits); !slices.Equal(got, st.want) {
			t.Errorf("%s: alpha recalls %v, want %v", st.name, got, st.want)
		}
	}
}
