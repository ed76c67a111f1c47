package index

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// TestReplace: an index whose realm (or every realm) was replaced by a
// rebuilt one answers exactly as an index built with those documents from
// the start, statistics across realms included.
func TestReplace(t *testing.T) {
	doc := func(realm, id string, seq uint64, words ...string) Doc {
		return Doc{ID: id, Realm: realm, Scope: "realm", Seq: seq, Fields: [][]string{nil, words, nil, nil}}
	}
	oldA := []Doc{doc("a", "1", 1, "coffee", "beans"), doc("a", "2", 2, "stale", "coffee")}
	newA := []Doc{doc("a", "1", 1, "coffee", "beans"), doc("a", "3", 3, "coffee", "roast", "coffee")}
	b := []Doc{doc("b", "9", 4, "coffee", "tea"), doc("b", "8", 5, "harbour")}
	build := func(docs ...[]Doc) *Index {
		ix, err := New(Options{Weights: ftsWeights})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range slices.Concat(docs...) {
			if err := ix.Put(d); err != nil {
				t.Fatal(err)
			}
		}
		return ix
	}
	for _, tc := range []struct {
		name  string
		realm string
		live  [][]Doc // before
		fresh [][]Doc // the rebuilt index
		want  [][]Doc // built directly
	}{
		{name: "one realm", realm: "a", live: [][]Doc{oldA, b}, fresh: [][]Doc{newA}, want: [][]Doc{newA, b}},
		{name: "one realm emptied", realm: "a", live: [][]Doc{oldA, b}, fresh: nil, want: [][]Doc{b}},
		{name: "every realm", realm: "", live: [][]Doc{oldA, b}, fresh: [][]Doc{newA}, want: [][]Doc{newA}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ix := build(tc.live...)
			if err := ix.Replace(build(tc.fresh...), tc.realm); err != nil {
				t.Fatal(err)
			}
			want := build(tc.want...)
			if ix.Len() != want.Len() {
				t.Fatalf("Len = %d, want %d", ix.Len(), want.Len())
			}
			for _, realm := range []string{"a", "b"} {
				q := Query{Realm: realm, Terms: []string{"coffee", "roast", "stale", "harbour"}, Limit: 10}
				got, err1 := ix.Search(q)
				exp, err2 := want.Search(q)
				if err1 != nil || err2 != nil || fmt.Sprint(got) != fmt.Sprint(exp) {
					t.Fatalf("realm %s: Search = %v (%v), want %v (%v)", realm, got, err1, exp, err2)
				}
			}
		})
	}
	t.Run("other options", func(t *testing.T) {
		other, _ := New(Options{Weights: []float64{1, 1, 1, 1}})
		if err := build(oldA).Replace(other, "a"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Replace with other weights = %v, want ErrInvalid", err)
		}
		ix := build(oldA)
		if err := ix.Replace(ix, ""); !errors.Is(err, ErrInvalid) {
			t.Fatalf("Replace with itself = %v, want ErrInvalid", err)
		}
	})
}
