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
// halves, side by side or the second walked first (so the first meets
// its whole theta at once), and the answers must be equal bit for bit,
// ties included.
func TestMaxScoreMatchesExhaustive(t *testing.T) {
	defer func(w, s, p int) { exhaustiveWork, seedWork, splitWork = w, s, p }(exhaustiveWork, seedWork, splitWork)
	defer func() { splitInTurn = false }()
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
			for _, split := range []int{math.MaxInt, 0, -1} {
				// -1: split, the second half walked before the first
				exhaustiveWork, seedWork, splitWork, splitInTurn = 0, seed, max(split, 0), split < 0
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

// TestSplitMatchesExhaustive: a split search over small, skewed lists,
// where one half often finishes before the other starts, so the other
// meets a theta high enough at its first poll to move lists from walked to
// probed while it completes a document. It used to probe and add again
// the shares it had walked, overrate that document and prune true hits.
func TestSplitMatchesExhaustive(t *testing.T) {
	defer func(w, s, p int) { exhaustiveWork, seedWork, splitWork = w, s, p }(exhaustiveWork, seedWork, splitWork)
	defer func() { splitInTurn = false }()
	if runtime.GOMAXPROCS(0) < 2 {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // a split needs a spare core
	}
	for seed := range uint64(4) {
		r := rand.New(rand.NewPCG(seed, 77))
		ix, _ := New(Options{Weights: ftsWeights})
		const vocab = 60
		word := func() string { return fmt.Sprint("w", int(r.ExpFloat64()*vocab/4)%vocab) }
		field := func(n int) []string {
			out := make([]string, r.IntN(n+1))
			for i := range out {
				out[i] = word()
			}
			return out
		}
		var live []string
		for i := range 3000 {
			if r.IntN(5) == 0 && len(live) > 0 {
				k := r.IntN(len(live))
				ix.Delete("r", live[k])
				live = slices.Delete(live, k, k+1)
				continue
			}
			id := fmt.Sprint("d", i)
			d := Doc{ID: id, Realm: "r", Scope: fmt.Sprint("s", int(r.ExpFloat64()*10/3)%10),
				Fields: [][]string{field(2), field(3), field(2), field(8)}, Seq: uint64(1 + r.IntN(3000))}
			if err := ix.Put(d); err != nil {
				t.Fatal(err)
			}
			live = append(live, id)
		}
		for range 300 {
			q := Query{Realm: "r", Limit: 1 + r.IntN(30), NowMs: 1}
			for range 1 + r.IntN(4) {
				if w := word(); !slices.Contains(q.Terms, w) {
					q.Terms = append(q.Terms, w)
				}
			}
			if r.IntN(2) == 0 {
				q.Scopes = []string{fmt.Sprint("s", r.IntN(10)), fmt.Sprint("s", r.IntN(10))}
			}
			exhaustiveWork, seedWork, splitWork, splitInTurn = math.MaxInt, 4096, math.MaxInt, false
			want, _ := ix.Search(q)
			for _, inTurn := range []bool{false, true} {
				exhaustiveWork, seedWork, splitWork, splitInTurn = 0, 0, 64, inTurn
				if got, _ := ix.Search(q); !slices.Equal(got, want) {
					t.Fatalf("seed %d, query %v (halves in turn %v):\n got %v\nwant %v", seed, q, inTurn, got, want)
				}
			}
		}
	}
}

// TestGoWaitRaisesPanics: a panic on a split search's goroutine reaches
// the searching goroutine, where a server's recovery sees it, rather than
// ending the process.
func TestGoWaitRaisesPanics(t *testing.T) {
	wait := goWait(func() { panic("half failed") })
	defer func() {
		if p := recover(); p != "half failed" {
			t.Fatalf("recovered %v, want the half's panic", p)
		}
	}()
	wait()
	t.Fatal("wait returned after a panic")
}
