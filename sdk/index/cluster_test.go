package index

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// withClusterMin runs the test with clusterMin at n.
func withClusterMin(t *testing.T, n int) {
	saved := clusterMin
	clusterMin = n
	t.Cleanup(func() { clusterMin = saved })
}

// TestClusterMatchesReference: realms renumbered in scope order every so
// often as they grow and churn answer every query as the reference does,
// bit for bit, ties included, with deletes, replaces, supersedes, expiry,
// tags, time windows and thread context; and so does their snapshot.
func TestClusterMatchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("single-goroutine exactness over random corpora; the plain run checks it")
	}
	defer func(w int) { exhaustiveWork = w }(exhaustiveWork)
	withClusterMin(t, 0)
	for i, tc := range []struct {
		name  string
		docs  int
		vocab int
		stats Stats
		work  int
		ctx   float64
	}{
		{"exhaustive", 1200, 60, StatsIndex, math.MaxInt, 0},
		{"pruned", 2000, 200, StatsRealm, 0, 0},
		{"thread context", 1500, 80, StatsIndex, 0, 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exhaustiveWork = tc.work
			c := newThreadCorpus(t, uint64(200+i), tc.vocab, tc.stats, tc.ctx)
			clustered := 0
			for n := 1; n <= tc.docs; n++ {
				c.step()
				if n%150 == 0 {
					clustered += c.ix.Cluster(0)
					for _, realm := range realms {
						if out := c.ix.Unclustered(realm); out != 0 {
							t.Fatalf("realm %s: %d documents out of scope order after Cluster", realm, out)
						}
						checkCounts(t, c.ix.realms[realm])
					}
				}
				if n%37 == 0 {
					c.check(c.query())
				}
			}
			if clustered == 0 {
				t.Fatal("Cluster renumbered no realm")
			}
			c.ix.Cluster(0)
			for range 200 {
				c.check(c.query())
			}
			back := snapshotRoundTrip(t, c.ix)
			for range 100 {
				q := c.query()
				got, err := back.Search(q)
				if err != nil {
					t.Fatal(err)
				}
				if want := c.ref.search(q); !slices.Equal(got, want) {
					t.Fatalf("after the snapshot, query %+v:\n got %v\nwant %v", q, got, want)
				}
			}
		})
	}
}

// checkCounts checks what a realm counts against what it holds: its live
// and deleted slots, and each list's postings, live and deleted, and bytes.
func checkCounts(t *testing.T, rm *realm) {
	t.Helper()
	if rm == nil {
		return
	}
	dead := 0
	for no, s := range rm.scope {
		if s == deadScope {
			dead++
		} else if rm.byID[rm.ids[no]] != uint32(no) {
			t.Fatalf("document %q at docno %d is looked up at %d", rm.ids[no], no, rm.byID[rm.ids[no]])
		}
	}
	if dead != rm.dead || len(rm.scope)-dead != rm.live || len(rm.byID) != rm.live {
		t.Fatalf("realm counts %d live and %d deleted slots, holds %d and %d (%d ids)", rm.live, rm.dead, len(rm.scope)-dead, dead, len(rm.byID))
	}
	for tid := range rm.lists {
		l := &rm.lists[tid]
		var n, gone int32
		for d := range l.all() {
			n++
			if rm.scope[d] == deadScope {
				gone++
			}
		}
		if n != l.n || gone != l.dead || n-gone != l.df {
			t.Fatalf("term %q counts %d postings, %d deleted, df %d; holds %d, %d deleted", rm.termNames[tid], l.n, l.dead, l.df, n, gone)
		}
		if err := l.check(len(rm.ids)); err != nil {
			t.Fatalf("term %q: %v", rm.termNames[tid], err)
		}
	}
}

// TestClusterKeepsVectors: hybrid answers are the reference's through
// renumbering, which moves every vector's owner.
func TestClusterKeepsVectors(t *testing.T) {
	if testing.Short() {
		t.Skip("single-goroutine exactness over random corpora; the plain run checks it")
	}
	withClusterMin(t, 0)
	c := &vecCorpus{corpus: newThreadCorpus(t, 300, 40, StatsIndex, 0.5), vecs: map[string]refVec{}}
	for n := 1; n <= 1500; n++ {
		c.step()
		if n%200 == 0 {
			c.ix.Cluster(0)
			checkVectorLists(t, c.ix)
		}
		if n%41 == 0 {
			c.check(c.ix, c.query())
		}
	}
	c.ix.Cluster(0)
	checkVectorLists(t, c.ix)
	for range 200 {
		c.check(c.ix, c.query())
	}
}

// scopedCorpus puts n documents of one realm, spread at random over 20
// identities' scopes and the realm's, each holding the word "common".
func scopedCorpus(t *testing.T, n int) *Index {
	ix, _ := New(Options{Weights: ftsWeights})
	r := rand.New(rand.NewPCG(5, 6))
	for i := range n {
		scope := "realm"
		if r.IntN(10) < 7 {
			scope = fmt.Sprintf("identity:u%02d", r.IntN(20))
		}
		d := Doc{ID: fmt.Sprintf("d%05d", i), Realm: "r", Scope: scope,
			Fields: [][]string{nil, {"common", fmt.Sprint("t", r.IntN(50))}, nil, {fmt.Sprint("b", r.IntN(500))}}}
		if err := ix.Put(d); err != nil {
			t.Fatal(err)
		}
	}
	return ix
}

// TestClusterGroupsBlocksByScope: documents numbered in arrival order
// leave one identity's documents in nearly every block of a common word's
// list; renumbered, in about as many blocks as they fill, so a query of
// that identity passes over the rest by their scope bits.
func TestClusterGroupsBlocksByScope(t *testing.T) {
	withClusterMin(t, 1000)
	ix := scopedCorpus(t, 12000)
	rm := ix.realms["r"]
	holding := func() (blocks, total int) {
		sid := rm.scopeIDs["identity:u07"]
		l := &rm.lists[rm.termIDs["common"]]
		for _, b := range l.blocks {
			if b.scopes&scopeBit(sid) != 0 {
				blocks++
			}
		}
		return blocks, len(l.blocks)
	}
	docs := 0
	for _, s := range rm.scope {
		if rm.scopeNames[s] == "identity:u07" {
			docs++
		}
	}
	before, total := holding()
	runs := len(rm.ids) - ix.Unclustered("r") // as they arrived in scope order
	if out := ix.Unclustered("r"); out < 11000 {
		t.Fatalf("%d documents out of scope order before Cluster, want nearly all of 12,000", out)
	}
	if n := ix.Cluster(0.5); n != 1 {
		t.Fatalf("Cluster renumbered %d realms, want 1", n)
	}
	after, _ := holding()
	t.Logf("identity u07: %d documents, in %d of %d blocks before, %d after", docs, before, total, after)
	fill := (docs + blockSize - 1) / blockSize
	if after > fill+1 || before < total*3/4 {
		t.Fatalf("identity u07 (%d documents) in %d of %d blocks before Cluster and %d after, want nearly all and at most %d",
			docs, before, total, after, fill+1)
	}
	if !slices.IsSorted(rm.scope[runs:]) || ix.Unclustered("r") != 0 {
		t.Fatal("documents are not in scope order after Cluster")
	}
	if out := snapshotRoundTrip(t, ix).Unclustered("r"); out != 0 {
		t.Fatalf("%d documents out of scope order after a snapshot of a clustered realm", out)
	}
	// Later documents of any scope come after, out of order, until the
	// next Cluster; fewer than clusterMin of them leave it alone.
	for i := range 500 {
		d := Doc{ID: fmt.Sprintf("late%03d", i), Realm: "r", Scope: fmt.Sprintf("identity:u%02d", i%20), Fields: [][]string{nil, {"common"}, nil, nil}}
		if err := ix.Put(d); err != nil {
			t.Fatal(err)
		}
	}
	if out := ix.Unclustered("r"); out < 450 {
		t.Fatalf("%d documents out of scope order after 500 late ones", out)
	}
	if n := ix.Cluster(0); n != 0 {
		t.Fatalf("Cluster renumbered %d realms with fewer than clusterMin out of order", n)
	}
	if out := snapshotRoundTrip(t, ix).Unclustered("r"); out < 450 || out > 500 {
		t.Fatalf("%d documents out of scope order after a snapshot, want the 500 late ones but for a short run", out)
	}
	// Renumbering only the late ones leaves the first run as it was.
	withClusterMin(t, 100)
	first := slices.Clone(rm.ids[:12000])
	if n := ix.Cluster(0); n != 1 || !slices.Equal(rm.ids[:12000], first) {
		t.Fatalf("Cluster renumbered %d realms, or moved documents of its earlier run", n)
	}
	if out := snapshotRoundTrip(t, ix).Unclustered("r"); out != 0 {
		t.Fatalf("%d documents out of scope order after a snapshot of two runs", out)
	}
}

// TestClusterGivesWayToAWrite: a write that lands between building the new
// numbering and installing it wins; the realm is renumbered by a later
// call, and nothing is lost.
func TestClusterGivesWayToAWrite(t *testing.T) {
	withClusterMin(t, 100)
	ix := scopedCorpus(t, 3000)
	late := Doc{ID: "late", Realm: "r", Scope: "identity:u03", Fields: [][]string{nil, {"common", "latecomer"}, nil, nil}}
	clusterBuilt = func(string) {
		if err := ix.Put(late); err != nil {
			t.Error(err)
		}
	}
	n := ix.Cluster(0)
	clusterBuilt = nil
	if n != 0 || ix.Unclustered("r") < 2900 {
		t.Fatalf("Cluster renumbered %d realms over a write (%d documents out of order)", n, ix.Unclustered("r"))
	}
	if n := ix.Cluster(0); n != 1 {
		t.Fatalf("a later Cluster renumbered %d realms, want 1", n)
	}
	hits, err := ix.Search(Query{Realm: "r", Terms: []string{"latecomer"}, Scopes: []string{"identity:u03"}, Limit: 5})
	if err != nil || len(hits) != 1 || hits[0].ID != "late" || ix.Len() != 3001 {
		t.Fatalf("Search = %v, %v, Len %d; want the late document among 3,001", hits, err, ix.Len())
	}
}

// TestPermuteTailSortsByScope: a list whose tail is renumbered in scope
// order holds the same postings, in docno order, its blocks bounded
// afresh; the postings before the tail stay as they were.
func TestPermuteTailSortsByScope(t *testing.T) {
	if testing.Short() {
		t.Skip("single-goroutine renumbering of random postings; the plain run checks it")
	}
	r := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{1, blockSize, 3*blockSize + 5, 900} {
		c := randomPostings(r, n)
		top := c.docs[len(c.docs)-1] + 1
		scope, dl := make([]uint32, top), make([]uint32, top)
		for d := range scope {
			scope[d], dl[d] = uint32(1+r.IntN(7)), uint32(1+r.IntN(60))
		}
		for i, d := range c.docs {
			if i%5 == 0 {
				scope[d] = deadScope
			}
		}
		l := c.build(dl, scope)
		for _, from := range []uint32{0, c.docs[len(c.docs)/3], c.docs[len(c.docs)/3] + 1, top - 1} {
			// The numbering Cluster gives the tail: scope order, then
			// docno, dropping the deleted.
			var order []uint32
			for d := from; d < top; d++ {
				if scope[d] != deadScope {
					order = append(order, d)
				}
			}
			slices.SortStableFunc(order, func(a, b uint32) int { return int(scope[a]) - int(scope[b]) })
			moves := make([]move, top-from)
			for i := range moves {
				moves[i] = move{noDoc, scope[from+uint32(i)], 0}
			}
			ndocs := int(from) + len(order)
			nscope, ndl := slices.Clone(scope[:from]), slices.Clone(dl[:from])
			for i, d := range order {
				moves[d-from] = move{from + uint32(i), scope[d], dl[d]}
				nscope, ndl = append(nscope, scope[d]), append(ndl, dl[d])
			}
			var want plistCase
			dropped := 0
			for i, d := range c.docs {
				switch {
				case d < from:
					want.docs, want.fs = append(want.docs, d), append(want.fs, c.fs[i])
				case moves[d-from].no == noDoc:
					dropped++
				default:
					want.docs, want.fs = append(want.docs, moves[d-from].no), append(want.fs, c.fs[i])
				}
			}
			idx := make([]int, len(want.docs))
			for i := range idx {
				idx[i] = i
			}
			slices.SortFunc(idx, func(a, b int) int { return int(want.docs[a]) - int(want.docs[b]) })
			var sorted plistCase
			for _, i := range idx {
				sorted.docs, sorted.fs = append(sorted.docs, want.docs[i]), append(sorted.fs, want.fs[i])
			}
			wantList := sorted.build(ndl, nscope)

			got := *l
			got.data, got.blocks, got.peaks = slices.Clone(l.data), slices.Clone(l.blocks), slices.Clone(l.peaks)
			var ps permuteScratch
			lt := got.permuteTail(from, moves, scope, dl, &ps)
			if hasTail := c.docs[len(c.docs)-1] >= from; (lt.at >= 0) != hasTail {
				t.Fatalf("%d postings, tail from %d: part from block %d", n, from, lt.at)
			}
			if lt.at >= 0 {
				got.splice(&lt)
			}
			var gd, wd []string
			for d, f := range got.all() {
				gd = append(gd, fmt.Sprint(d, ":", f))
			}
			for d, f := range wantList.all() {
				wd = append(wd, fmt.Sprint(d, ":", f))
			}
			if !slices.Equal(gd, wd) || int(lt.dropped) != dropped || got.n != int32(len(sorted.docs)) {
				t.Fatalf("%d postings, tail from %d: permuted (%d dropped)\n %s\nwant (%d dropped)\n %s",
					n, from, lt.dropped, strings.Join(gd, " "), dropped, strings.Join(wd, " "))
			}
			if !samePeaks(got.peaks, wantList.peaks) {
				t.Fatalf("%d postings, tail from %d: peaks %v, want %v", n, from, got.peaks, wantList.peaks)
			}
			if !slices.Equal(got.blocks, wantList.blocks) {
				t.Fatalf("%d postings, tail from %d: blocks\n %+v\nwant\n %+v", n, from, got.blocks, wantList.blocks)
			}
			if err := got.check(ndocs); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// samePeaks reports whether a and b hold the same (frequency, length)
// pairs, in any order.
func samePeaks(a, b []peak) bool {
	order := func(x, y peak) int {
		if x.f != y.f {
			return cmp.Compare(x.f, y.f)
		}
		return cmp.Compare(x.dl, y.dl)
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, order)
	slices.SortFunc(b, order)
	return slices.Equal(a, b)
}

// TestClusterDropsDeletedPeaks: the deleted documents Cluster leaves out
// take their (frequency, length) pairs out of the list's peaks, so the
// list holds no peak without a posting and its snapshot decodes (a list
// with more peaks than postings is refused as corrupt).
func TestClusterDropsDeletedPeaks(t *testing.T) {
	ix, _ := New(Options{Weights: []float64{1}})
	put := func(id, scope string, terms ...string) {
		if err := ix.Put(Doc{ID: id, Realm: "r", Scope: scope, Fields: [][]string{terms}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 9000 {
		put(fmt.Sprint("f", i), fmt.Sprint("s", i%3), "filler")
	}
	// Three pairs none of which beats another: three peaks.
	put("p1", "s1", "rare")
	put("p2", "s1", "rare", "rare", "x", "x", "x")
	put("p3", "s1", "rare", "rare", "rare", "x", "x", "x", "x", "x", "x", "x")
	ix.Delete("r", "p2")
	ix.Delete("r", "p3")
	if n := ix.Cluster(0); n != 1 {
		t.Fatalf("Cluster renumbered %d realms, want 1", n)
	}
	rm := ix.realms["r"]
	l := &rm.lists[rm.termIDs["rare"]]
	if want := []peak{{1, 1}}; !samePeaks(l.peaks, want) {
		t.Fatalf("peaks of rare %v, want %v", l.peaks, want)
	}
	back := snapshotRoundTrip(t, ix)
	hits, err := back.Search(Query{Realm: "r", Terms: []string{"rare"}, Limit: 5})
	if err != nil || len(hits) != 1 || hits[0].ID != "p1" {
		t.Fatalf("after a snapshot, Search = %v, %v; want p1", hits, err)
	}
}

// TestDecodedRunsEndAtAShortRun: decoding counts as renumbered only the
// runs in scope order the realm starts with; a long run further on, such
// as one identity's session among documents in arrival order, does not
// make the documents before it count as renumbered.
func TestDecodedRunsEndAtAShortRun(t *testing.T) {
	ix, _ := New(Options{Weights: ftsWeights})
	r := rand.New(rand.NewPCG(8, 8))
	for i := range 20200 {
		scope := fmt.Sprint("s", r.IntN(21))
		if i >= 20000 {
			scope = "s5" // one session of one scope
		}
		if err := ix.Put(Doc{ID: fmt.Sprint("d", i), Realm: "r", Scope: scope, Fields: [][]string{nil, {"w"}, nil, nil}}); err != nil {
			t.Fatal(err)
		}
	}
	back := snapshotRoundTrip(t, ix)
	if out := back.Unclustered("r"); out < 20000 {
		t.Fatalf("%d documents out of scope order after decoding, want all but a short first run", out)
	}
	if n := back.Cluster(0); n != 1 || back.Unclustered("r") != 0 {
		t.Fatalf("Cluster renumbered %d realms, %d left out of order", n, back.Unclustered("r"))
	}
}
