package coordinator

import (
	"fmt"
	"slices"
	"testing"

	"github.com/memhost/memhost/sdk"
)

func TestSpreadThreads(t *testing.T) {
	hit := func(id, thread string, score float64) sdk.Hit {
		h := sdk.Hit{Record: sdk.Record{ID: id, Scope: sdk.IdentityScope("alice")}, Score: score}
		if thread != "" {
			h.Record.Thread = &sdk.Thread{ID: thread}
		}
		return h
	}
	for _, tc := range []struct {
		name string
		hits []sdk.Hit
		want []string
	}{
		{"a crowded thread gives way to others that score well",
			[]sdk.Hit{hit("a1", "A", 9), hit("a2", "A", 8), hit("a3", "A", 7), hit("b1", "B", 5), hit("c1", "C", 4.5)},
			[]string{"a1", "b1", "c1", "a2", "a3"}},
		{"a weak other thread stays behind",
			[]sdk.Hit{hit("a1", "A", 9), hit("a2", "A", 8), hit("b1", "B", 3.9)},
			[]string{"a1", "a2", "b1"}},
		{"one thread keeps its order",
			[]sdk.Hit{hit("a1", "A", 3), hit("a2", "A", 2), hit("a3", "A", 1)},
			[]string{"a1", "a2", "a3"}},
		{"records outside threads are never discounted",
			[]sdk.Hit{hit("x", "", 9), hit("y", "", 8), hit("a1", "A", 7), hit("z", "", 6)},
			[]string{"x", "y", "a1", "z"}},
		{"ties keep recall's order",
			[]sdk.Hit{hit("a1", "A", 4), hit("a2", "A", 4), hit("b1", "B", 2), hit("c1", "C", 2)},
			[]string{"a1", "a2", "b1", "c1"}},
		{"one thread id in two scopes is two threads",
			[]sdk.Hit{hit("a1", "A", 10), {Record: sdk.Record{ID: "shared", Scope: sdk.RealmScope, Thread: &sdk.Thread{ID: "A"}}, Score: 9}, hit("b1", "B", 6)},
			[]string{"a1", "shared", "b1"}},
		{"scores that are not positive rank by position",
			[]sdk.Hit{hit("a1", "A", 0), hit("a2", "A", 0), hit("a3", "A", 0), hit("b1", "B", 0)},
			[]string{"a1", "a2", "b1", "a3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := slices.Clone(tc.hits)
			var got []string
			for _, h := range spreadThreads(in) {
				got = append(got, h.Record.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if !slices.EqualFunc(in, tc.hits, func(a, b sdk.Hit) bool { return a.Record.ID == b.Record.ID }) {
				t.Error("the caller's hits were reordered in place")
			}
		})
	}
}

// TestTurnSpreadsACrowdedThread: the best matches of a turn crowd into
// one conversation; the injection still brings each other conversation's
// best turn. (The spread reorders the turn's candidates, MaxEntries and
// the spare ones: here 5.) Thread neighbours are off: the other trip
// turns would join as the first one's.
func TestTurnSpreadsACrowdedThread(t *testing.T) {
	f := newFixture(t, func(c *Config, _ *Options) { c.MaxEntries, c.ThreadNeighbours = 3, 0 })
	var recs []sdk.Record
	for i := range 3 {
		r := rec(fmt.Sprintf("Trip turn %d", i), "lisbon flight hotel")
		r.Thread = &sdk.Thread{ID: "trip", Seq: int64(i)}
		recs = append(recs, r)
	}
	other := rec("Budget turn", "lisbon flight costs")
	other.Thread = &sdk.Thread{ID: "budget", Seq: 1}
	third := rec("Visa turn", "flight hotel visa")
	third.Thread = &sdk.Thread{ID: "visa", Seq: 1}
	ids := f.add(append(recs, other, third)...)
	res := f.turn(alice, "s", "lisbon flight hotel")
	if len(res.RecordIDs) != 3 || !slices.Contains(ids[:3], res.RecordIDs[0]) ||
		!slices.Contains(res.RecordIDs, ids[3]) || !slices.Contains(res.RecordIDs, ids[4]) {
		t.Fatalf("injected %v: want one trip turn of %v first, then the budget %s and visa %s turns", res.RecordIDs, ids[:3], ids[3], ids[4])
	}
	// Recall itself stays a pure ranking.
	hits, err := f.c.Recall(t.Context(), alice, "lisbon flight hotel", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if h.Record.Thread == nil || h.Record.Thread.ID != "trip" {
			t.Fatalf("recall answered %s of thread %v among its top 3; the ranking must not be spread", h.Record.ID, h.Record.Thread)
		}
	}
}
