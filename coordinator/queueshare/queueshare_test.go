package queueshare

import (
	"fmt"
	"slices"
	"testing"
)

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
	if s.total != 0 || len(s.realms) != 0 {
		t.Fatalf("after every place came back: total %d, realms %v", s.total, s.realms)
	}
}

// TestIdentitiesShareTheirRealm: one identity's flood leaves places for
// the other identities of its realm, as one realm's leaves for the other
// realms (bob's turns used to find alice's flood holding all of their
// realm's share), each newcomer after several floods too (a fourth found
// none once three held three quarters), and a realm's many identities
// leave places for another realm.
func TestIdentitiesShareTheirRealm(t *testing.T) {
	type send struct{ realm, identity string }
	flood := func(n int, realm, identity string) []send {
		out := make([]send, n)
		for i := range out {
			out[i] = send{realm, identity}
		}
		return out
	}
	many := func(n int, realm string, identities int) []send {
		var out []send
		for range n {
			for i := range identities {
				out = append(out, send{realm, fmt.Sprint("user", i)})
			}
		}
		return out
	}
	cases := []struct {
		name  string
		size  int
		sends []send
		want  map[send]int
	}{
		{"a lone identity holds three eighths", 16, flood(20, "r", "alice"),
			map[send]int{{"r", "alice"}: 6}},
		{"a newcomer to a flooded realm", 16, append(flood(20, "r", "alice"), flood(10, "r", "bob")...),
			map[send]int{{"r", "alice"}: 6, {"r", "bob"}: 3}},
		{"a fourth after three floods", 16, slices.Concat(flood(20, "r", "alice"), flood(10, "r", "bob"), flood(10, "r", "carol"), flood(10, "r", "dan")),
			map[send]int{{"r", "alice"}: 6, {"r", "bob"}: 3, {"r", "carol"}: 1, {"r", "dan"}: 1}},
		{"another realm's newcomer", 16, append(flood(20, "r", "alice"), flood(10, "s", "carol")...),
			map[send]int{{"r", "alice"}: 6, {"s", "carol"}: 3}},
		{"a realm of many identities leaves room", 16, append(many(10, "r", 10), flood(10, "s", "carol")...),
			map[send]int{{"s", "carol"}: 2}},
		{"a place of one", 1, append(flood(2, "r", "alice"), flood(1, "r", "bob")...),
			map[send]int{{"r", "alice"}: 1, {"r", "bob"}: 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := New(c.size)
			got := map[send]int{}
			for _, x := range c.sends {
				if s.HoldFor(x.realm, x.identity) {
					got[x]++
				}
			}
			for k, n := range c.want {
				if got[k] != n {
					t.Errorf("%s/%s holds %d places, want %d (all: %v)", k.realm, k.identity, got[k], n, got)
				}
			}
			if s.total > c.size {
				t.Errorf("%d places held of %d", s.total, c.size)
			}
			for k, n := range got {
				for range n {
					s.ReleaseFor(k.realm, k.identity)
				}
			}
			s.ReleaseFor("r", "nobody") // a release without a hold changes nothing
			if s.total != 0 || len(s.realms) != 0 {
				t.Fatalf("after every place came back: total %d, realms %v", s.total, s.realms)
			}
		})
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
