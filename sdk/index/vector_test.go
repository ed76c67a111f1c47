package index

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

// refVec is a document's vector in the reference, as the caller gave it.
type refVec struct {
	model string
	v     []float32
}

// refHybrid is the reference of hybrid ranking, written as plainly as it
// can be: every active document of the realm looked at, the candidates
// and their scores from the reference BM25, and the fusion done again by
// hand. Only the cosine primitive (normalize, dot) is shared, so scores
// compare bit for bit.
func refHybrid(r *reference, vecs map[string]refVec, q Query) ([]Hit, error) {
	dims := map[string]int{}
	for k, rv := range vecs {
		if d := r.docs[k]; d != nil && d.active && d.Realm == q.Realm {
			dims[rv.model] = len(rv.v)
		}
	}
	if len(dims) == 0 {
		return r.search(q), nil
	}
	if n, ok := dims[q.Model]; !ok || n != len(q.Vector) {
		return nil, ErrInvalid
	}
	wl, ws := q.LexicalWeight, q.SemanticWeight
	if wl == 0 && ws == 0 {
		wl, ws = 0.75, 0.25
	}
	wl, ws = wl/(wl+ws), ws/(wl+ws)
	depth := max(q.Limit, FusionDepth)
	all := q
	all.Limit = math.MaxInt32
	lexAll := r.search(all)
	lexScore := map[string]float64{}
	for _, h := range lexAll {
		lexScore[h.ID] = h.Score
	}
	qv, _ := normalize(q.Vector)
	type cand struct {
		d        *refDoc
		lex, sem float64
		hasVec   bool
		fused    float64
	}
	var vecCands []cand
	for k, d := range r.docs {
		rv, ok := vecs[k]
		if !d.active || d.Realm != q.Realm || !ok || rv.model != q.Model || !refPass(d, &q) {
			continue
		}
		unit, _ := normalize(rv.v)
		vecCands = append(vecCands, cand{d: d, sem: dot(qv, unit), hasVec: true})
	}
	order := func(a, b *refDoc, sa, sb float64) int {
		return cmp.Or(cmp.Compare(sb, sa), cmp.Compare(b.Seq, a.Seq), strings.Compare(a.ID, b.ID))
	}
	slices.SortFunc(vecCands, func(a, b cand) int { return order(a.d, b.d, a.sem, b.sem) })
	var union []cand
	seen := map[string]bool{}
	for _, h := range lexAll[:min(len(lexAll), depth)] {
		seen[h.ID] = true
		union = append(union, cand{d: r.docs[key(q.Realm, h.ID)]})
	}
	for _, c := range vecCands[:min(len(vecCands), depth)] {
		if !seen[c.d.ID] {
			union = append(union, cand{d: c.d})
		}
	}
	// The scores are normalised over each half's top FusionDepth alone,
	// whatever the limit.
	pool := map[string]bool{}
	for _, h := range lexAll[:min(len(lexAll), FusionDepth)] {
		pool[h.ID] = true
	}
	for _, c := range vecCands[:min(len(vecCands), FusionDepth)] {
		pool[c.d.ID] = true
	}
	for i := range union {
		c := &union[i]
		c.lex = lexScore[c.d.ID]
		if rv, ok := vecs[key(q.Realm, c.d.ID)]; ok && rv.model == q.Model {
			unit, _ := normalize(rv.v)
			c.sem, c.hasVec = dot(qv, unit), true
		}
	}
	var lexs, sems []float64
	for _, c := range union {
		if !pool[c.d.ID] {
			continue
		}
		lexs = append(lexs, c.lex)
		if c.hasVec {
			sems = append(sems, c.sem)
		}
	}
	for i := range union {
		c := &union[i]
		var l, s float64
		if lo, hi := slices.Min(lexs), slices.Max(lexs); hi > lo {
			l = (c.lex - lo) / (hi - lo)
		} else if c.lex > 0 && c.lex >= hi {
			l = 1
		}
		if c.hasVec {
			if lo, hi := slices.Min(sems), slices.Max(sems); hi > lo {
				s = (c.sem - lo) / (hi - lo)
			} else if c.sem >= hi {
				s = 1
			}
		}
		c.fused = wl*l + ws*s
	}
	slices.SortFunc(union, func(a, b cand) int { return order(a.d, b.d, a.fused, b.fused) })
	out := []Hit{}
	for _, c := range union[:min(len(union), q.Limit)] {
		out = append(out, Hit{ID: c.d.ID, Score: c.fused, Seq: c.d.Seq})
	}
	return out, nil
}

// vecCorpus drives a corpus and gives some of its documents vectors of
// few small integer components, so cosines tie often.
type vecCorpus struct {
	*corpus
	vecs map[string]refVec
}

func (c *vecCorpus) vector(dims int) []float32 {
	v := make([]float32, dims)
	for {
		for i := range v {
			v[i] = float32(c.rng.IntN(5) - 2)
		}
		if slices.ContainsFunc(v, func(x float32) bool { return x != 0 }) {
			return v
		}
	}
}

// step is a corpus step that keeps the reference's vectors in line, or a
// vector put (mostly model m1 of 4 dimensions, some m2 of 6).
func (c *vecCorpus) step() {
	if c.rng.IntN(3) > 0 || len(c.ids) == 0 {
		before := map[string]bool{}
		for k, d := range c.ref.docs {
			before[k] = d.active
		}
		c.corpus.step()
		for k := range c.vecs {
			if d := c.ref.docs[k]; d == nil || !d.active {
				delete(c.vecs, k) // deleted or superseded: the index dropped it
			}
		}
		return
	}
	k := c.ids[c.rng.IntN(len(c.ids))]
	realm, id, _ := strings.Cut(k, "\x00")
	model, dims := "m1", 4
	if c.rng.IntN(8) == 0 {
		model, dims = "m2", 6
	}
	v := c.vector(dims)
	found, err := c.ix.PutVector(realm, id, model, v)
	if err != nil {
		c.t.Fatal(err)
	}
	d := c.ref.docs[k]
	if want := d != nil && d.active; found != want {
		c.t.Fatalf("PutVector(%s) found %v, want %v", k, found, want)
	}
	if found {
		c.vecs[k] = refVec{model, v}
	}
}

func (c *vecCorpus) query() Query {
	q := c.corpus.query()
	if c.rng.IntN(3) == 0 {
		q.Terms = nil // the vector alone
	}
	switch x := c.rng.IntN(20); {
	case x < 15:
		q.Model, q.Vector = "m1", c.vector(4)
	case x < 17:
		q.Model, q.Vector = "m2", c.vector(6)
	case x < 18:
		q.Model, q.Vector = "m1", c.vector(3) // wrong dimensions
	default:
		q.Model, q.Vector = "other", c.vector(4) // wrong model
	}
	if c.rng.IntN(4) == 0 {
		q.Limit = FusionDepth + c.rng.IntN(3*FusionDepth) // past the pool
	}
	switch c.rng.IntN(4) {
	case 0:
		q.LexicalWeight, q.SemanticWeight = 1, 0
	case 1:
		q.LexicalWeight, q.SemanticWeight = 0, 2
	case 2:
		q.LexicalWeight, q.SemanticWeight = c.rng.Float64(), c.rng.Float64()
	}
	return q
}

func (c *vecCorpus) check(ix *Index, q Query) {
	c.t.Helper()
	got, err := ix.Search(q)
	want, werr := refHybrid(c.ref, c.vecs, q)
	if (err != nil) != (werr != nil) || err != nil && !errors.Is(err, ErrInvalid) {
		c.t.Fatalf("query %+v: err %v, reference %v", q, err, werr)
	}
	if !slices.Equal(got, want) {
		c.t.Fatalf("query %+v:\n got %v\nwant %v", q, got, want)
	}
}

func TestHybridMatchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("single-goroutine exactness over random corpora; the plain run checks it")
	}
	defer func(w int) { exhaustiveWork = w }(exhaustiveWork)
	for i, tc := range []struct {
		name  string
		docs  int
		vocab int
		work  int
		ctx   float64
	}{
		{"small", 400, 30, math.MaxInt, 0},
		{"pruned lexical half", 1500, 80, 0, 0},
		{"thread context refreshes keep vectors", 1200, 40, 4096, 0.5},
		{"churn renumbers", 4000, 30, 4096, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			exhaustiveWork = tc.work
			c := &vecCorpus{corpus: newThreadCorpus(t, uint64(100+i), tc.vocab, StatsIndex, tc.ctx), vecs: map[string]refVec{}}
			for n := 0; n < tc.docs; n++ {
				c.step()
				if n%53 == 0 {
					c.check(c.ix, c.query())
				}
			}
			if tc.name == "churn renumbers" {
				for _, k := range c.ids[:len(c.ids)*4/5] {
					realm, id, _ := strings.Cut(k, "\x00")
					c.ix.Delete(realm, id)
					delete(c.ref.docs, k)
					delete(c.vecs, k)
				}
			}
			for range 200 {
				c.check(c.ix, c.query())
			}
			// A snapshot keeps every vector.
			back := snapshotRoundTrip(t, c.ix)
			for _, realm := range realms {
				if got, want := back.Vectors(realm), c.ix.Vectors(realm); got != want {
					t.Fatalf("realm %s: %d vectors after the snapshot, %d before", realm, got, want)
				}
			}
			for range 100 {
				c.check(back, c.query())
			}
		})
	}
}

// TestHybridSearchesAtOnce: hybrid searches running at once answer what
// they answer one at a time (each takes scratch of its own). Small
// enough for the race detector's short run, which leaves out
// TestHybridMatchesReference.
func TestHybridSearchesAtOnce(t *testing.T) {
	c := &vecCorpus{corpus: newThreadCorpus(t, 7, 40, StatsIndex, 0.5), vecs: map[string]refVec{}}
	for range 300 {
		c.step()
	}
	queries := make([]Query, 40)
	want := make([][]Hit, len(queries))
	for i := range queries {
		queries[i] = c.query()
		want[i], _ = c.ix.Search(queries[i])
	}
	got := make([][]Hit, len(queries))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(queries); i += 4 {
				got[i], _ = c.ix.Search(queries[i])
			}
		})
	}
	wg.Wait()
	answered := 0
	for i := range queries {
		if !slices.Equal(got[i], want[i]) {
			t.Fatalf("query %+v at once:\n got %v\nwant %v", queries[i], got[i], want[i])
		}
		if len(want[i]) > 0 {
			answered++
		}
	}
	if answered < len(queries)/2 {
		t.Fatalf("only %d of %d queries found anything", answered, len(queries))
	}
}

// TestHybridScoresIgnoreTheLimit: a hit's fused score is the same
// whatever the limit: a client asking for 10 hits and one asking for 100
// see the same scores for the hits they share.
func TestHybridScoresIgnoreTheLimit(t *testing.T) {
	c := &vecCorpus{corpus: newThreadCorpus(t, 11, 30, StatsIndex, 0), vecs: map[string]refVec{}}
	for range 1500 {
		c.step()
	}
	shared := 0
	for range 300 {
		q := c.query()
		q.Limit = 5 + c.rng.IntN(FusionDepth-5)
		shallow, err := c.ix.Search(q)
		if err != nil || len(shallow) < q.Limit {
			continue // a refused query, or one with few candidates
		}
		q.Limit = 5 * FusionDepth
		deep, err := c.ix.Search(q)
		if err != nil {
			t.Fatal(err)
		}
		scores := map[string]float64{}
		for _, h := range deep {
			scores[h.ID] = h.Score
		}
		for _, h := range shallow {
			s, ok := scores[h.ID]
			if !ok {
				continue
			}
			if s != h.Score {
				t.Fatalf("query %+v: %s scores %v at limit %d and %v at limit %d", q, h.ID, h.Score, len(shallow), s, q.Limit)
			}
			shared++
		}
	}
	if shared < 1000 {
		t.Fatalf("only %d hits were in both answers", shared)
	}
}

// TestHybridRanksByMeaning: a query sharing no word with any record is
// answered by its vector, and a record without a vector is ranked on the
// lexical half only.
func TestHybridRanksByMeaning(t *testing.T) {
	ix, err := New(Options{Weights: []float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	put := func(id string, words ...string) {
		if err := ix.Put(Doc{ID: id, Realm: "r", Scope: "realm", Fields: [][]string{words}}); err != nil {
			t.Fatal(err)
		}
	}
	put("bed", "i", "read", "before", "bed")
	put("car", "the", "car", "is", "blue")
	put("tea", "evening", "tea")
	for id, v := range map[string][]float32{"bed": {1, 0.1, 0}, "car": {0, 0, 1}} {
		if ok, err := ix.PutVector("r", id, "m", v); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	evening := []float32{0.9, 0.2, 0}
	hits, err := ix.Search(Query{Realm: "r", Vector: evening, Model: "m", Limit: 3})
	if err != nil || len(hits) != 2 || hits[0].ID != "bed" || hits[1].ID != "car" {
		t.Fatalf("vector only = %v, %v; want bed then car (tea has no vector)", hits, err)
	}
	hits, err = ix.Search(Query{Realm: "r", Terms: []string{"evening"}, Vector: evening, Model: "m", Limit: 3})
	if err != nil || len(hits) != 3 || hits[0].ID != "tea" || hits[1].ID != "bed" {
		t.Fatalf("hybrid = %v, %v; want tea (lexical 0.75) then bed (semantic 0.25)", hits, err)
	}
	hits, err = ix.Search(Query{Realm: "r", Terms: []string{"evening"}, Vector: evening, Model: "m", Limit: 3, SemanticWeight: 1})
	if err != nil || len(hits) != 3 || hits[0].ID != "bed" || hits[0].Score != 1 || hits[1].Score != 0 || hits[2].Score != 0 {
		t.Fatalf("semantic only = %v, %v; want bed at 1, the least cosine and no vector both at 0", hits, err)
	}
	for _, q := range []Query{
		{Realm: "r", Vector: []float32{1, 0}, Model: "m", Limit: 1},
		{Realm: "r", Vector: evening, Model: "other", Limit: 1},
		{Realm: "r", Vector: []float32{0, 0, 0}, Model: "m", Limit: 1},
		{Realm: "r", Vector: evening, Limit: 1},
		{Realm: "r", Vector: evening, Model: "m", Limit: 1, LexicalWeight: -1},
	} {
		if _, err := ix.Search(q); !errors.Is(err, ErrInvalid) {
			t.Errorf("query %+v: err %v, want ErrInvalid", q, err)
		}
	}
	if ok, err := ix.PutVector("r", "tea", "m", []float32{1, 2}); ok || !errors.Is(err, ErrInvalid) {
		t.Errorf("a vector of other dimensions: %v, %v; want ErrInvalid", ok, err)
	}
	if ok, err := ix.PutVector("r", "gone", "m", evening); ok || err != nil {
		t.Errorf("a vector of an unknown id: %v, %v; want skipped", ok, err)
	}
	// Forgetting drops the vector; putting the text again keeps it.
	put("bed", "i", "read", "before", "bed")
	if !ix.HasVector("r", "bed", "m") {
		t.Error("putting a document again dropped its vector")
	}
	ix.Delete("r", "car")
	put("car", "the", "car", "is", "blue")
	if ix.HasVector("r", "car", "m") || ix.Vectors("r") != 1 {
		t.Errorf("a deleted document's vector came back (%d vectors)", ix.Vectors("r"))
	}
}

func TestMissingVectorsPages(t *testing.T) {
	ix, err := New(Options{Weights: []float64{1}})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 40 {
		id := string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		exp := int64(0)
		if i%7 == 0 {
			exp = 50 // expired at 100: not live
		}
		if err := ix.Put(Doc{ID: id, Realm: "r", Scope: "realm", Fields: [][]string{{"w"}}, ExpiresMs: exp}); err != nil {
			t.Fatal(err)
		}
		switch {
		case i%4 == 0:
			ix.PutVector("r", id, "m", []float32{1})
		case i%4 == 1:
			ix.PutVector("r", id, "old", []float32{1, 1}) // another model's: missing
			fallthrough
		default:
			if exp == 0 {
				want = append(want, id)
			}
		}
	}
	slices.Sort(want)
	var got []string
	for after := ""; ; {
		page := ix.MissingVectors("r", "m", after, 100, 3)
		if len(page) == 0 {
			break
		}
		got = append(got, page...)
		after = page[len(page)-1]
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages = %v, want %v", got, want)
	}
}

// missingBySort is MissingVectors as it was: every missing id after
// after, sorted, then cut to limit.
func missingBySort(ix *Index, realm, model, after string, nowMs int64, limit int) []string {
	rm := ix.realms[realm]
	if rm == nil || limit <= 0 {
		return []string{}
	}
	var ids []string
	for no, id := range rm.ids {
		if rm.scope[no] == deadScope || id <= after {
			continue
		}
		if e := rm.expires[no]; e != 0 && e <= nowMs {
			continue
		}
		if dv := rm.vec[no]; dv == nil || dv.model != model {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids[:min(len(ids), limit)]
}

// TestMissingVectorsMatchesASort: the bounded heap answers exactly what
// sorting every missing id did, on random realms (deleted, expired and
// re-put documents, vectors of the model and of another), for any cursor
// and limit.
func TestMissingVectorsMatchesASort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 9))
	for round := range 30 {
		ix, err := New(Options{Weights: []float64{1}})
		if err != nil {
			t.Fatal(err)
		}
		n := 1 + rng.IntN(400)
		var ids []string
		for i := range n {
			id := fmt.Sprintf("%c%d", 'a'+rng.IntN(5), rng.IntN(3*n))
			exp := int64(0)
			if rng.IntN(6) == 0 {
				exp = int64(rng.IntN(200))
			}
			if err := ix.Put(Doc{ID: id, Realm: "r", Scope: "realm", Fields: [][]string{{"w"}}, ExpiresMs: exp, Seq: uint64(i + 1)}); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
			switch rng.IntN(4) {
			case 0:
				ix.PutVector("r", id, "m", []float32{1})
			case 1:
				ix.PutVector("r", id, "old", []float32{1, 1})
			}
			if rng.IntN(8) == 0 {
				ix.Delete("r", ids[rng.IntN(len(ids))])
			}
		}
		for range 40 {
			after := ""
			switch rng.IntN(3) {
			case 1:
				after = ids[rng.IntN(len(ids))]
			case 2:
				after = fmt.Sprintf("%c%d", 'a'+rng.IntN(5), rng.IntN(3*n))
			}
			limit := rng.IntN(n + 5)
			got := ix.MissingVectors("r", "m", after, 100, limit)
			want := missingBySort(ix, "r", "m", after, 100, limit)
			if !slices.Equal(got, want) {
				t.Fatalf("round %d, after %q, limit %d: %v, want %v", round, after, limit, got, want)
			}
		}
	}
}

func TestDotAndNormalize(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := 1 + rng.IntN(40)
		a, b := make([]float32, n), make([]float32, n)
		for i := range a {
			a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
		}
		ua, _ := normalize(a)
		ub, _ := normalize(b)
		var prod, na, nb float64
		for i := range a {
			prod += float64(a[i]) * float64(b[i])
			na += float64(a[i]) * float64(a[i])
			nb += float64(b[i]) * float64(b[i])
		}
		want := prod / math.Sqrt(na*nb)
		if got := dot(ua, ub); math.Abs(got-want) > 1e-5 {
			t.Fatalf("cosine %v, want %v", got, want)
		}
	}
	for _, v := range [][]float32{nil, {0, 0}, {float32(math.Inf(1)), 1}, {float32(math.NaN())}} {
		if _, ok := normalize(v); ok {
			t.Errorf("normalize(%v) ok", v)
		}
	}
}

// TestDotBitForBit: dot (assembly where there is one) answers dotGo's
// bits for every length, tail and magnitude, so the scores of exact
// recall do not depend on the processor's path.
func TestDotBitForBit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	scales := []float64{1, 1e-3, 1e-20, 1e18}
	for n := range 300 {
		for _, scale := range scales {
			a, b := make([]float32, n), make([]float32, n+rng.IntN(3))
			for i := range a {
				a[i] = float32(rng.NormFloat64() * scale)
			}
			for i := range b {
				b[i] = float32(rng.NormFloat64() * scale)
			}
			if got, want := dot(a, b), dotGo(a, b); math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("%d components at scale %g: dot %v, dotGo %v", n, scale, got, want)
			}
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("dot of a shorter second vector did not panic")
		}
	}()
	dot(make([]float32, 9), make([]float32, 8))
}

// TestVectorBackInItsScope: a document whose scope changes and changes
// back keeps its vector, which its first scope's list then holds twice;
// only one entry counts, so the vector half holds it once and the answer
// is the reference's.
func TestVectorBackInItsScope(t *testing.T) {
	ix, _ := New(Options{Weights: ftsWeights})
	ref := newReference(StatsIndex)
	vecs := map[string]refVec{}
	r := rand.New(rand.NewPCG(3, 3))
	put := func(id, scope string) {
		d := Doc{ID: id, Realm: "r", Scope: scope, Seq: uint64(len(ref.docs) + 1), Fields: [][]string{nil, {"note", id}, nil, nil}}
		if old := ref.docs[key("r", id)]; old != nil {
			d.Seq = old.Seq
		}
		if err := ix.Put(d); err != nil {
			t.Fatal(err)
		}
		ref.docs[key("r", id)] = &refDoc{Doc: d, active: true}
	}
	for i := range 80 {
		id := fmt.Sprintf("d%02d", i)
		put(id, "a")
		v := []float32{r.Float32() - 0.5, r.Float32() - 0.5, r.Float32() - 0.5, r.Float32() - 0.5}
		if _, err := ix.PutVector("r", id, "m", v); err != nil {
			t.Fatal(err)
		}
		vecs[key("r", id)] = refVec{"m", v}
	}
	put("d07", "b") // the vector goes along
	put("d07", "a") // and back: listed in a's list a second time
	q := Query{Realm: "r", Scopes: []string{"a"}, Limit: 60, Model: "m", Vector: vecs[key("r", "d07")].v}
	got, err := ix.Search(q)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := refHybrid(ref, vecs, q)
	if !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
}
