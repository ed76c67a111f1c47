package speaker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
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
		{"I'm planning a trip; any tips for my evening routine?", true},
		{"Can you recommend some recent publications or conferences that I might find interesting?", true},
		{"Can you remind me what sealant you recommended for the table?", false},
		{"I remember you told me to dilute tea tree oil. Can you remind me of the ratio?", false},
		{"You mentioned a few language apps I could try; which was the free one?", false},
		{"What did we talk about when I called on Monday?", false},
		{"What did you suggest for my trip?", false},
		{"What was your advice on my garden?", false},
		{"I asked what YOU SAID about the rotation", false},
		{"Did your sister call me?", true},
		{"What did Caroline paint?", false},
		{"When did Melanie go to the museum with her kids?", false},
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
		// Without a first-person word it is about someone else.
		if got && !strings.ContainsFunc(strings.ToLower(q), func(r rune) bool { return r == 'i' || r == 'm' }) {
			t.Fatalf("%q read as about the user without a first-person word", q)
		}
	})
}

// turn is a hit for record id, said by the user when user is true (the
// assistant otherwise).
func turn(id string, score float64, user bool) sdk.Hit {
	tag := AssistantTag
	if user {
		tag = UserTag
	}
	return sdk.Hit{Record: sdk.Record{ID: id, Tags: []string{tag}}, Score: score}
}

func order(hs []sdk.Hit) string {
	var b strings.Builder
	for _, h := range hs {
		fmt.Fprintf(&b, "%s:%g ", h.Record.ID, h.Score)
	}
	return strings.TrimSpace(b.String())
}

func TestRank(t *testing.T) {
	for _, tc := range []struct {
		name  string
		hits  []sdk.Hit
		limit int
		want  string
	}{
		{"the user's turn passes the assistant's", []sdk.Hit{turn("a", 5, false), turn("u", 3, true)}, 10, "u:6 a:5"},
		{"by at most the weight", []sdk.Hit{turn("a", 7, false), turn("u", 3, true)}, 10, "a:7 u:6"},
		{"ties keep the order given", []sdk.Hit{turn("a", 6, false), turn("u", 3, true)}, 10, "a:6 u:6"},
		{"the tag is read case-folded", []sdk.Hit{turn("a", 5, false), {Record: sdk.Record{ID: "u", Tags: []string{"ROLE:User"}}, Score: 3}}, 10, "u:6 a:5"},
		{"untagged records are not boosted", []sdk.Hit{{Record: sdk.Record{ID: "n"}, Score: 5}, turn("u", 2, true)}, 10, "n:5 u:4"},
		{"scores that are not positive stay", []sdk.Hit{turn("a", 0.1, false), turn("u", -0.2, true), turn("z", 0, true)}, 10, "a:0.1 z:0 u:-0.2"},
		{"a NaN score ranks last", []sdk.Hit{turn("x", math.NaN(), true), turn("a", 1, false)}, 10, "a:1 x:NaN"},
		{"the limit cuts", []sdk.Hit{turn("a", 5, false), turn("b", 4, false), turn("u", 3, true)}, 2, "u:6 a:5"},
		{"a negative limit answers none", []sdk.Hit{turn("a", 5, false)}, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := order(Rank(tc.hits, tc.limit)); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestWrap(t *testing.T) {
	// The store holds, best first: two assistant answers, then the user's
	// turn that holds the fact, past a limit of 2.
	store := []sdk.Hit{turn("a1", 9, false), turn("a2", 8, false), turn("u1", 5, true), turn("a3", 1, false)}
	var limits []int
	fail := 0 // fail the call of this number (1-based), 0 for none
	recall := func(_ context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		limits = append(limits, q.Limit)
		if len(limits) == fail {
			return nil, errors.New("provider hiccup")
		}
		n := min(cmp.Or(q.Limit, sdk.DefaultRecallLimit), len(store))
		out := make([]sdk.Hit, n)
		copy(out, store[:n])
		return out, nil
	}
	for _, tc := range []struct {
		name   string
		query  string
		limit  int
		store  []sdk.Hit // nil keeps the store above
		fail   int
		want   string
		limits []int
		err    bool
	}{
		{name: "a question about the user", query: "How far did I run?", limit: 2, want: "u1:10 a1:9", limits: []int{2, 4}},
		{name: "the user's turn inside the limit is ranked without a second recall's gain", query: "How far did I run?", limit: 3, want: "u1:10 a1:9 a2:8", limits: []int{3, 6}},
		{name: "a question about what the assistant said", query: "What did you recommend to me?", limit: 2, want: "a1:9 a2:8", limits: []int{2}},
		{name: "no speaker's turn: one recall", query: "How far did I run?", limit: 2,
			store: []sdk.Hit{{Record: sdk.Record{ID: "n1"}, Score: 9}, {Record: sdk.Record{ID: "n2"}, Score: 8}, turn("u1", 5, true)}, want: "n1:9 n2:8", limits: []int{2}},
		{name: "an answer short of the limit: one recall", query: "How far did I run?", limit: 10, want: "u1:10 a1:9 a2:8 a3:1", limits: []int{10}},
		{name: "the default limit", query: "How far did I run?", limit: 0, want: "u1:10 a1:9 a2:8 a3:1", limits: []int{0}},
		{name: "the second recall failing ranks the first answer", query: "How far did I run?", limit: 3, fail: 2, want: "u1:10 a1:9 a2:8", limits: []int{3, 6}},
		{name: "the first recall failing fails", query: "How far did I run?", limit: 2, fail: 1, err: true, limits: []int{2}},
		{name: "a question about someone else", query: "How far did Ann run?", limit: 2, want: "a1:9 a2:8", limits: []int{2}},
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
			limits, fail = nil, tc.fail
			got, err := Wrap(recall)(context.Background(), sdk.RecallQuery{Realm: "r", Query: tc.query, Limit: tc.limit})
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
}
