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

	"github.com/memhost/memhost/sdk"
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
		{"How much did we spend on our honeymoon?", true},
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
		if got && !strings.ContainsFunc(strings.ToLower(q), func(r rune) bool { return r == 'i' || r == 'm' || r == 'w' || r == 'o' || r > 0x7f }) {
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
	return sdk.Hit{Record: sdk.Record{ID: id, Scope: sdk.IdentityScope("alice"), Tags: []string{tag}, Thread: &sdk.Thread{ID: "c1"}}, Score: score}
}

func order(hs []sdk.Hit) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "%s:%g ", h.Record.ID, h.Score)
	}
	return strings.TrimSpace(b.String())
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
		{"a NaN score ranks last", []sdk.Hit{turn("x", math.NaN(), true), turn("a", 1, false)}, 10, "a:1 x:NaN"},
		{"the limit cuts", []sdk.Hit{turn("a", 5, false), turn("b", 4, false), turn("u", 3, true)}, 2, "u:6 a:5"},
		{"a negative limit answers none", []sdk.Hit{turn("a", 5, false)}, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := order(Rank(tc.hits, tc.limit, false)); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

// TestRankKeepsWhatStoodBeside: a hit cut past the limit, and the
// neighbours it carried, go with a kept turn of its thread and scope, so
// the envelope can still show them; without neighbours asked, or with no
// kept turn of the thread, they go.
func TestRankKeepsWhatStoodBeside(t *testing.T) {
	hits := func() []sdk.Hit {
		a := turn("a", 5, false)
		a.Neighbours = []sdk.Record{{ID: "n", Scope: a.Record.Scope, Thread: &sdk.Thread{ID: "c1", Seq: 3}}}
		other := turn("o", 4, false)
		other.Record.Thread = &sdk.Thread{ID: "c2"}
		return []sdk.Hit{a, other, turn("u", 3, true)}
	}
	kept := Rank(hits(), 1, true)
	if len(kept) != 1 || kept[0].Record.ID != "u" {
		t.Fatalf("kept %s, want u", order(kept))
	}
	var beside []string
	for _, n := range kept[0].Neighbours {
		beside = append(beside, n.ID)
	}
	if got := strings.Join(beside, " "); got != "n a" {
		t.Fatalf("u carries %q, want the cut hit a and its neighbour n (not o, of another thread)", got)
	}
	if kept := Rank(hits(), 1, false); len(kept[0].Neighbours) != 0 {
		t.Fatalf("without neighbours asked, u carries %d", len(kept[0].Neighbours))
	}
}

func TestWrap(t *testing.T) {
	// The store holds, best first: two assistant answers, then the user's
	// turn that holds the fact, past a limit of 2.
	store := []sdk.Hit{turn("a1", 9, false), turn("a2", 8, false), turn("u1", 5, true), turn("a3", 1, false)}
	var calls []string // each recall's limit, tags and scopes
	fail := 0          // fail the call of this number (1-based), 0 for none
	var cancel context.CancelFunc
	recall := func(_ context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		calls = append(calls, fmt.Sprint(q.Limit, q.Tags, q.Scopes))
		if len(calls) == fail {
			return nil, errors.New("provider hiccup")
		}
		if len(calls) == 2 && cancel != nil {
			cancel() // out of time during the second recall, which answers what it has
		}
		var out []sdk.Hit
		for _, h := range store {
			if len(out) == cmp.Or(q.Limit, sdk.DefaultRecallLimit) {
				break
			}
			if (len(q.Scopes) > 0 && !slices.Contains(q.Scopes, h.Record.Scope)) || slices.ContainsFunc(q.Tags, func(tag string) bool { return !h.Record.HasTag(tag) }) {
				continue
			}
			if len(calls) == 2 {
				h.Score *= 10 // a second answer's hits the first holds keep the first's scores
			}
			out = append(out, h)
		}
		return out, nil
	}
	alice, realm := sdk.IdentityScope("alice"), sdk.RealmScope
	for _, tc := range []struct {
		name   string
		query  string
		limit  int
		tags   []string
		scopes []sdk.Scope
		store  []sdk.Hit // nil keeps the store above
		fail   int
		late   bool // the caller's time runs out during the second recall
		want   string
		calls  []string
		err    bool
	}{
		{name: "a question about the user", query: "How far did I run?", limit: 2, want: "u1:100 a1:9",
			calls: []string{"2 [] []", "2 [memhost:user] []"}},
		{name: "the user's turn inside the limit keeps its score", query: "How far did I run?", limit: 3, want: "u1:10 a1:9 a2:8",
			calls: []string{"3 [] []", "3 [memhost:user] []"}},
		{name: "the query's tags and identities' scopes stay", query: "How far did I run?", limit: 2, tags: []string{"run"}, scopes: []sdk.Scope{realm, alice},
			store: []sdk.Hit{func() sdk.Hit { h := turn("a1", 9, false); h.Record.Tags = append(h.Record.Tags, "run"); return h }(),
				func() sdk.Hit { h := turn("a2", 8, false); h.Record.Tags = append(h.Record.Tags, "run"); return h }(),
				func() sdk.Hit { h := turn("u1", 5, true); h.Record.Tags = append(h.Record.Tags, "run"); return h }()},
			want: "u1:100 a1:9", calls: []string{"2 [run] [realm identity:alice]", "2 [run memhost:user] [identity:alice]"}},
		{name: "no identity's scope read: one recall", query: "How far did I run?", limit: 2, scopes: []sdk.Scope{realm, sdk.MobScope("team")},
			store: []sdk.Hit{func() sdk.Hit { h := turn("a1", 9, false); h.Record.Scope = realm; return h }(),
				func() sdk.Hit { h := turn("a2", 8, false); h.Record.Scope = realm; return h }()},
			want: "a1:9 a2:8", calls: []string{"2 [] [realm mob:team]"}},
		{name: "a question about what the assistant said", query: "What did you recommend to me?", limit: 2, want: "a1:9 a2:8", calls: []string{"2 [] []"}},
		{name: "a question about someone else", query: "How far did Ann run?", limit: 2, want: "a1:9 a2:8", calls: []string{"2 [] []"}},
		{name: "no speaker's turn: one recall", query: "How far did I run?", limit: 2,
			store: []sdk.Hit{{Record: sdk.Record{ID: "n1"}, Score: 9}, {Record: sdk.Record{ID: "n2"}, Score: 8}, turn("u1", 5, true)}, want: "n1:9 n2:8", calls: []string{"2 [] []"}},
		{name: "an answer short of the limit: one recall", query: "How far did I run?", limit: 10, want: "u1:10 a1:9 a2:8 a3:1", calls: []string{"10 [] []"}},
		{name: "the default limit", query: "How far did I run?", limit: 0, want: "u1:10 a1:9 a2:8 a3:1", calls: []string{"0 [] []"}},
		{name: "the second recall failing ranks the first answer", query: "How far did I run?", limit: 2, fail: 2, want: "a1:9 a2:8",
			calls: []string{"2 [] []", "2 [memhost:user] []"}},
		{name: "out of time in the second recall ranks the first answer", query: "How far did I run?", limit: 2, late: true, want: "a1:9 a2:8",
			calls: []string{"2 [] []", "2 [memhost:user] []"}},
		{name: "the first recall failing fails", query: "How far did I run?", limit: 2, fail: 1, err: true, calls: []string{"2 [] []"}},
		{name: "an empty query", query: "", limit: 2, want: "a1:9 a2:8", calls: []string{"2 [] []"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := store
			if tc.store != nil {
				store = tc.store
			}
			defer func() { store = saved }()
			calls, fail, cancel = nil, tc.fail, nil
			ctx := context.Background()
			if tc.late {
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
			}
			q := sdk.RecallQuery{Realm: "r", Query: tc.query, Limit: tc.limit, Tags: tc.tags, Scopes: tc.scopes}
			got, err := Wrap(recall)(ctx, q)
			if (err != nil) != tc.err {
				t.Fatalf("err %v, want an error: %v", err, tc.err)
			}
			if s := order(got); !tc.err && s != tc.want {
				t.Fatalf("got  %s\nwant %s", s, tc.want)
			}
			if !slices.Equal(calls, tc.calls) {
				t.Fatalf("recalled %q, want %q", calls, tc.calls)
			}
			if fmt.Sprint(q.Tags, q.Scopes) != fmt.Sprint(tc.tags, tc.scopes) {
				t.Fatalf("the caller's query changed: tags %v, scopes %v", q.Tags, q.Scopes)
			}
		})
	}
}
