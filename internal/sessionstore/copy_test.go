package sessionstore

import (
	"context"
	"slices"
	"testing"

	"github.com/memhost/memhost/coordinator"
)

// TestVisitsSeeACopyOfTheCachedState: fn works on a copy of what the cache
// holds, so a visit whose write fails or that answers false leaves the
// cache as it was, and a slice an earlier visit kept is never changed by a
// later one. The cached slices are given spare capacity, and the visits
// change them in place (the `s = s[:0]` filter idiom, element writes, an
// append that fits), so a store that shared its backing arrays with fn
// would show every such change.
func TestVisitsSeeACopyOfTheCachedState(t *testing.T) {
	seed := func(st *coordinator.SessionState) bool {
		st.InjectedBytes = 30
		st.InjectedIDs = append(make([]string, 0, 16), "a", "b", "c")
		st.SweepIDs = append(make([]string, 0, 16), "x", "y")
		return true
	}
	want := coordinator.SessionState{InjectedBytes: 30, InjectedIDs: []string{"a", "b", "c"}, SweepIDs: []string{"x", "y"}}
	cancelled, cancel := context.WithCancel(ctx)
	cancel() // the cache answers the read; the write then fails
	cases := []struct {
		name string
		ctx  context.Context
		fn   func(*coordinator.SessionState) bool
		fail bool
	}{
		{"filter in place, write fails", cancelled, func(st *coordinator.SessionState) bool {
			kept := st.InjectedIDs[:0]
			for _, id := range st.InjectedIDs {
				if id != "a" {
					kept = append(kept, id)
				}
			}
			st.InjectedIDs = kept
			return true
		}, true},
		{"append into spare capacity and overwrite, write fails", cancelled, func(st *coordinator.SessionState) bool {
			st.InjectedIDs = append(st.InjectedIDs, "d")
			st.SweepIDs = append(st.SweepIDs, "z")
			st.SweepIDs[0] = "changed"
			return true
		}, true},
		{"element write, answers no change", ctx, func(st *coordinator.SessionState) bool {
			st.InjectedIDs[1] = "changed"
			slices.Reverse(st.SweepIDs)
			return false
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, _ := openStore(t, t.TempDir(), Options{})
			k := key("default", "s")
			if err := s.Update(ctx, k, seed); err != nil {
				t.Fatal(err)
			}
			// An earlier visit keeps the slices it was shown, as a turn
			// keeps a ready sweep's picks.
			var heldIDs, heldSweep []string
			if err := s.Update(ctx, k, func(st *coordinator.SessionState) bool {
				heldIDs, heldSweep = st.InjectedIDs, st.SweepIDs
				return false
			}); err != nil {
				t.Fatal(err)
			}
			err := s.Update(c.ctx, k, c.fn)
			if (err != nil) != c.fail {
				t.Fatalf("Update = %v, want failure %v", err, c.fail)
			}
			if got := get(t, s, k); !equalState(got, want) {
				t.Errorf("the cache after the visit holds %+v, want %+v", got, want)
			}
			if !slices.Equal(heldIDs, want.InjectedIDs) || !slices.Equal(heldSweep, want.SweepIDs) {
				t.Errorf("a later visit changed the slices an earlier one kept: %v %v", heldIDs, heldSweep)
			}
		})
	}
}

func equalState(a, b coordinator.SessionState) bool {
	return a.InjectedBytes == b.InjectedBytes && a.Epoch == b.Epoch &&
		slices.Equal(a.InjectedIDs, b.InjectedIDs) && slices.Equal(a.SweepIDs, b.SweepIDs) && (a.SweepIDs == nil) == (b.SweepIDs == nil)
}
