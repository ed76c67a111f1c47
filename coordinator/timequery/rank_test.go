package timequery

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

func hit(id string, score float64, occurred time.Time) sdk.Hit {
	return sdk.Hit{Record: sdk.Record{ID: id, CreatedAt: now, OccurredAt: occurred}, Score: score}
}

func ids(hits []sdk.Hit) []string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h.Record.ID
	}
	return out
}

func TestRank(t *testing.T) {
	sat, before := d(2023, 5, 27), d(2023, 5, 20)
	for _, tc := range []struct {
		name  string
		query string
		hits  []sdk.Hit
		want  []string
	}{
		{"equal text: the window's record first", "what did I do last Saturday",
			[]sdk.Hit{hit("week-before", 2, before.Add(9*time.Hour)), hit("saturday", 2, sat.Add(9*time.Hour)), hit("later", 2, d(2023, 5, 29))},
			[]string{"saturday", "week-before", "later"}},
		{"text still ranks: a much better match stays ahead", "what did I do last Saturday",
			[]sdk.Hit{hit("strong", 5, before), hit("saturday", 2, sat)},
			[]string{"strong", "saturday"}},
		{"no occurred_at: judged by created_at", "what did I do today",
			[]sdk.Hit{hit("old", 2, before), hit("created-today", 2, time.Time{})},
			[]string{"created-today", "old"}},
		{"latest of competing records", "what is my current job",
			[]sdk.Hit{hit("2021", 3, d(2021, 1, 1)), hit("2023", 3, d(2023, 1, 1)), hit("2022", 3, d(2022, 1, 1))},
			[]string{"2023", "2022", "2021"}},
		{"earliest", "the first time I went hiking",
			[]sdk.Hit{hit("2023", 3, d(2023, 1, 1)), hit("2021", 3, d(2021, 1, 1))},
			[]string{"2021", "2023"}},
		{"no time in the query: order kept", "hiking boots",
			[]sdk.Hit{hit("a", 1, before), hit("b", 3, sat)},
			[]string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits := slices.Clone(tc.hits)
			Rank(hits, Parse(tc.query, now))
			if got := ids(hits); !slices.Equal(got, tc.want) {
				t.Fatalf("Rank = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestRankKeepsScoresFinite: a boost of a finite score near float64's top
// saturates rather than overflow to an infinity no answer can encode.
func TestRankKeepsScoresFinite(t *testing.T) {
	for _, query := range []string{"what did I do last Saturday", "what is my current job", "the first time I went hiking"} {
		hits := []sdk.Hit{hit("a", 1.7e308, d(2023, 5, 27).Add(9*time.Hour)), hit("b", -1.7e308, d(2021, 1, 1)), hit("c", 1, d(2022, 1, 1))}
		Rank(hits, Parse(query, now))
		for _, h := range hits {
			if math.IsInf(h.Score, 0) || math.IsNaN(h.Score) {
				t.Errorf("%q: %s scored %v", query, h.Record.ID, h.Score)
			}
		}
	}
}

// A record inside the window that the text ranks below the wide cut is
// found by the windowed recall and ranked in; a query without time is
// passed through with its own limit.
func TestRecall(t *testing.T) {
	var store []sdk.Hit
	for i := range 100 {
		store = append(store, hit("filler"+string(rune('A'+i%26))+string(rune('a'+i/26)), 10, d(2023, 1, 1)))
	}
	store = append(store, hit("saturday", 9.5, d(2023, 5, 27).Add(8*time.Hour)))
	var asked []sdk.RecallQuery
	recall := func(_ context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		asked = append(asked, q)
		var out []sdk.Hit
		for _, h := range store {
			if q.InWindow(h.Record.When()) {
				out = append(out, h)
			}
		}
		return out[:min(q.Limit, len(out))], nil
	}
	got, err := Recall(context.Background(), recall, sdk.RecallQuery{Realm: "r", Query: "what did I do last Saturday", Limit: 5}, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[0].Record.ID != "saturday" {
		t.Fatalf("Recall answered %v, want 5 hits led by saturday", ids(got))
	}
	if len(asked) != 2 || asked[0].Limit != Candidates(5) || !asked[1].Since.Equal(d(2023, 5, 27)) || !asked[1].Until.Equal(d(2023, 5, 28)) {
		t.Fatalf("asked %+v; want a wide recall, then one inside Saturday", asked)
	}

	asked = nil
	if _, err := Recall(context.Background(), recall, sdk.RecallQuery{Realm: "r", Query: "hiking boots", Limit: 5}, now); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || asked[0].Limit != 5 {
		t.Fatalf("a query without time asked %+v; want it passed through", asked)
	}

	// The caller's own window narrows the query's; one that excludes it
	// skips the windowed recall.
	asked = nil
	q := sdk.RecallQuery{Realm: "r", Query: "last Saturday", Limit: 5, Until: d(2023, 5, 1)}
	if _, err := Recall(context.Background(), recall, q, now); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 1 || !asked[0].Until.Equal(q.Until) {
		t.Fatalf("asked %+v; want only the wide recall, with the caller's until", asked)
	}
}

// TestRecallWindowScoresStayBelowTheWideCut: a provider whose scores
// depend on the filters (hybrid fusion normalises over the candidates they
// let through) answers the window's best at the top of its own scale. A
// record the wide recall left out ranks over no hit the time boost cannot
// close, and the window's own order holds.
func TestRecallWindowScoresStayBelowTheWideCut(t *testing.T) {
	saturday := d(2023, 5, 27).Add(8 * time.Hour)
	wide := []sdk.Hit{hit("strong", 1.0, d(2023, 1, 1)), hit("good", 0.8, d(2023, 1, 2)), hit("fair", 0.7, d(2023, 1, 3)), hit("weak", 0.5, d(2023, 1, 4))}
	window := []sdk.Hit{hit("sat-a", 1.0, saturday), hit("sat-b", 0.4, saturday), hit("good", 0.9, d(2023, 1, 2))}
	recall := func(_ context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		if q.Since.IsZero() {
			return slices.Clone(wide), nil
		}
		return slices.Clone(window), nil
	}
	got, err := Recall(context.Background(), recall, sdk.RecallQuery{Realm: "r", Query: "what did I do last Saturday", Limit: 6}, now)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"strong", "good", "fair", "sat-a", "weak", "sat-b"}
	if !slices.Equal(ids(got), want) {
		t.Fatalf("Recall ranked %v, want %v", ids(got), want)
	}
	// sat-a is rescored to the wide cut (0.5) and boosted by a tenth.
	if i := slices.Index(ids(got), "sat-a"); got[i].Score > 0.5*(1+WindowBoost)+1e-9 {
		t.Fatalf("sat-a scored %v, over the wide cut and its boost", got[i].Score)
	}
}

func TestBelowWide(t *testing.T) {
	for _, tc := range []struct {
		name       string
		wide, only []float64
		want       []float64
	}{
		{"already below", []float64{9, 4}, []float64{3, 1}, []float64{3, 1}},
		{"scaled under the cut", []float64{1, 0.5}, []float64{1, 0.25}, []float64{0.5, 0.125}},
		{"no wide answer", nil, []float64{1}, []float64{1}},
		{"scores at or below zero shift", []float64{0, -1}, []float64{2, -3}, []float64{-1, -6}},
		{"not a number is left alone", []float64{math.NaN()}, []float64{2}, []float64{2}},
		{"infinity is left alone", []float64{1}, []float64{math.Inf(1), 2}, []float64{math.Inf(1), 2}},
		{"a shift past float64's range saturates", []float64{-1.7e308}, []float64{1.7e308}, []float64{-math.MaxFloat64}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mk := func(scores []float64) []sdk.Hit {
				var out []sdk.Hit
				for i, s := range scores {
					out = append(out, hit(string(rune('a'+i)), s, now))
				}
				return out
			}
			got := belowWide(mk(tc.wide), mk(tc.only))
			for i := range got {
				if got[i].Score != tc.want[i] {
					t.Fatalf("belowWide(%v, %v) scored %v at %d, want %v", tc.wide, tc.only, got[i].Score, i, tc.want)
				}
			}
		})
	}
}

// TestRankReadsADateInTheQuerysZone: an occurred_at at midnight UTC is a
// date given without a time, which the envelope shows as that date in any
// zone. With now at -07:00 Saturday begins at 07:00 UTC, and the record
// of Saturday's date was judged as Friday evening and the one of Sunday's
// as Saturday: "last Saturday" ranked the record the model reads as
// Sunday first, and the recall inside the window did not find Saturday's.
func TestRankReadsADateInTheQuerysZone(t *testing.T) {
	at := time.Date(2023, 5, 30, 10, 0, 0, 0, time.FixedZone("", -7*3600))
	for _, at := range []time.Time{at, time.Date(2023, 5, 30, 10, 0, 0, 0, time.FixedZone("", 9*3600))} {
		hits := []sdk.Hit{hit("sunday", 2, d(2023, 5, 28)), hit("saturday", 2, d(2023, 5, 27)), hit("friday", 2, d(2023, 5, 26))}
		Rank(hits, Parse("what did I do last Saturday", at))
		if got := ids(hits); got[0] != "saturday" {
			t.Errorf("Rank at %v = %v, want the record of Saturday's date first", at, got)
		}
	}

	var store []sdk.Hit
	for i := range 100 {
		store = append(store, hit("filler"+string(rune('A'+i%26))+string(rune('a'+i/26)), 10, d(2023, 1, 1)))
	}
	store = append(store, hit("saturday", 9.5, d(2023, 5, 27)))
	recall := func(_ context.Context, q sdk.RecallQuery) ([]sdk.Hit, error) {
		var out []sdk.Hit
		for _, h := range store {
			if q.InWindow(h.Record.When()) {
				out = append(out, h)
			}
		}
		return out[:min(q.Limit, len(out))], nil
	}
	got, err := Recall(context.Background(), recall, sdk.RecallQuery{Realm: "r", Query: "what did I do last Saturday", Limit: 5}, at)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0].Record.ID != "saturday" {
		t.Fatalf("Recall at %v answered %v, want Saturday's record first", at, ids(got))
	}
}
