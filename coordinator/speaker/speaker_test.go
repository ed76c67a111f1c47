package speaker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/index"
)

func TestAboutUser(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{"How many hours of jogging and yoga did I do last week?", true},
		{"What is the total number of siblings I have?", true},
		{"I’m planning a trip; any tips for my evening routine?", true},
		{"Can you recommend some recent publications or conferences that I might find interesting?", true},
		{"How much did we spend on our honeymoon?", false}, // "we" is a team's as often
		{"What is our deploy process?", false},
		{"How many days after we came back from the trip did I start my new job?", true},
		{"What time did we come home from my cousin's wedding?", true},
		{"Thank you. Shared the doc with my team yesterday, who read it?", true},
		{"Didn't you say I should stretch first?", false},
		{"What did you come up with for my trip?", false},
		{"Which ideas you came up with did I like?", false},
		{"Did your sister call me?", true},
		{"Can you remind me what my doctor said about my blood pressure?", true},
		{"Do you remember when I told my sister about the wedding?", true},
		{"Where did we go after my doctor said I was fine?", true},
		{"Ｈｏｗ ｌｏｎｇ ｄｉｄ Ｉ ｒｕｎ?", true}, // full-width
		{"How long did İ run?", true}, // Turkish dotted capital I
		{"Can you remind me what sealant you recommended for the table?", false},
		{"I remember you told me to dilute tea tree oil. Can you remind me of the ratio?", false},
		{"You mentioned a few language apps I could try; which was the free one?", false},
		{"What did we talk about when I called on Monday?", false},
		{"What did you suggest for my trip?", false},
		{"What was your advice on my garden?", false},
		{"I asked what YOU had SAID about the rotation", false},
		{"Ｗｈａｔ ｄｉｄ ｙｏｕ ｒｅｃｏｍｍｅｎｄ ｍｅ?", false},
		{"What did Caroline paint?", false},
		{"When did Melanie go to the museum with her kids?", false},
		{"Which is the capital of France, i.e. the seat of government?", false},
		{"Is it in Illinois?", false},
		{"", false},
	} {
		if got := AboutUser(tc.q); got != tc.want {
			t.Errorf("AboutUser(%q) = %v, want %v", tc.q, got, tc.want)
		}
	}
}

func FuzzAboutUser(f *testing.F) {
	for _, s := range []string{"What did you recommend to me?", "How many days did I spend?", "your advice on my plan", strings.Repeat("you ", 2000) + "said I"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		got := AboutUser(q)
		// Only the first maxQueryBytes are read.
		if len(q) > maxQueryBytes && got != AboutUser(q[:maxQueryBytes]) {
			t.Fatalf("a long query read past its first %d bytes", maxQueryBytes)
		}
		// About the user means a first-person word.
		if got && !strings.ContainsFunc(strings.ToLower(q), func(r rune) bool { return r == 'i' || r == 'm' || r > 0x7f }) {
			t.Fatalf("%q read as about the user without a first-person word", q)
		}
	})
}

// turn is a hit for a turn of thread c1 in alice's scope, said by the user
// when user is true (the assistant otherwise).
func turn(id string, score float64, user bool) sdk.Hit {
	tag := AssistantTag
	if user {
		tag = UserTag
	}
	return sdk.Hit{Record: sdk.Record{ID: id, Scope: sdk.IdentityScope("alice"), Tags: []string{tag}, Body: "My run today", Thread: &sdk.Thread{ID: "c1"}}, Score: score}
}

// rankQuery is the question TestRank ranks for: turn's body says "run".
const rankQuery = "How far did I run?"

func order(hs []sdk.Hit) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "%s:%g ", h.Record.ID, h.Score)
	}
	return strings.TrimSpace(b.String())
}

// said answers h with its own text set: title, description and body.
func said(h sdk.Hit, title, description, body string) sdk.Hit {
	h.Record.Title, h.Record.Description, h.Record.Body = title, description, body
	return h
}

func TestRank(t *testing.T) {
	shared := func(scope sdk.Scope) sdk.Hit {
		h := turn("s", 3, true)
		h.Record.Scope = scope
		return h
	}
	unthreaded := turn("n", 3, true)
	unthreaded.Record.Thread = nil
	for _, tc := range []struct {
		name  string
		hits  []sdk.Hit
		limit int
		want  string
	}{
		{"the user's turn passes the assistant's", []sdk.Hit{turn("a", 5, false), turn("u", 3, true)}, 10, "u:6 a:5"},
		{"by at most the weight", []sdk.Hit{turn("a", 7, false), turn("u", 3, true)}, 10, "a:7 u:6"},
		{"ties keep the order given", []sdk.Hit{turn("a", 6, false), turn("u", 3, true)}, 10, "a:6 u:6"},
		{"the tag is read case-folded", []sdk.Hit{turn("a", 5, false), func() sdk.Hit { h := turn("u", 3, true); h.Record.Tags = []string{"MEMHOST:User"}; return h }()}, 10, "u:6 a:5"},
		{"untagged records are not boosted", []sdk.Hit{{Record: sdk.Record{ID: "n", Thread: &sdk.Thread{ID: "c1"}}, Score: 5}, turn("u", 2, true)}, 10, "n:5 u:4"},
		{"a record in a shared scope is not boosted", []sdk.Hit{turn("a", 5, false), shared(sdk.RealmScope), shared(sdk.MobScope("team"))}, 10, "a:5 s:3 s:3"},
		{"a record outside a thread is not boosted", []sdk.Hit{turn("a", 5, false), unthreaded}, 10, "a:5 n:3"},
		{"scores that are not positive stay", []sdk.Hit{turn("a", 0.1, false), turn("u", -0.2, true), turn("z", 0, true)}, 10, "a:0.1 z:0 u:-0.2"},
		{"a score near float64's top saturates rather than overflow", []sdk.Hit{turn("a", 1e308, false), turn("u", 1.7e308, true)}, 10, "u:1.7976931348623157e+308 a:1e+308"},
		{"a NaN score ranks last", []sdk.Hit{turn("x", math.NaN(), true), turn("a", 1, false)}, 10, "a:1 x:NaN"},
		{"the limit cuts", []sdk.Hit{turn("a", 5, false), turn("b", 4, false), turn("u", 3, true)}, 2, "u:6 a:5"},
		{"a negative limit answers none", []sdk.Hit{turn("a", 5, false)}, -1, ""},
		{"the user's turn matched only through its neighbours is not boosted", []sdk.Hit{turn("a", 5, false), said(turn("u", 3, true), "", "", "We walked to the lake")}, 10, "a:5 u:3"},
		{"a term in the title counts", []sdk.Hit{turn("a", 5, false), said(turn("u", 3, true), "Running", "", "")}, 10, "u:6 a:5"},
		{"a term in the description counts", []sdk.Hit{turn("a", 5, false), said(turn("u", 3, true), "", "a run by the lake", "")}, 10, "u:6 a:5"},
		{"a term in a tag counts", []sdk.Hit{turn("a", 5, false), func() sdk.Hit {
			h := said(turn("u", 3, true), "", "", "")
			h.Record.Tags = append(h.Record.Tags, "runs")
			return h
		}()}, 10, "u:6 a:5"},
		{"a system tag's words are not the turn's", []sdk.Hit{turn("a", 5, false), func() sdk.Hit {
			h := said(turn("u", 3, true), "", "", "")
			h.Record.Tags = append(h.Record.Tags, "memhost:run")
			return h
		}()}, 10, "a:5 u:3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := order(Rank(tc.hits, rankQuery, tc.limit, false)); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestRankKeepsWhatStoodBeside: a hit cut past the limit, and the
// neighbours it carried, go to the nearest kept turn of its thread and
// scope, so the envelope can still show them; a record kept or carried
// already is not added again; without neighbours asked, or with no kept
// turn of the thread, they go.
func TestRankKeepsWhatStoodBeside(t *testing.T) {
	at := func(h sdk.Hit, seq int64) sdk.Hit { h.Record.Thread = &sdk.Thread{ID: "c1", Seq: seq}; return h }
	rec := func(id string, seq int64) sdk.Record {
		return sdk.Record{ID: id, Scope: sdk.IdentityScope("alice"), Thread: &sdk.Thread{ID: "c1", Seq: seq}}
	}
	hits := func() []sdk.Hit {
		a := at(turn("a", 5, false), 11)
		a.Neighbours = []sdk.Record{rec("n", 12), rec("u2", 2)} // u2 is kept: not added twice
		other := turn("o", 4, false)
		other.Record.Thread = &sdk.Thread{ID: "c2"}
		return []sdk.Hit{a, other, at(turn("u1", 3, true), 10), at(turn("u2", 3, true), 2)}
	}
	kept := Rank(hits(), rankQuery, 2, true)
	if order(kept) != "u1:6 u2:6" {
		t.Fatalf("kept %s, want u1 and u2", order(kept))
	}
	ids := func(rs []sdk.Record) string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return strings.Join(out, " ")
	}
	if got := ids(kept[0].Neighbours); got != "a n" {
		t.Fatalf("u1 (seq 10) carries %q, want the cut hit a (seq 11) and its neighbour n, not o of another thread", got)
	}
	if got := ids(kept[1].Neighbours); got != "" {
		t.Fatalf("u2 (seq 2) carries %q, want none: a is nearer u1", got)
	}
	if kept := Rank(hits(), rankQuery, 2, false); len(kept[0].Neighbours)+len(kept[1].Neighbours) != 0 {
		t.Fatalf("without neighbours asked, the kept hits carry some")
	}
}

func TestWrap(t *testing.T) {
	// The store holds, best first: two assistant answers, then the user's
	// turn that holds the fact, past a limit of 2.
	store := []sdk.Hit{turn("a1", 9, false), turn("a2", 8, false), turn("u1", 5, true), turn("a3", 1, false)}
	var limits []int
	fail := 0 // fail the call of this number (1-based), 0 for none
	var cancel context.CancelFunc
	var deadlines []bool // whether each call's context has a deadline
	recall := func(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		limits = append(limits, q.Limit)
		_, dl := ctx.Deadline()
		deadlines = append(deadlines, dl)
		if len(limits) == fail {
			return nil, errors.New("provider hiccup")
		}
		if len(limits) == 2 && cancel != nil {
			cancel() // out of time during the second recall, which answers what it has
		}
		if len(q.Tags) > 0 {
			t.Errorf("the deeper recall narrowed the query: tags %v", q.Tags)
		}
		n := min(cmp.Or(q.Limit, sdk.DefaultRecallLimit), len(store))
		out := make([]sdk.Hit, n)
		copy(out, store[:n])
		if len(limits) == 2 {
			out[0].Score = 100 // a hit the first answer holds keeps the first answer's score
		}
		return out, nil
	}
	for _, tc := range []struct {
		name   string
		query  string
		limit  int
		store  []sdk.Hit // nil keeps the store above
		fail   int
		late   bool // the caller's time runs out during the second recall
		want   string
		limits []int
		err    bool
	}{
		{name: "a question about the user", query: "How far did I run?", limit: 2, want: "u1:10 a1:9", limits: []int{2, 4}},
		{name: "the user's turn inside the limit", query: "How far did I run?", limit: 3, want: "u1:10 a1:9 a2:8", limits: []int{3, 6}},
		{name: "a question about what the assistant said", query: "What did you recommend to me?", limit: 2, want: "a1:9 a2:8", limits: []int{2}},
		{name: "a question about someone else", query: "How far did Ann run?", limit: 2, want: "a1:9 a2:8", limits: []int{2}},
		{name: "no speaker's turn: one recall", query: "How far did I run?", limit: 2,
			store: []sdk.Hit{{Record: sdk.Record{ID: "n1"}, Score: 9}, {Record: sdk.Record{ID: "n2"}, Score: 8}, turn("u1", 5, true)}, want: "n1:9 n2:8", limits: []int{2}},
		{name: "an answer short of the limit: one recall", query: "How far did I run?", limit: 10, want: "u1:10 a1:9 a2:8 a3:1", limits: []int{10}},
		{name: "the default limit", query: "How far did I run?", limit: 0, want: "u1:10 a1:9 a2:8 a3:1", limits: []int{0}},
		{name: "the second recall failing ranks the first answer", query: "How far did I run?", limit: 2, fail: 2, want: "a1:9 a2:8", limits: []int{2, 4}},
		{name: "out of time in the second recall ranks the first answer", query: "How far did I run?", limit: 2, late: true, want: "a1:9 a2:8", limits: []int{2, 4}},
		{name: "the first recall failing fails", query: "How far did I run?", limit: 2, fail: 1, err: true, limits: []int{2}},
		{name: "an empty query", query: "", limit: 2, want: "a1:9 a2:8", limits: []int{2}},
		{name: "the wide limit stops at the batch limit", query: "How far did I run?", limit: sdk.MaxBatch,
			store: []sdk.Hit{turn("u1", 1, true)}, want: "u1:2", limits: []int{sdk.MaxBatch}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := store
			if tc.store != nil {
				store = tc.store
			}
			defer func() { store = saved }()
			limits, deadlines, fail, cancel = nil, nil, tc.fail, nil
			ctx := context.Background()
			if tc.late {
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			got, err := Wrap(recall)(ctx, sdk.RecallQuery{Realm: "r", Query: tc.query, Limit: tc.limit})
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want an error: %v", err, tc.err)
			}
			if s := order(got); !tc.err && s != tc.want {
				t.Fatalf("got  %s\nwant %s", s, tc.want)
			}
			if fmt.Sprint(limits) != fmt.Sprint(tc.limits) {
				t.Fatalf("recalled at limits %v, want %v", limits, tc.limits)
			}
		})
	}

	// With a deadline, the second recall gets half the time left.
	limits, deadlines, fail, cancel = nil, nil, 0, nil
	ctx, stop := context.WithTimeout(context.Background(), time.Hour)
	defer stop()
	if _, err := Wrap(recall)(ctx, sdk.RecallQuery{Realm: "r", Query: "How far did I run?", Limit: 2}); err != nil || len(deadlines) != 2 || !deadlines[1] {
		t.Fatalf("err %v, calls' deadlines %v", err, deadlines)
	}
}

// TestWrapKeepsOneScale: the deeper recall is the same query, so where
// the provider normalises scores over the candidates a query lets through
// (hybrid fusion in sdk/index), a user's turn it adds is on the first
// answer's scale: a weak one stays below the limit even doubled.
func TestWrapKeepsOneScale(t *testing.T) {
	ix, err := index.New(index.Options{Weights: []float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	scope := sdk.IdentityScope("alice")
	recs := map[string]sdk.Record{}
	put := func(id, text string, user bool, v []float32, seq int64) {
		tag := AssistantTag
		if user {
			tag = UserTag
		}
		d := index.Doc{ID: id, Realm: "r", Scope: string(scope), Tags: []string{tag}, Fields: [][]string{strings.Fields(text)}, Thread: "c1", ThreadSeq: seq}
		if err := ix.Put(d); err != nil {
			t.Fatal(err)
		}
		if _, err := ix.PutVector("r", id, "m", v); err != nil {
			t.Fatal(err)
		}
		recs[id] = sdk.Record{ID: id, Scope: scope, Tags: []string{tag}, Thread: &sdk.Thread{ID: "c1", Seq: seq}}
	}
	// Ten assistant turns that match strongly; a user's turn that barely
	// does (one word in a long text, a far vector).
	for i := range 10 {
		put(fmt.Sprintf("a%d", i), "jog jog jog distance park", false, []float32{1, 0.1 * float32(i)}, int64(2*i+1))
	}
	put("weak", "jog "+strings.Repeat("weather lunch movie ", 30), true, []float32{0, 1}, 100)
	recall := func(_ context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		var scopes []string
		for _, s := range q.Scopes {
			scopes = append(scopes, string(s))
		}
		hs, err := ix.Search(index.Query{Realm: "r", Terms: []string{"jog", "distance"}, Tags: q.Tags, Scopes: scopes, Limit: q.Limit, Vector: []float32{1, 0}, Model: "m"})
		if err != nil {
			return nil, err
		}
		out := make([]sdk.Hit, len(hs))
		for i, h := range hs {
			out[i] = sdk.Hit{Record: recs[h.ID], Score: h.Score}
		}
		return out, nil
	}
	all, _ := recall(context.Background(), sdk.RecallQuery{Limit: 20})
	var weak float64
	for _, h := range all {
		if h.Record.ID == "weak" {
			weak = h.Score
		}
	}
	if !(2*weak < all[4].Score) {
		t.Fatalf("the corpus does not test the scale: the weak turn %.3f, the fifth %.3f", weak, all[4].Score)
	}
	got, err := Wrap(recall)(context.Background(), sdk.RecallQuery{Realm: "r", Query: "How far did I jog?", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(got, func(h sdk.Hit) bool { return h.Record.ID == "weak" }) {
		t.Fatalf("the weak user's turn (%.3f, doubled %.3f, under the fifth's %.3f) reached the top 5: %s", weak, 2*weak, all[4].Score, order(got))
	}
}

// by is a turn of a conversation between people, said by name.
func by(id string, score float64, name string) sdk.Hit {
	return sdk.Hit{Record: sdk.Record{ID: id, Scope: sdk.IdentityScope("alice"), Tags: []string{NameTag(name)}, Thread: &sdk.Thread{ID: "c1"}}, Score: score}
}

func TestNamed(t *testing.T) {
	shared := by("s", 1, "Melanie")
	shared.Record.Scope = sdk.MobScope("team")
	unthreaded := by("n", 1, "Melanie")
	unthreaded.Record.Thread = nil
	pair := []sdk.Hit{by("c", 2, "Caroline"), by("m", 1, "Melanie")}
	for _, tc := range []struct {
		name, query string
		hits        []sdk.Hit
		want        string // the name's words, "" for none
	}{
		{"one speaker named", "What did Caroline paint?", pair, "caroline"},
		{"the possessive", "Where is Melanie's pottery class?", pair, "melanie"},
		{"case and full-width letters folded", "what did ＣＡＲＯＬＩＮＥ paint?", pair, "caroline"},
		{"both named", "When did Caroline meet Melanie?", pair, ""},
		{"no speaker named", "What did Ann paint?", pair, ""},
		{"a name inside a word is not the name", "What did Carolines paint?", pair, ""},
		{"a name of two words stands together", "What did Mary Ann bake?", []sdk.Hit{by("a", 1, "Mary Ann"), by("b", 1, "Mary")}, ""},
		{"a name of two words alone", "What did Ann Mary bake with Mary Ann?", []sdk.Hit{by("a", 1, "Mary Ann")}, "mary ann"},
		{"the tag's prefix read case-folded", "What did Caroline paint?",
			[]sdk.Hit{func() sdk.Hit { h := by("c", 1, "x"); h.Record.Tags = []string{"MEMHOST:Speaker:Caroline"}; return h }()}, "caroline"},
		{"a speaker only in a shared scope is no one's", "What did Melanie paint?", []sdk.Hit{shared}, ""},
		{"a speaker only outside a thread is no one's", "What did Melanie paint?", []sdk.Hit{unthreaded}, ""},
		{"user and assistant tags name no one", "What did the user say?", []sdk.Hit{turn("u", 1, true), turn("a", 1, false)}, ""},
		{"an empty query", "", pair, ""},
		{"one name spelled two ways is one speaker", "What did Mary Jane bake?", []sdk.Hit{by("a", 1, "Mary-Jane"), by("b", 1, "Mary Jane")}, "mary jane"},
		{"a name of initials", "What did J.R. say?", []sdk.Hit{by("j", 1, "J.R.")}, "j r"},
		{"a name of no letters names no one", "What did she say?", []sdk.Hit{by("x", 1, "?")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Named(tc.query, tc.hits)
			if got != tc.want || ok != (tc.want != "") {
				t.Fatalf("Named = %q, %v; want %q", got, ok, tc.want)
			}
		})
	}
}

func TestNameTag(t *testing.T) {
	for name, want := range map[string]string{
		"Caroline":                   "memhost:speaker:Caroline",
		"  Mary Ann ":                "memhost:speaker:Mary Ann",
		"":                           "",
		"   ":                        "",
		"a,b":                        "",
		strings.Repeat("x", 64-16):   "memhost:speaker:" + strings.Repeat("x", 64-16),
		strings.Repeat("x", 64-16+1): "",
	} {
		if got := NameTag(name); got != want {
			t.Errorf("NameTag(%q) = %q, want %q", name, got, want)
		}
		if tag := NameTag(name); tag != "" {
			r := sdk.Record{Tags: []string{tag}}
			if !r.HasTag(tag) || !index.IsSystemTag(tag) {
				t.Errorf("NameTag(%q) = %q is not a system tag", name, tag)
			}
		}
	}
}

// TestWrapNamed: a question naming one speaker of the first answer's
// turns ranks that speaker's turns higher, by namedWeight, bringing one
// just past the limit in through the deeper recall; a question naming
// both, or neither, is left alone, also when the deeper answer shows the
// second.
func TestWrapNamed(t *testing.T) {
	store := []sdk.Hit{by("m1", 9, "Melanie"), by("m2", 8, "Melanie"), by("c1", 7, "Caroline"), by("m3", 1, "Melanie")}
	var limits []int
	recall := func(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		limits = append(limits, q.Limit)
		n := min(cmp.Or(q.Limit, sdk.DefaultRecallLimit), len(store))
		return slices.Clone(store[:n]), nil
	}
	for _, tc := range []struct {
		query, want string
		limits      []int
		limit       int
	}{
		{"What did Caroline paint?", "c1:10.5 m1:9 m2:8", []int{3, 6}, 3},
		{"What did Melanie paint?", "m1:13.5 m2:12 c1:7", []int{3, 6}, 3},
		{"What did Melanie paint?", "m1:13.5", []int{1, 2}, 1},
		// Known from the first answer alone, Caroline's turns are not
		// favoured: no one is named.
		{"What did Caroline paint?", "m1:9 m2:8", []int{2}, 2},
		// Melanie is named in the first answer, and Caroline in the deeper
		// one: both are named, so no one is favoured.
		{"What did Caroline and Melanie paint?", "m1:9 m2:8", []int{2, 4}, 2},
		{"What did Caroline and Melanie paint?", "m1:9 m2:8 c1:7", []int{3}, 3},
		{"What did Ann paint?", "m1:9 m2:8", []int{2}, 2},
	} {
		limits = nil
		got, err := Wrap(recall)(context.Background(), sdk.RecallQuery{Realm: "r", Query: tc.query, Limit: tc.limit})
		if err != nil || order(got) != tc.want || fmt.Sprint(limits) != fmt.Sprint(tc.limits) {
			t.Errorf("%q: got %s (recalled at %v), err %v; want %s at %v", tc.query, order(got), limits, err, tc.want, tc.limits)
		}
	}
}

// TestOneSpeakerTwoSpellings: a question naming a speaker whose turns
// spell the name two ways lifts both.
func TestOneSpeakerTwoSpellings(t *testing.T) {
	store := []sdk.Hit{by("o", 9, "Otto"), by("o2", 8, "Otto"), by("a", 5, "Mary-Jane"), by("b", 4, "Mary Jane")}
	recall := func(ctx context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		return slices.Clone(store[:min(q.Limit, len(store))]), nil
	}
	got, err := Wrap(recall)(context.Background(), sdk.RecallQuery{Realm: "r", Query: "What did Mary Jane bake?", Limit: 4})
	if err != nil || order(got) != "o:9 o2:8 a:7.5 b:6" {
		t.Fatalf("got %s, %v; want both spellings lifted", order(got), err)
	}
}
