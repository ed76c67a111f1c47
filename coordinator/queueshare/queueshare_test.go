package queueshare

import "testing"

func TestShares(t *testing.T) {
	cases := []struct {
		name  string
		size  int
		sends []string // realms, in order, each holding a place if it may
		want  map[string]int
	}{
		{"one realm holds half", 8, repeat("a", 10), map[string]int{"a": 4}},
		{"a place of one", 1, repeat("a", 3), map[string]int{"a": 1}},
		{"two floods a third each", 12, roundRobin(20, "a", "b"), map[string]int{"a": 4, "b": 4}},
		{"a quiet realm after two floods", 12, append(roundRobin(20, "a", "b"), "c", "c"), map[string]int{"a": 4, "b": 4, "c": 2}},
		{"three floods", 16, roundRobin(20, "a", "b", "c"), map[string]int{"a": 4, "b": 4, "c": 4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.size)
			got := map[string]int{}
			for _, realm := range c.sends {
				if s.Hold(realm) {
					got[realm]++
				}
			}
			for realm, n := range c.want {
				if got[realm] != n {
					t.Errorf("%s holds %d places, want %d (all: %v)", realm, got[realm], n, got)
				}
			}
			if total := sum(got); total > c.size {
				t.Errorf("%d places held of %d", total, c.size)
			}
		})
	}
}

func TestReleaseGivesPlacesBack(t *testing.T) {
	s := New(4)
	for s.Hold("a") {
	}
	if s.Hold("a") {
		t.Fatal("a realm past its share took a place")
	}
	s.Release("a")
	if !s.Hold("a") {
		t.Fatal("a place given back was not taken again")
	}
	s.Release("nobody") // a release without a hold changes nothing
	s.Release("a")
	s.Release("a")
	if s.total != 0 || len(s.held) != 0 {
		t.Fatalf("after every place came back: total %d, held %v", s.total, s.held)
	}
}

func repeat(realm string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = realm
	}
	return out
}

// roundRobin answers n sends of each realm, taking turns.
func roundRobin(n int, realms ...string) []string {
	var out []string
	for range n {
		out = append(out, realms...)
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
