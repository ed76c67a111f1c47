package index

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPlaceKeepsItsLeastIDs: random adds and removes at a few places, some
// crowded far past placeHead, keep each place's least ids in order
// (rm.threads) and every id once (the head and the rest together), as a
// sorted list of the place's ids would; emptying a crowded place from its
// rest sheds the removed ids from the heap as it goes.
func TestPlaceKeepsItsLeastIDs(t *testing.T) {
	if testing.Short() {
		t.Skip("single-goroutine, against a reference over random writes; the plain run checks it")
	}
	if placeHead < MaxPlaceReads || placeHead < MaxPlaceDocs+1 {
		t.Fatalf("placeHead %d holds fewer ids than a reader asks for", placeHead)
	}
	rng := rand.New(rand.NewPCG(3, 5))
	rm := newRealm()
	places := []threadKey{{"realm", "t", 0}, {"realm", "t", 1}, {"realm", "u", 0}}
	ref := map[threadKey][]string{}
	check := func(step int) {
		t.Helper()
		for _, k := range places {
			want := ref[k]
			if got := rm.threads[k]; !slices.Equal(got, want[:min(len(want), placeHead)]) {
				t.Fatalf("step %d, place %v: head %v, want %v", step, k, got, want[:min(len(want), placeHead)])
			}
			all := slices.Clone(rm.threads[k])
			if r := rm.crowds[k]; r != nil {
				if r.live != len(want)-len(rm.threads[k]) {
					t.Fatalf("step %d, place %v: the rest counts %d live ids, want %d", step, k, r.live, len(want)-len(rm.threads[k]))
				}
				if len(r.ids) > 2*r.live+placeHead {
					t.Fatalf("step %d, place %v: %d live ids of the rest in a heap of %d", step, k, r.live, len(r.ids))
				}
				gone := map[string]int{}
				for id, n := range r.gone {
					gone[id] = n
				}
				for _, id := range r.ids {
					if gone[id] > 0 {
						gone[id]--
						continue
					}
					all = append(all, id)
				}
			}
			slices.Sort(all)
			if !slices.Equal(all, want) {
				t.Fatalf("step %d, place %v: holds %d ids, want %d", step, k, len(all), len(want))
			}
			if len(want) <= placeHead && rm.crowds[k] != nil {
				t.Fatalf("step %d, place %v: %d ids keep a rest", step, k, len(want))
			}
			if _, kept := rm.threads[k]; kept != (len(want) > 0) {
				t.Fatalf("step %d, place %v: kept %v with %d ids", step, k, kept, len(want))
			}
		}
	}
	remove := func(k threadKey, i int) {
		rm.placeRemove(k, ref[k][i])
		ref[k] = slices.Delete(ref[k], i, i+1)
	}
	for step := range 20000 {
		k := places[rng.IntN(len(places))]
		if at := ref[k]; len(at) > 0 && rng.IntN(5) < 2 {
			// Often from the head, which the rest then refills.
			i := rng.IntN(len(at))
			if rng.IntN(2) == 0 {
				i = rng.IntN(min(len(at), placeHead))
			}
			remove(k, i)
		} else {
			id := fmt.Sprintf("r%05d", rng.IntN(100000))
			i, found := slices.BinarySearch(ref[k], id)
			if found {
				continue
			}
			rm.placeAdd(k, id)
			ref[k] = slices.Insert(ref[k], i, id)
		}
		if step%97 == 0 {
			check(step)
		}
	}
	for _, k := range places {
		if len(ref[k]) < 10*placeHead {
			t.Fatalf("place %v holds %d ids: it never crowded", k, len(ref[k]))
		}
	}
	for k := places[0]; len(ref[k]) > 0; {
		remove(k, len(ref[k])-1-rng.IntN(min(len(ref[k]), 3)))
		check(-len(ref[k]))
	}
}
