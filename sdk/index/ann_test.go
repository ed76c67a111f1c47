package index

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// annDoc is a document of the approximate-index tests as the test sees
// it, to judge the index's answers.
type annDoc struct {
	scope   string
	tag     string
	expires int64
	v       []float32
}

// annCorpus is clustered random data: vectors near one of 40 centres, as
// embeddings of texts on a few topics are.
type annCorpus struct {
	r       *rand.Rand
	dims    int
	centres [][]float32
	docs    map[string]*annDoc
}

func newANNCorpus(seed uint64, dims int) *annCorpus {
	c := &annCorpus{r: rand.New(rand.NewPCG(seed, 11)), dims: dims, docs: map[string]*annDoc{}}
	for range 40 {
		c.centres = append(c.centres, c.gauss(1))
	}
	return c
}

func (c *annCorpus) gauss(scale float64) []float32 {
	v := make([]float32, c.dims)
	for i := range v {
		v[i] = float32(c.r.NormFloat64() * scale)
	}
	return v
}

// near answers a vector near a random centre.
func (c *annCorpus) near() []float32 {
	v := c.gauss(0.35)
	ctr := c.centres[c.r.IntN(len(c.centres))]
	for i := range v {
		v[i] += ctr[i]
	}
	return v
}

// put adds document i, with its vector, to each of ixs.
func (c *annCorpus) put(t *testing.T, i int, ixs ...*Index) {
	t.Helper()
	id := fmt.Sprintf("d%05d", i)
	d := &annDoc{scope: fmt.Sprintf("identity:u%d", i%7), tag: fmt.Sprintf("t%d", i%5), v: c.near()}
	if i%10 == 0 {
		d.scope = "realm"
	}
	if i%13 == 0 {
		d.expires = 500
	}
	c.docs[id] = d
	for _, ix := range ixs {
		if err := ix.Put(Doc{ID: id, Realm: "r", Scope: d.scope, Tags: []string{d.tag}, ExpiresMs: d.expires, Fields: [][]string{{"w"}}}); err != nil {
			t.Fatal(err)
		}
		if ok, err := ix.PutVector("r", id, "m", d.v); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
}

// passes reports whether d passes q's filters.
func (d *annDoc) passes(id string, q Query) bool {
	return (len(q.Scopes) == 0 || slices.Contains(q.Scopes, d.scope)) &&
		(len(q.Tags) == 0 || q.Tags[0] == d.tag) &&
		!slices.Contains(q.ExcludeTags, d.tag) &&
		!slices.Contains(q.ExcludeIDs, id) &&
		(d.expires == 0 || d.expires > q.NowMs)
}

// exact answers the ids of the k documents passing q's filters nearest
// q.Vector by cosine, computed here in float64.
func (c *annCorpus) exact(q Query, k int) []string {
	type sc struct {
		id  string
		cos float64
	}
	var all []sc
	for id, d := range c.docs {
		if !d.passes(id, q) {
			continue
		}
		var ab, aa, bb float64
		for i := range d.v {
			ab += float64(d.v[i]) * float64(q.Vector[i])
			aa += float64(d.v[i]) * float64(d.v[i])
			bb += float64(q.Vector[i]) * float64(q.Vector[i])
		}
		all = append(all, sc{id, ab / math.Sqrt(aa*bb)})
	}
	slices.SortFunc(all, func(a, b sc) int {
		if a.cos > b.cos {
			return -1
		}
		return 1
	})
	var ids []string
	for _, s := range all[:min(k, len(all))] {
		ids = append(ids, s.id)
	}
	return ids
}

// query answers a vector-only query near a centre, with filters chosen by
// kind: none, one identity's scope and the realm's, a tag, a tag left out
// and some ids excluded.
func (c *annCorpus) query(kind int) Query {
	q := Query{Realm: "r", Vector: c.near(), Model: "m", Limit: 10, NowMs: 1000, SemanticWeight: 1}
	switch kind % 4 {
	case 1:
		q.Scopes = []string{fmt.Sprintf("identity:u%d", c.r.IntN(7)), "realm"}
	case 2:
		q.Tags = []string{fmt.Sprintf("t%d", c.r.IntN(5))}
	case 3:
		q.ExcludeTags = []string{"t0"}
		for range 20 {
			q.ExcludeIDs = append(q.ExcludeIDs, fmt.Sprintf("d%05d", c.r.IntN(len(c.docs))))
		}
	}
	return q
}

// annIndex answers a corpus of n documents of dims dimensions and an
// index holding them, with annThreshold at 1,000.
func annIndex(t *testing.T, seed uint64, dims, n int) (*annCorpus, *Index) {
	withThreshold(t, 1000)
	c := newANNCorpus(seed, dims)
	ix, _ := New(Options{Weights: []float64{1}})
	for i := range n {
		c.put(t, i, ix)
	}
	return c, ix
}

// withThreshold runs the test with annThreshold at n.
func withThreshold(t *testing.T, n int) {
	saved := annThreshold
	annThreshold = n
	t.Cleanup(func() { annThreshold = saved })
}

func graphOf(ix *Index) *hnsw {
	return ix.realms["r"].models["m"].graph
}

// approximate reports whether the graph answers q's semantic half.
func approximate(ix *Index, q Query) bool {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	rm := ix.realms[q.Realm]
	qv, _ := normalize(q.Vector)
	f, ok := newFilter(rm, &q)
	if !ok {
		return false
	}
	excluded := map[string]bool{}
	for _, id := range q.ExcludeIDs {
		excluded[id] = true
	}
	sc := ix.getScratch(len(rm.ids))
	defer ix.putScratch(sc)
	_, _, approx := semanticTop(rm, rm.models[q.Model], qv, &f, excluded, sc, max(q.Limit, FusionDepth))
	return approx
}

// recallAt10 answers the mean share of the exact top 10 among ix's hits
// over queries, failing on a hit the filters exclude or when the graph
// answers less than minShare of the queries (the others fall back to
// brute force).
func (c *annCorpus) recallAt10(t *testing.T, ix *Index, queries int, minShare float64) float64 {
	t.Helper()
	sum, approx := 0.0, 0
	for i := range queries {
		q := c.query(i)
		if approximate(ix, q) {
			approx++
		}
		hits, err := ix.Search(q)
		if err != nil {
			t.Fatal(err)
		}
		want := c.exact(q, 10)
		got := 0
		for _, h := range hits {
			d := c.docs[h.ID]
			if d == nil || !d.passes(h.ID, q) {
				t.Fatalf("query %d: hit %s is filtered out (%+v) or deleted", i, h.ID, d)
			}
			if slices.Contains(want, h.ID) {
				got++
			}
		}
		if len(want) > 0 {
			sum += float64(got) / float64(len(want))
		} else {
			sum++
		}
	}
	if float64(approx) < minShare*float64(queries) {
		t.Fatalf("the graph answered %d of %d queries", approx, queries)
	}
	return sum / float64(queries)
}

// TestANNRecall: above the threshold the graph answers, its recall@10
// against exact cosine is at least 0.98 on clustered data, with and
// without filters, also when rebuilt by Decode, and two indexes built
// alike answer alike.
func TestANNRecall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and searches 6,000 vectors on one goroutine; the plain run checks it")
	}
	withThreshold(t, 1000)
	c := newANNCorpus(1, 32)
	a, _ := New(Options{Weights: []float64{1}})
	b, _ := New(Options{Weights: []float64{1}})
	for i := range 6000 {
		c.put(t, i, a, b)
	}
	if graphOf(a) == nil {
		t.Fatal("no graph above the threshold")
	}
	// A quarter of the queries read one identity's scope and the realm's
	// (about 1,400 vectors): the graph gives up on most of those after
	// half their cosines, and they are scanned exactly.
	if r := c.recallAt10(t, a, 400, 0.7); r < 0.98 {
		t.Errorf("recall@10 = %.4f, want at least 0.98", r)
	} else {
		t.Logf("recall@10 = %.4f", r)
	}
	// The graph alone, asked for 10 with the least breadth, with and
	// without each kind of filter.
	sum := 0.0
	for i := range 200 {
		q := c.query(i)
		qv, _ := normalize(q.Vector)
		g, rm := graphOf(a), a.realms["r"]
		id := func(slot uint32) string { return rm.ids[g.set.owner[slot]] }
		live := func(slot uint32) bool { return c.docs[id(slot)].passes(id(slot), q) } // not expired
		found, ok := g.search(qv, 10, hnswEf, 0, live)
		want := c.exact(q, 10)
		got := 0
		for _, f := range found {
			if slices.Contains(want, id(f.slot)) {
				got++
			}
		}
		if !ok || len(found) != 10 {
			t.Fatalf("graph search: %v, %d found", ok, len(found))
		}
		sum += float64(got) / 10
	}
	if r := sum / 200; r < 0.98 {
		t.Errorf("graph recall@10 at breadth %d = %.4f, want at least 0.98", hnswEf, r)
	} else {
		t.Logf("graph recall@10 at breadth %d = %.4f", hnswEf, r)
	}
	// A snapshot does not hold the graph: decoding builds it again.
	back := snapshotRoundTrip(t, a)
	if graphOf(back) == nil {
		t.Fatal("no graph after decoding")
	}
	if r := c.recallAt10(t, back, 200, 0.7); r < 0.98 {
		t.Errorf("decoded: recall@10 = %.4f, want at least 0.98", r)
	}
	for i := range 50 {
		q := c.query(i)
		ha, _ := a.Search(q)
		hb, _ := b.Search(q)
		if !slices.Equal(ha, hb) {
			t.Fatalf("query %d: two indexes built alike answer %v and %v", i, ha, hb)
		}
	}
}

// TestANNFilterFallsBack: a filter few documents pass is answered exactly
// (the graph finds too few within its budget).
func TestANNFilterFallsBack(t *testing.T) {
	c, ix := annIndex(t, 2, 16, 3000)
	// Only documents 0, 70, 140, ... are in the realm scope and tagged t0
	// and live: 43 documents minus the expired.
	for i := range 30 {
		q := c.query(0)
		q.Scopes, q.Tags, q.Limit = []string{"realm"}, []string{"t0"}, 40+i%10
		if approximate(ix, q) {
			t.Fatalf("query %d: the graph answered a filter 40 documents pass", i)
		}
		hits, err := ix.Search(q)
		if err != nil {
			t.Fatal(err)
		}
		want := c.exact(q, q.Limit)
		got := make([]string, len(hits))
		for j, h := range hits {
			got[j] = h.ID
		}
		if !slices.Equal(got, want) {
			t.Fatalf("query %d: got %v, want %v", i, got, want)
		}
	}
}

// TestANNDeletesAndReputs: deleted documents and dropped or replaced
// vectors are never answered, a document put again keeps its vector in
// the graph, recall holds through the churn, and once dropped slots
// outnumber live ones the set and its graph are rebuilt without them.
func TestANNDeletesAndReputs(t *testing.T) {
	if testing.Short() {
		t.Skip("rebuilds 4,000 vectors on one goroutine; the plain run checks it")
	}
	c, ix := annIndex(t, 3, 24, 4000)
	for i := range 4000 {
		id := fmt.Sprintf("d%05d", i)
		d := c.docs[id]
		switch i % 6 {
		case 0: // deleted
			ix.Delete("r", id)
			delete(c.docs, id)
		case 1: // a new vector
			d.v = c.near()
			if ok, err := ix.PutVector("r", id, "m", d.v); !ok || err != nil {
				t.Fatal(ok, err)
			}
		case 2: // the text again: the vector stays
			if err := ix.Put(Doc{ID: id, Realm: "r", Scope: d.scope, Tags: []string{d.tag}, ExpiresMs: d.expires, Fields: [][]string{{"w"}}}); err != nil {
				t.Fatal(err)
			}
		case 3: // the vector dropped
			ix.DeleteVector("r", id)
			delete(c.docs, id)
		}
	}
	s := ix.realms["r"].models["m"]
	if s.graph == nil || len(s.owner) == s.n {
		t.Fatalf("want a graph with dropped slots, have %d slots for %d vectors", len(s.owner), s.n)
	}
	if r := c.recallAt10(t, ix, 300, 0.25); r < 0.98 {
		t.Errorf("after churn recall@10 = %.4f, want at least 0.98", r)
	}
	// Drop most of what is left: the set is rebuilt. At 1,100 vectors
	// the graph mostly gives way to brute force (its budget is half the
	// set's cosines), so only the answers' correctness is asked for.
	for i := range 4000 {
		if id := fmt.Sprintf("d%05d", i); i%6 == 4 && i%12 != 4 {
			ix.Delete("r", id)
			delete(c.docs, id)
		}
	}
	for id := range c.docs {
		if len(c.docs) <= 1100 {
			break
		}
		ix.DeleteVector("r", id)
		delete(c.docs, id)
	}
	s = ix.realms["r"].models["m"]
	if len(s.owner)-s.n > 1024 || s.n != len(c.docs) || s.graph == nil || len(s.graph.links) != len(s.owner) {
		t.Fatalf("after dropping most: %d slots, %d vectors, %d documents, graph %v", len(s.owner), s.n, len(c.docs), s.graph != nil)
	}
	if r := c.recallAt10(t, ix, 300, 0); r < 0.98 {
		t.Errorf("after the rebuild recall@10 = %.4f, want at least 0.98", r)
	}
}

// TestANNConcurrentSearchAndWrite searches through the graph beside puts,
// new vectors and deletes that grow it; under the race detector it proves
// the graph's locking (searches share the read lock and pooled marks).
func TestANNConcurrentSearchAndWrite(t *testing.T) {
	c, ix := annIndex(t, 4, 16, 1500)
	queries := make([]Query, 40)
	for i := range queries {
		queries[i] = c.query(i)
	}
	stop := searchWhile(ix, queries, 3)
	for i := 1500; i < 2500; i++ {
		c.put(t, i, ix)
		if id := fmt.Sprintf("d%05d", i-700); i%3 == 0 {
			ix.Delete("r", id)
			delete(c.docs, id)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if graphOf(ix) == nil {
		t.Fatal("no graph")
	}
	if r := c.recallAt10(t, ix, 100, 0); r < 0.98 {
		t.Errorf("recall@10 = %.4f after concurrent writes", r)
	}
}
