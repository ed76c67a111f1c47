package index

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// TestMaxScoreMatchesExhaustive checks the document-at-a-time search
// against the term-at-a-time walk of every list on a corpus shaped like
// memhost bench's: words drawn with a steep Zipf law, so a query mixes
// terms nearly every document holds (their idf clamped to 1e-6, their
// scores all but flat) with rare ones; most documents in other
// identities' scopes; limits of 10 and 50; excluded ids and expiry. Each
// query runs with seeding on and off, and walked whole or split in two
// halves side by side, and the answers must be equal bit for bit, ties
// included.
func TestMaxScoreMatchesExhaustive(t *testing.T) {
	defer func(w, s, p int) { exhaustiveWork, seedWork, splitWork = w, s, p }(exhaustiveWork, seedWork, splitWork)
	defer func() { onSearch = nil }()
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // a split needs a spare core
	}
	r := rand.New(rand.NewPCG(7, 8))
	z := rand.NewZipf(r, 1.1, 2, 2999)
	words := func(lo, hi int) []string {
		out := make([]string, lo+r.IntN(hi-lo+1))
		for i := range out {
			out[i] = fmt.Sprintf("w%d", z.Uint64())
		}
		return out
	}
	ix, _ := New(Options{Weights: ftsWeights})
	const docs = 20000
	for i := range docs {
		scope := "realm"
		if r.IntN(10) < 7 {
			scope = fmt.Sprintf("identity:u%d", r.IntN(30))
		}
		d := Doc{ID: fmt.Sprintf("d%05d", i), Realm: "r", Scope: scope, Fields: [][]string{nil, words(3, 7), words(6, 12), words(10, 40)}}
		if i%50 == 0 {
			d.ExpiresMs = int64(1 + r.IntN(3)) // some expired at query time 2
		}
		if i%9 == 0 {
			d.Seq = uint64(i / 9) // ties on score fall to seq, then id
		}
		if err := ix.Put(d); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < docs; i += 7 {
		ix.Delete("r", fmt.Sprintf("d%05d", i))
	}
	skipped := 0
	onSearch = func(n int) { skipped += n }
	for i := range 400 {
		q := Query{Realm: "r", Terms: words(2, 6), Limit: 10, NowMs: 2, Scopes: []string{fmt.Sprintf("identity:u%d", r.IntN(30)), "realm"}}
		switch i % 4 {
		case 1:
			q.Limit = 50
		case 2:
			q.Scopes = nil
		case 3:
			for range 20 {
				q.ExcludeIDs = append(q.ExcludeIDs, fmt.Sprintf("d%05d", r.IntN(docs)))
			}
		}
		exhaustiveWork = math.MaxInt
		want, err := ix.Search(q)
		if err != nil {
			t.Fatal(err)
		}
		for _, seed := range []int{4096, 0} {
			for _, split := range []int{math.MaxInt, 0} {
				exhaustiveWork, seedWork, splitWork = 0, seed, split
				got, err := ix.Search(q)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("query %v (seedWork %d, splitWork %d):\n got %v\nwant %v", q, seed, split, got, want)
				}
			}
		}
	}
	if skipped == 0 {
		t.Fatal("no search passed over a block by its bound")
	}
}
