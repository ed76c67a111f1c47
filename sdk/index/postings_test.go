package index

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// plistCase is a posting list built from known postings, to compare the
// encoded list against.
type plistCase struct {
	docs []uint32
	fs   []float32
}

func randomPostings(r *rand.Rand, n int) plistCase {
	var c plistCase
	doc := uint32(r.IntN(3))
	for range n {
		c.docs = append(c.docs, doc)
		switch r.IntN(4) {
		case 0: // not a whole number of eighths: stored as bits
			c.fs = append(c.fs, float32(r.Float64()*10)+1e-3)
		case 1: // large: more than one varint byte
			c.fs = append(c.fs, float32(r.IntN(5000))+0.125)
		default:
			c.fs = append(c.fs, float32(1+r.IntN(12)))
		}
		// Mostly neighbours, now and then a jump past one varint byte,
		// up to three (larger jumps only lengthen the docno-indexed
		// slices the tests fill, which the race step pays for).
		if r.IntN(10) == 0 {
			doc += uint32(200 + r.IntN(1<<15))
		} else {
			doc += uint32(1 + r.IntN(3))
		}
	}
	return c
}

func (c plistCase) build(dl, scope []uint32) *plist {
	l := &plist{}
	for i, d := range c.docs {
		l.add(d, c.fs[i], dl[d], scope[d])
	}
	return l
}

func TestPostingBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{1, blockSize - 1, blockSize, blockSize + 1, 3*blockSize - 1, 5 * blockSize, 700} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			c := randomPostings(r, n)
			top := c.docs[len(c.docs)-1] + 2
			dl, scope := make([]uint32, top), make([]uint32, top)
			for i := range dl {
				dl[i], scope[i] = uint32(1+r.IntN(90)), uint32(1+r.IntN(40))
			}
			l := c.build(dl, scope)
			var docs []uint32
			var fs []float32
			for d, f := range l.all() {
				docs, fs = append(docs, d), append(fs, f)
			}
			if !slices.Equal(docs, c.docs) || !slices.Equal(fs, c.fs) {
				t.Fatalf("decoded %v %v, want %v %v", docs, fs, c.docs, c.fs)
			}
			if want := (n + blockSize - 1) / blockSize; len(l.blocks) != want {
				t.Fatalf("%d blocks, want %d", len(l.blocks), want)
			}
			// Each block's entry bounds its postings and names its range.
			for bi, b := range l.blocks {
				in := c.docs[bi*blockSize : min(n, (bi+1)*blockSize)]
				if b.first != in[0] || b.last != in[len(in)-1] {
					t.Fatalf("block %d spans %d..%d, want %d..%d", bi, b.first, b.last, in[0], in[len(in)-1])
				}
				for i, d := range in {
					f := c.fs[bi*blockSize+i]
					if f > b.maxF || dl[d] < b.minDL || b.scopes&scopeBit(scope[d]) == 0 {
						t.Fatalf("block %d entry %+v does not bound doc %d (f %v, dl %d, scope %d)", bi, b, d, f, dl[d], scope[d])
					}
				}
			}
			// probe answers every docno, held or not.
			var p probe
			p.reset(l)
			for no := uint32(0); no < top; no++ {
				want := float32(0)
				if i, ok := slices.BinarySearch(c.docs, no); ok {
					want = c.fs[i]
				}
				if got := p.find(no); got != want {
					t.Fatalf("probe.find(%d) = %v, want %v", no, got, want)
				}
				if no > 1<<12 { // the gaps are long: jump within them
					no += uint32(r.IntN(4096))
				}
			}
		})
	}
}

// TestPostingCompact deletes postings inside blocks and at their edges,
// then compacts and renumbers: the lists keep exactly the rest.
func TestPostingCompact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	c := randomPostings(r, 4*blockSize+9)
	top := c.docs[len(c.docs)-1] + 1
	dl, scope := make([]uint32, top), make([]uint32, top)
	for i := range dl {
		dl[i], scope[i] = uint32(1+r.IntN(90)), 1
	}
	l := c.build(dl, scope)
	var keep plistCase
	for i, d := range c.docs {
		// Block edges, and a third of the rest.
		if i%blockSize == 0 || i%blockSize == blockSize-1 || r.IntN(3) == 0 {
			scope[d] = deadScope
			continue
		}
		keep.docs, keep.fs = append(keep.docs, d), append(keep.fs, c.fs[i])
	}
	l.compact(scope, dl)
	var docs []uint32
	var fs []float32
	for d, f := range l.all() {
		docs, fs = append(docs, d), append(fs, f)
	}
	if !slices.Equal(docs, keep.docs) || !slices.Equal(fs, keep.fs) || int(l.n) != len(keep.docs) || int(l.df) != len(keep.docs) {
		t.Fatalf("compacted to %v %v (n %d, df %d), want %v %v", docs, fs, l.n, l.df, keep.docs, keep.fs)
	}
	for bi, b := range l.blocks {
		if want := keep.docs[bi*blockSize]; b.first != want {
			t.Fatalf("block %d starts at %d, want %d", bi, b.first, want)
		}
	}
	// Renumbered densely.
	remap := make(map[uint32]uint32)
	for i, d := range keep.docs {
		remap[d] = uint32(i)
	}
	ndl, nscope := make([]uint32, len(keep.docs)), make([]uint32, len(keep.docs))
	for d, nd := range remap {
		ndl[nd], nscope[nd] = dl[d], scope[d]
	}
	l.rewrite(func(d uint32) (uint32, bool) { nd, ok := remap[d]; return nd, ok }, nscope, ndl)
	i := 0
	for d, f := range l.all() {
		if d != uint32(i) || f != keep.fs[i] {
			t.Fatalf("renumbered posting %d is %d %v, want %d %v", i, d, f, i, keep.fs[i])
		}
		i++
	}
	if i != len(keep.docs) {
		t.Fatalf("%d postings after renumbering, want %d", i, len(keep.docs))
	}
}

func TestFrequencyCode(t *testing.T) {
	for _, f := range []float32{0.125, 0.375, 1, 5, 7.875, 8, 12.75, 1 << 20, 1<<21 - 0.125, 1 << 21, 0.1, 1e-30, 3.4e38, math.Nextafter32(1, 2)} {
		b := appendF(nil, f)
		got, n := readF(b, 0)
		if got != f || n != len(b) {
			t.Errorf("frequency %v reads back as %v (%d of %d bytes)", f, got, n, len(b))
		}
	}
	if n := len(appendF(nil, 7.875)); n != 1 {
		t.Errorf("7.875 takes %d bytes, want 1", n)
	}
}

// TestScopeSkipsBlocks: documents arrive one scope after another, so a
// query in one scope can pass over the others' blocks whole. The answers
// match the reference, and the walk never met a document of the blocks
// it passed over (it would have marked each one filtered out).
func TestScopeSkipsBlocks(t *testing.T) {
	for _, work := range []int{0, math.MaxInt} {
		t.Run(fmt.Sprintf("exhaustiveWork=%d", work), func(t *testing.T) {
			defer func(w int) { exhaustiveWork = w }(exhaustiveWork)
			exhaustiveWork = work
			c := newCorpus(t, 11, 30, StatsIndex)
			for i := range 2000 {
				d := c.newDoc()
				d.ID, d.Realm, d.Scope, d.ExpiresMs = fmt.Sprintf("s%05d", i), "r1", scopes[i/500], 0
				c.put(d)
			}
			q := Query{Realm: "r1", Terms: []string{"w0", "w1", "w2", "w5"}, Scopes: []string{scopes[2]}, Limit: 10}
			c.check(q)
			ix := c.ix
			rm := ix.realms["r1"]
			f, _ := newFilter(rm, &q)
			s, qts := ix.prepare(rm, q.Terms)
			sc := ix.getScratch(len(rm.ids))
			defer ix.putScratch(sc)
			l := qts[0].list
			walk(rm, &f, &s, &qts[0], sc, 0, len(l.blocks))
			for _, d := range sc.touched {
				if rm.scopeNames[rm.scope[d]] != scopes[2] && !blockHasScope(l, d, rm.scopeIDs[scopes[2]]) {
					t.Fatalf("the walk met document %d of scope %q in a block without the query's scope", d, rm.scopeNames[rm.scope[d]])
				}
			}
			if len(sc.touched) == 0 || len(sc.touched) >= int(l.n) {
				t.Fatalf("the walk met %d of the list's %d postings; want some, not all", len(sc.touched), l.n)
			}
		})
	}
}

// blockHasScope tells whether the block of l that holds docno d has a
// document of scope id s.
func blockHasScope(l *plist, d, s uint32) bool {
	bi := l.seek(d, 0)
	return bi < len(l.blocks) && l.blocks[bi].scopes&scopeBit(s) != 0
}

// TestBlockMaxPruning builds lists whose blocks differ in their bounds
// (a run of documents holds the query's heavy terms in the title, the
// rest in the body) and checks the pruned search passes blocks over and
// still answers exactly the reference's top k, over many queries, with
// deletes inside the strong blocks and replacements.
func TestBlockMaxPruning(t *testing.T) {
	if testing.Short() {
		t.Skip("pruned searches of three corpora against whole ones, single-goroutine; the plain run checks it")
	}
	defer func(w int) { exhaustiveWork = w }(exhaustiveWork)
	defer func() { onSearch = nil }()
	exhaustiveWork = 0
	skipped := 0
	onSearch = func(n int) { skipped += n }
	for seed := range uint64(3) {
		c := newCorpus(t, 20+seed, 40, StatsIndex)
		heavy := []string{"h0", "h1", "h2", "h3"}
		for i := range 3000 {
			d := c.newDoc()
			d.ID, d.Realm, d.Scope, d.ExpiresMs, d.Tags = fmt.Sprintf("b%05d", i), "r1", scopes[i%3], 0, nil
			// A copy's fields are another document's: append to a copy.
			d.Fields = slices.Clone(d.Fields)
			for f := range d.Fields {
				d.Fields[f] = slices.Clip(d.Fields[f])
			}
			// A quarter of the documents hold each heavy term in the body;
			// runs of them in the title too, with a varying count.
			for _, h := range heavy {
				if c.rng.IntN(4) == 0 {
					d.Fields[3] = append(d.Fields[3], h)
				}
			}
			if (i/200)%5 == int(seed)%5 {
				d.Fields[1] = append(d.Fields[1], heavy[:1+c.rng.IntN(len(heavy))]...)
			}
			c.put(d)
		}
		for range 300 { // deletes and replacements, many inside strong runs
			c.step()
		}
		for range 120 {
			q := Query{Realm: "r1", NowMs: 1, Limit: 1 + c.rng.IntN(20)}
			for _, h := range heavy {
				if c.rng.IntN(3) > 0 {
					q.Terms = append(q.Terms, h)
				}
			}
			q.Terms = append(q.Terms, c.word())
			if c.rng.IntN(2) == 0 {
				q.Scopes = []string{scopes[c.rng.IntN(3)]}
			}
			c.check(q)
		}
	}
	if skipped == 0 {
		t.Fatal("no search passed a block over by its bound: the test does not reach block-max pruning")
	}
}

// TestPrunedSearchFuzzCorpora compares pruned and exhaustive answers on
// random corpora shaped like the benchmark's (Zipf words, many scopes),
// big enough for many blocks per list.
func TestPrunedSearchFuzzCorpora(t *testing.T) {
	defer func(w int) { exhaustiveWork = w }(exhaustiveWork)
	r := rand.New(rand.NewPCG(8, 9))
	ix, err := New(Options{Weights: ftsWeights})
	if err != nil {
		t.Fatal(err)
	}
	words := make([]string, 300)
	for i := range words {
		words[i] = fmt.Sprintf("z%d", i)
	}
	z := rand.NewZipf(r, 1.1, 3, uint64(len(words)-1))
	field := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = words[z.Uint64()]
		}
		return out
	}
	for i := range 6000 {
		d := Doc{ID: fmt.Sprintf("f%05d", i), Realm: "r", Scope: fmt.Sprintf("s%d", i%23),
			Fields: [][]string{field(r.IntN(2)), field(1 + r.IntN(5)), field(r.IntN(10)), field(r.IntN(40))}}
		if err := ix.Put(d); err != nil {
			t.Fatal(err)
		}
		if i%7 == 0 {
			ix.Delete("r", fmt.Sprintf("f%05d", r.IntN(i+1)))
		}
	}
	for range 300 {
		q := Query{Realm: "r", Terms: slices.Compact(slices.Sorted(slices.Values(field(1 + r.IntN(5))))), Limit: 1 + r.IntN(15),
			Scopes: []string{fmt.Sprintf("s%d", r.IntN(23)), fmt.Sprintf("s%d", r.IntN(23))}}
		exhaustiveWork = math.MaxInt
		want, _ := ix.Search(q)
		exhaustiveWork = 0
		got, _ := ix.Search(q)
		if !slices.Equal(got, want) {
			t.Fatalf("query %q: pruned %v, exhaustive %v", strings.Join(q.Terms, " "), got, want)
		}
	}
}

// TestListBound: the bound from a list's peaks is its best share, for
// any idf and average length, however the list was built or compacted.
func TestListBound(t *testing.T) {
	if testing.Short() {
		t.Skip("bounds over fifty generated lists, single-goroutine; the plain run checks it")
	}
	r := rand.New(rand.NewPCG(12, 13))
	for range 50 {
		c := randomPostings(r, 1+r.IntN(400))
		top := c.docs[len(c.docs)-1] + 1
		dl, scope := make([]uint32, top), make([]uint32, top)
		for i := range dl {
			dl[i], scope[i] = uint32(1+r.IntN(200)), uint32(1+r.IntN(3))
		}
		l := c.build(dl, scope)
		if r.IntN(2) == 0 {
			for _, d := range c.docs {
				if r.IntN(3) == 0 {
					scope[d] = deadScope
				}
			}
			l.compact(scope, dl)
		}
		s := scorer{k1: 1.2, b: 0.75, avgdl: 1 + r.Float64()*100}
		idf := r.Float64() * 8
		want := 0.0
		for d, f := range l.all() {
			want = max(want, s.share(idf, f, dl[d]))
		}
		if got := l.bound(&s, idf); got != want {
			t.Fatalf("bound %v, want %v (peaks %v)", got, want, l.peaks)
		}
		if len(l.peaks) > 40 {
			t.Fatalf("%d peaks for %d postings", len(l.peaks), l.n)
		}
	}
}

// TestExpiryArrivesLate: a realm whose documents had no expiry skips the
// expiry check until one with an expiry arrives; from then on, and after
// a snapshot, expired documents are left out.
func TestExpiryArrivesLate(t *testing.T) {
	ix, err := New(Options{Weights: ftsWeights})
	if err != nil {
		t.Fatal(err)
	}
	put := func(id string, expires int64) {
		t.Helper()
		if err := ix.Put(Doc{ID: id, Realm: "r", Scope: "s", ExpiresMs: expires, Fields: [][]string{nil, {"apple"}, nil, nil}}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(ix *Index) []string {
		t.Helper()
		hits, err := ix.Search(Query{Realm: "r", Terms: []string{"apple"}, NowMs: 100, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range hits {
			out = append(out, h.ID)
		}
		slices.Sort(out)
		return out
	}
	put("a", 0)
	if got := ids(ix); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("before any expiry: %v", got)
	}
	put("b", 50)  // expired at 100
	put("c", 500) // not yet
	want := []string{"a", "c"}
	if got := ids(ix); !slices.Equal(got, want) {
		t.Fatalf("after expiring documents arrived: %v, want %v", got, want)
	}
	back := snapshotRoundTrip(t, ix)
	if got := ids(back); !slices.Equal(got, want) {
		t.Fatalf("after a snapshot: %v, want %v", got, want)
	}
}
