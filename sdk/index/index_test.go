package index

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var ftsWeights = []float64{5, 4, 2, 1}

// refDoc is a document in the reference model, with the status a provider
// would keep; only active ones are in the index.
type refDoc struct {
	Doc
	active bool
}

// reference is a brute-force scorer: every document scored from its
// fields with FTS5's bm25 as written in fts5_aux.c, nothing precomputed.
type reference struct {
	docs  map[string]*refDoc // realm+"\x00"+id
	stats Stats
	// ctx is the context field's weight; zero means there is none.
	ctx float64
}

// fields answers d's fields as the index sees them: its own, then (with a
// context field) the own fields of the active documents of its realm at
// its thread's places within ContextSpan in its scope.
func (r *reference) fields(d *refDoc, at map[refPlace][]*refDoc) ([][]string, []float64) {
	if r.ctx == 0 {
		return d.Fields, ftsWeights
	}
	var ctx []string
	part := func(k refPlace) []*refDoc { // at's lists are in order of id
		return at[k][:min(len(at[k]), MaxPlaceDocs)]
	}
	self := refPlace{d.Realm, d.Scope, d.Thread, d.ThreadSeq}
	if d.Thread != "" && slices.Contains(part(self), d) {
		for _, s := range Neighbours(d.ThreadSeq) {
			for _, o := range part(refPlace{d.Realm, d.Scope, d.Thread, s}) {
				if o.ID != d.ID {
					for _, f := range o.Fields {
						ctx = append(ctx, f...)
					}
				}
			}
		}
	}
	return append(slices.Clip(d.Fields), ctx), append(slices.Clip(ftsWeights), r.ctx)
}

// length is the BM25 length of a document's fields: every own term, and
// at most 48 of the context's.
func (r *reference) length(fields [][]string) int {
	dl := 0
	for fi, f := range fields {
		if r.ctx > 0 && fi == len(fields)-1 {
			dl += min(len(f), 48)
		} else {
			dl += len(f)
		}
	}
	return dl
}

// refPlace is a place in a thread of a realm's scope.
type refPlace struct {
	realm, scope, thread string
	seq                  int64
}

// places maps every place to its active documents, in order of id.
func (r *reference) places() map[refPlace][]*refDoc {
	at := map[refPlace][]*refDoc{}
	for _, d := range r.docs {
		if d.active && d.Thread != "" {
			k := refPlace{d.Realm, d.Scope, d.Thread, d.ThreadSeq}
			at[k] = append(at[k], d)
		}
	}
	for _, docs := range at {
		slices.SortFunc(docs, func(a, b *refDoc) int { return strings.Compare(a.ID, b.ID) })
	}
	return at
}

func newReference(stats Stats) *reference {
	return &reference{docs: map[string]*refDoc{}, stats: stats}
}

func key(realm, id string) string { return realm + "\x00" + id }

func (r *reference) search(q Query) []Hit {
	var n, tokens int64
	df := make([]int64, len(q.Terms))
	at := r.places()
	// The fields of the documents counted, read again to score those of
	// the query's realm.
	type docFields struct {
		fields  [][]string
		weights []float64
	}
	counted := map[*refDoc]docFields{}
	for _, d := range r.docs {
		if !d.active || (r.stats == StatsRealm && d.Realm != q.Realm) {
			continue
		}
		n++
		fields, weights := r.fields(d, at)
		if d.Realm == q.Realm {
			counted[d] = docFields{fields, weights}
		}
		tokens += int64(r.length(fields))
		for i, t := range q.Terms {
			if slices.ContainsFunc(fields, func(f []string) bool { return slices.Contains(f, t) }) {
				df[i]++
			}
		}
	}
	type scored struct {
		d     *refDoc
		score float64
	}
	var all []scored
	for _, d := range r.docs {
		if !d.active || d.Realm != q.Realm || !refPass(d, &q) {
			continue
		}
		freq := make([]float64, len(q.Terms))
		fields, weights := counted[d].fields, counted[d].weights // every active document of the realm is counted
		dl := r.length(fields)
		for fi, f := range fields {
			for i, t := range q.Terms {
				n := 0
				for _, tok := range f {
					if tok == t {
						n++
					}
				}
				if r.ctx > 0 && fi == len(fields)-1 {
					// The context field saturates on its own: a term
					// counts at most twice in it.
					n = min(n, 2)
				}
				freq[i] += float64(n) * weights[fi]
			}
		}
		if !slices.ContainsFunc(freq, func(f float64) bool { return f > 0 }) {
			continue
		}
		avgdl := float64(tokens) / float64(n)
		score := 0.0
		for i := range q.Terms {
			idf := math.Log((float64(n-df[i]) + 0.5) / (float64(df[i]) + 0.5))
			if idf <= 0 {
				idf = 1e-6
			}
			score += float64(idf * (float64(freq[i]*(1.2+1)) / (freq[i] + float64(1.2*float64(1-0.75+float64(0.75*float64(dl))/avgdl)))))
		}
		all = append(all, scored{d, score})
	}
	slices.SortFunc(all, func(a, b scored) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.d.Seq, a.d.Seq), strings.Compare(a.d.ID, b.d.ID))
	})
	out := []Hit{}
	for i := 0; i < len(all) && i < q.Limit; i++ {
		out = append(out, Hit{ID: all[i].d.ID, Score: all[i].score, Seq: all[i].d.Seq})
	}
	return out
}

func refPass(d *refDoc, q *Query) bool {
	if len(q.Scopes) > 0 && !slices.Contains(q.Scopes, d.Scope) {
		return false
	}
	if d.ExpiresMs != 0 && d.ExpiresMs <= q.NowMs {
		return false
	}
	if q.SinceMs != 0 && d.WhenMs < q.SinceMs || q.UntilMs != 0 && d.WhenMs >= q.UntilMs {
		return false
	}
	if slices.Contains(q.ExcludeIDs, d.ID) {
		return false
	}
	has := func(t string) bool {
		return slices.ContainsFunc(d.Tags, func(x string) bool { return strings.EqualFold(x, t) })
	}
	return !slices.ContainsFunc(q.Tags, func(t string) bool { return !has(t) }) && !slices.ContainsFunc(q.ExcludeTags, has)
}

// corpus drives an index and the reference through the same changes.
type corpus struct {
	t     testing.TB
	ctx   float64 // context weight; documents carry threads when set
	rng   *rand.Rand
	ix    *Index
	ref   *reference
	vocab []string
	seq   uint64
	ids   []string // realm+"\x00"+id of every doc ever put
	// oneOff gives each document a word and a tag of its own, as request
	// ids and session tags do, so terms and tags die with their document.
	oneOff bool
}

var realms = []string{"r1", "r2", "r3"}
var scopes = []string{"identity:ann", "identity:bob", "realm", "mob:ops"}
var tagPool = []string{"Go", "go", "db", "ops", "Straße", "STRASSE", "urgent"}

func newCorpus(t testing.TB, seed uint64, vocabSize int, stats Stats) *corpus {
	return newThreadCorpus(t, seed, vocabSize, stats, 0)
}

// newThreadCorpus is a corpus whose index has a context field of weight
// ctx (a power of two keeps the float32 frequencies exact) and whose
// documents mostly sit in a few short threads, so neighbours come and go.
func newThreadCorpus(t testing.TB, seed uint64, vocabSize int, stats Stats, ctx float64) *corpus {
	ix, err := New(Options{Weights: ftsWeights, Stats: stats, ContextWeight: ctx})
	if err != nil {
		t.Fatal(err)
	}
	ref := newReference(stats)
	ref.ctx = ctx
	c := &corpus{t: t, ctx: ctx, rng: rand.New(rand.NewPCG(seed, seed^0x9e37)), ix: ix, ref: ref}
	for i := range vocabSize {
		c.vocab = append(c.vocab, fmt.Sprintf("w%d", i))
	}
	return c
}

// word draws from a skewed distribution: a few heavy terms, a long tail.
func (c *corpus) word() string {
	x := c.rng.Float64()
	return c.vocab[int(x*x*x*float64(len(c.vocab)))]
}

func (c *corpus) field(max int) []string {
	n := c.rng.IntN(max + 1)
	out := make([]string, n)
	for i := range out {
		out[i] = c.word()
	}
	return out
}

func (c *corpus) newDoc() Doc {
	c.seq++
	d := Doc{
		ID:     fmt.Sprintf("d%05d", c.rng.IntN(100000)),
		Realm:  realms[c.rng.IntN(len(realms))],
		Scope:  scopes[c.rng.IntN(len(scopes))],
		Fields: [][]string{c.field(2), c.field(6), c.field(8), c.field(40)},
		Seq:    c.seq,
	}
	// Some documents are exact copies in content, so scores tie.
	if c.rng.IntN(8) == 0 && len(c.ids) > 0 {
		if src := c.ref.docs[c.ids[c.rng.IntN(len(c.ids))]]; src != nil {
			d.Fields, d.Realm = src.Fields, src.Realm
		}
	}
	for range c.rng.IntN(3) {
		d.Tags = append(d.Tags, tagPool[c.rng.IntN(len(tagPool))])
	}
	if c.rng.IntN(6) == 0 {
		d.ExpiresMs = int64(1000 + c.rng.IntN(2000))
	}
	d.WhenMs = int64(c.rng.IntN(100))
	if c.oneOff {
		d.Fields = slices.Clone(d.Fields) // a copy's fields are its source's
		f := c.rng.IntN(len(d.Fields))
		d.Fields[f] = append(slices.Clip(d.Fields[f]), fmt.Sprintf("u%d", c.seq))
		d.Tags = append(d.Tags, fmt.Sprintf("s%d", c.seq))
	}
	// Mostly one document a place, as in a conversation, and a crowded
	// place now and then.
	// A thread mostly keeps to one scope, so neighbours join; now and
	// then a document of another scope shares its id and places, and must
	// join none of them.
	if c.ctx > 0 && c.rng.IntN(4) > 0 {
		n := c.rng.IntN(5)
		d.Thread, d.ThreadSeq = fmt.Sprintf("t%d", n), int64(c.rng.IntN(len(c.ids)/4+8))
		if c.rng.IntN(10) == 0 {
			d.Thread, d.ThreadSeq = "crowded", int64(c.rng.IntN(3))
		}
		if c.rng.IntN(5) > 0 {
			d.Scope = scopes[n%2]
		}
	}
	return d
}

func (c *corpus) put(d Doc) {
	if err := c.ix.Put(d); err != nil {
		c.t.Fatal(err)
	}
	c.ref.docs[key(d.Realm, d.ID)] = &refDoc{Doc: d, active: true}
	c.ids = append(c.ids, key(d.Realm, d.ID))
}

// step applies one random change: mostly adds, some deletes, replaces
// and supersedes (the old record leaves the index, a new one arrives).
func (c *corpus) step() {
	switch x := c.rng.IntN(20); {
	case x < 14 || len(c.ids) == 0:
		c.put(c.newDoc())
	case x < 16:
		k := c.ids[c.rng.IntN(len(c.ids))]
		realm, id, _ := strings.Cut(k, "\x00")
		d := c.ref.docs[k]
		got := c.ix.Delete(realm, id)
		if want := d != nil && d.active; got != want {
			c.t.Fatalf("Delete(%s) = %v, want %v", k, got, want)
		}
		delete(c.ref.docs, k)
	case x < 18:
		// Replace in place: same id, new content.
		k := c.ids[c.rng.IntN(len(c.ids))]
		if old := c.ref.docs[k]; old != nil && old.active {
			d := c.newDoc()
			d.ID, d.Realm = old.ID, old.Realm
			c.put(d)
		}
	default:
		k := c.ids[c.rng.IntN(len(c.ids))]
		if old := c.ref.docs[k]; old != nil && old.active {
			c.ix.Delete(old.Realm, old.ID)
			old.active = false // superseded: kept by the store, not recallable
			d := c.newDoc()
			d.Realm = old.Realm
			d.ID = old.ID + "s"
			c.put(d)
		}
	}
}

func (c *corpus) query() Query {
	q := Query{Realm: realms[c.rng.IntN(len(realms))], NowMs: int64(c.rng.IntN(3500)), Limit: 1 + c.rng.IntN(15)}
	seen := map[string]bool{}
	for range 1 + c.rng.IntN(7) {
		w := c.word()
		if c.rng.IntN(10) == 0 {
			w = "absent"
		}
		if !seen[w] {
			seen[w] = true
			q.Terms = append(q.Terms, w)
		}
	}
	if c.rng.IntN(2) == 0 {
		q.Scopes = []string{scopes[0], scopes[2]}
	}
	if c.rng.IntN(5) == 0 {
		q.Scopes = append(q.Scopes, "identity:nobody")
	}
	if c.rng.IntN(4) == 0 && len(c.ids) > 0 {
		for range 1 + c.rng.IntN(5) {
			_, id, _ := strings.Cut(c.ids[c.rng.IntN(len(c.ids))], "\x00")
			q.ExcludeIDs = append(q.ExcludeIDs, id)
		}
	}
	if c.rng.IntN(5) == 0 {
		q.Tags = []string{tagPool[c.rng.IntN(len(tagPool))]}
	}
	if c.oneOff && c.rng.IntN(3) == 0 {
		// A one-off word or tag, most likely of a document gone.
		n := 1 + c.rng.IntN(int(c.seq)+1)
		q.Terms = append(q.Terms, fmt.Sprintf("u%d", n))
		if c.rng.IntN(2) == 0 {
			q.Tags = append(q.Tags, fmt.Sprintf("s%d", n))
		} else {
			q.ExcludeTags = append(q.ExcludeTags, fmt.Sprintf("s%d", n))
		}
	}
	if c.rng.IntN(5) == 0 {
		q.ExcludeTags = []string{tagPool[c.rng.IntN(len(tagPool))]}
	}
	// A time window, now and then open at one end; a bound may fall on a
	// document's time exactly.
	if c.rng.IntN(4) == 0 {
		q.SinceMs = int64(c.rng.IntN(60))
		q.UntilMs = q.SinceMs + 1 + int64(c.rng.IntN(60))
		if c.rng.IntN(3) == 0 {
			q.SinceMs = 0
		} else if c.rng.IntN(3) == 0 {
			q.UntilMs = 0
		}
	}
	return q
}

func (c *corpus) check(q Query) {
	c.t.Helper()
	got, err := c.ix.Search(q)
	if err != nil {
		c.t.Fatal(err)
	}
	want := c.ref.search(q)
	if !slices.Equal(got, want) {
		c.t.Fatalf("query %+v:\n got %v\nwant %v", q, got, want)
	}
}

func TestSearchMatchesReference(t *testing.T) {
	if testing.Short() {
		t.Skip("single-goroutine exactness over random corpora; the plain run checks it")
	}
	defer func(w int) { exhaustiveWork = w }(exhaustiveWork)
	cases := []struct {
		name  string
		docs  int
		vocab int
		stats Stats
		work  int     // exhaustiveWork: 0 forces pruning, huge forbids it
		ctx   float64 // context weight
	}{
		{"small exhaustive", 300, 40, StatsIndex, math.MaxInt, 0},
		{"small pruned", 300, 40, StatsIndex, 0, 0},
		{"realm stats pruned", 600, 60, StatsRealm, 0, 0},
		{"heavy terms pruned", 3000, 200, StatsIndex, 0, 0},
		{"heavy terms default", 3000, 200, StatsIndex, 4096, 0},
		{"churn renumbers", 5000, 30, StatsIndex, 0, 0},
		{"thread context exhaustive", 400, 40, StatsIndex, math.MaxInt, 0.5},
		{"thread context pruned", 1500, 80, StatsRealm, 0, 0.25},
		{"thread context churn", 3000, 30, StatsIndex, 0, 0.5},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			exhaustiveWork = tc.work
			c := newThreadCorpus(t, uint64(i+1), tc.vocab, tc.stats, tc.ctx)
			for n := 0; n < tc.docs; n++ {
				c.step()
				if n%97 == 0 {
					c.check(c.query())
				}
			}
			if strings.HasSuffix(tc.name, "churn renumbers") || strings.HasSuffix(tc.name, "churn") {
				// Delete most documents so realms renumber.
				for _, k := range c.ids[:len(c.ids)*4/5] {
					realm, id, _ := strings.Cut(k, "\x00")
					c.ix.Delete(realm, id)
					delete(c.ref.docs, k)
				}
			}
			for range 300 {
				c.check(c.query())
			}
			if got, want := c.ix.Len(), countActive(c.ref); got != want {
				t.Fatalf("Len = %d, want %d", got, want)
			}
		})
	}
}

func countActive(r *reference) int {
	n := 0
	for _, d := range r.docs {
		if d.active {
			n++
		}
	}
	return n
}

func TestTiesBreakBySeqThenID(t *testing.T) {
	ix, _ := New(Options{Weights: ftsWeights})
	fields := [][]string{nil, {"coffee"}, nil, {"beans"}}
	for _, d := range []Doc{
		{ID: "b", Realm: "r", Scope: "realm", Fields: fields, Seq: 5},
		{ID: "a", Realm: "r", Scope: "realm", Fields: fields, Seq: 5},
		{ID: "c", Realm: "r", Scope: "realm", Fields: fields, Seq: 9},
		{ID: "d", Realm: "r", Scope: "realm", Fields: fields}, // next seq: 10
	} {
		if err := ix.Put(d); err != nil {
			t.Fatal(err)
		}
	}
	hits, err := ix.Search(Query{Realm: "r", Terms: []string{"coffee"}, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range hits {
		ids = append(ids, h.ID)
		if h.Score != hits[0].Score {
			t.Fatalf("scores differ on equal documents: %v", hits)
		}
	}
	if want := []string{"d", "c", "a", "b"}; !slices.Equal(ids, want) {
		t.Fatalf("order = %v, want %v", ids, want)
	}
}

func TestInvalid(t *testing.T) {
	for _, opts := range []Options{{}, {Weights: []float64{1, 0}}, {Weights: []float64{1}, B: 2}, {Weights: []float64{1}, Stats: 7}} {
		if _, err := New(opts); !errors.Is(err, ErrInvalid) {
			t.Errorf("New(%+v) = %v, want ErrInvalid", opts, err)
		}
	}
	ix, _ := New(Options{Weights: ftsWeights})
	for _, d := range []Doc{{Realm: "r", Fields: make([][]string, 4)}, {ID: "x", Realm: "r", Fields: make([][]string, 3)}} {
		if err := ix.Put(d); !errors.Is(err, ErrInvalid) {
			t.Errorf("Put(%+v) = %v, want ErrInvalid", d, err)
		}
	}
	if _, err := ix.Search(Query{Realm: "r", Terms: []string{"x"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("Search with limit 0 = %v, want ErrInvalid", err)
	}
}

// FuzzSearch drives a random history from the fuzzer's seed and checks
// every answer against the reference.
func FuzzSearch(f *testing.F) {
	for _, s := range []uint64{1, 2, 3, 42} {
		f.Add(s, uint16(200), uint8(12), false)
	}
	f.Fuzz(func(t *testing.T, seed uint64, docs uint16, vocab uint8, pruned bool) {
		defer func(w int) { exhaustiveWork = w }(exhaustiveWork)
		if pruned {
			exhaustiveWork = 0
		}
		c := newCorpus(t, seed, 2+int(vocab), StatsIndex)
		for range int(docs % 800) {
			c.step()
		}
		for range 20 {
			c.check(c.query())
		}
	})
}

func TestTextHelpers(t *testing.T) {
	long := strings.Repeat("é", 40) // 80 bytes: cut to 64 at a rune boundary
	if got := FieldTerms("Cat " + long + " cat"); len(got) != 3 || got[0] != "cat" || got[1] != strings.Repeat("é", 32) || got[2] != "cat" {
		t.Fatalf("FieldTerms = %q", got)
	}
	var q strings.Builder
	for i := range 100 {
		fmt.Fprintf(&q, "w%d w%d ", i, i)
	}
	got := QueryTerms(q.String())
	if len(got) != MaxQueryTerms || got[0] != "w0" || got[1] != "w1" {
		t.Fatalf("QueryTerms answers %d terms starting %q", len(got), got[:2])
	}
	// FieldHolds finds a field term, truncated as FieldTerms truncates it.
	for _, tc := range []struct {
		text  string
		terms map[string]bool
		want  bool
	}{
		{"Hiking in the Alps", map[string]bool{"hike": true}, true},
		{"Hiking in the Alps", map[string]bool{"alp": true, "x": true}, true},
		{"Hiking in the Alps", map[string]bool{"the": true, "swim": true}, false},
		{"", map[string]bool{"hike": true}, false},
		{"a " + long, map[string]bool{strings.Repeat("é", 32): true}, true},
		{"我喜欢咖啡", map[string]bool{"咖啡": true}, true},
	} {
		if got := FieldHolds(tc.text, tc.terms); got != tc.want {
			t.Errorf("FieldHolds(%q, %v) = %v, want %v", tc.text, tc.terms, got, tc.want)
		}
	}
	// A query's terms come from its first MaxQueryBytes: a word after
	// them is not read, one inside them is, and the cut never splits a
	// rune into a term.
	filler := strings.Repeat("memo ", MaxQueryBytes/5)
	if got := QueryTerms(filler + "zebra"); !slices.Equal(got, []string{"memo"}) {
		t.Fatalf("QueryTerms of a long query = %q, want the terms of its first %d bytes", got, MaxQueryBytes)
	}
	if got := QueryTerms(filler[:MaxQueryBytes-6] + "zebra"); !slices.Equal(got, []string{"memo", "zebra"}) {
		t.Fatalf("QueryTerms = %q, want the word inside the first %d bytes", got, MaxQueryBytes)
	}
	if got := QueryTerms(filler[:MaxQueryBytes-1] + "é"); !slices.Equal(got, []string{"memo"}) {
		t.Fatalf("QueryTerms = %q, want no piece of a rune cut at the limit", got)
	}
}

// TestConcurrentSearchAndWrite runs searches beside writes and deletes,
// and beside renumbering in scope order; under the race detector it
// proves the locking, every answer stays well formed, and the index ends
// as the reference.
func TestConcurrentSearchAndWrite(t *testing.T) {
	defer func(w int) { exhaustiveWork = w }(exhaustiveWork)
	exhaustiveWork = 0
	withClusterMin(t, 0)
	for _, tc := range []struct {
		name    string
		ctx     float64
		cluster int // renumber every this many writes; 0 never
	}{
		{"writes", 0, 0},
		{"writes and renumbering", 0.5, 50},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newThreadCorpus(t, 11, 50, StatsIndex, tc.ctx)
			for range 500 {
				c.step()
			}
			queries := make([]Query, 50)
			for i := range queries {
				queries[i] = c.query()
			}
			stop := searchWhile(c.ix, queries, 4)
			for n := range 1500 {
				c.step() // the corpus's own rng and reference: this goroutine only
				if tc.cluster > 0 && n%tc.cluster == 0 {
					c.ix.Cluster(0)
				}
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			for _, q := range queries {
				c.check(q)
			}
		})
	}
}

// searchWhile runs workers goroutines searching queries in turn until
// stop is called; stop answers the first error or answer over the limit.
func searchWhile(ix *Index, queries []Query, workers int) (stop func() error) {
	done := make(chan struct{})
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := w; ; i++ {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				q := queries[i%len(queries)]
				hits, err := ix.Search(q)
				if err == nil && len(hits) > q.Limit {
					err = fmt.Errorf("%d hits for limit %d", len(hits), q.Limit)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	return func() error {
		close(done)
		var first error
		for range workers {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return first
	}
}

// Replacing one document over and over renumbers the realm rather than
// growing it, and the answer stays the one live copy.
func TestReplaceChurnRenumbers(t *testing.T) {
	ix, _ := New(Options{Weights: ftsWeights})
	for i := range 3000 {
		d := Doc{ID: "only", Realm: "r", Scope: "realm", Fields: [][]string{nil, {"coffee", fmt.Sprint("v", i)}, nil, nil}}
		if err := ix.Put(d); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(ix.realms["r"].ids); n > 2100 {
		t.Fatalf("%d document slots for one live document: deleted slots are not reclaimed", n)
	}
	hits, err := ix.Search(Query{Realm: "r", Terms: []string{"coffee", "v2999", "v5"}, Limit: 10})
	if err != nil || len(hits) != 1 || hits[0].ID != "only" || ix.Len() != 1 {
		t.Fatalf("Search = %v, %v; Len %d; want the one document", hits, err, ix.Len())
	}
	want := newReference(StatsIndex)
	want.docs[key("r", "only")] = &refDoc{Doc: Doc{ID: "only", Realm: "r", Scope: "realm", Seq: 3000, Fields: [][]string{nil, {"coffee", "v2999"}, nil, nil}}, active: true}
	if ref := want.search(Query{Realm: "r", Terms: []string{"coffee", "v2999", "v5"}, Limit: 10}); !slices.Equal(hits, ref) {
		t.Fatalf("Search = %v, reference %v", hits, ref)
	}
}

// TestThreadContext: a turn that answers without naming its topic is found
// through its neighbour, ranked below the turn that names it, and loses
// that context when the neighbour goes or moves away.
func TestThreadContext(t *testing.T) {
	ix, err := New(Options{Weights: ftsWeights, ContextWeight: ContextWeight})
	if err != nil {
		t.Fatal(err)
	}
	put := func(id, body, thread string, seq int64) {
		t.Helper()
		if err := ix.Put(Doc{ID: id, Realm: "r", Scope: "realm", Fields: [][]string{nil, nil, nil, FieldTerms(body)}, Thread: thread, ThreadSeq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	search := func() []string {
		t.Helper()
		hits, err := ix.Search(Query{Realm: "r", Terms: QueryTerms("pottery class"), Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, h := range hits {
			ids = append(ids, h.ID)
		}
		return ids
	}
	put("q", "Did you go to the pottery class?", "c1", 1)
	put("a", "Yes, I made a bowl on Tuesday", "c1", 2)
	put("far", "The weather was nice", "c1", 4)
	put("other", "I made soup", "c2", 2)
	if got, want := search(), []string{"q", "a"}; !slices.Equal(got, want) {
		t.Fatalf("with the neighbour: %v, want %v", got, want)
	}
	put("q", "Did you go to the pottery class?", "c1", 5) // moves beside "far"
	if got, want := search(), []string{"q", "far"}; !slices.Equal(got, want) {
		t.Fatalf("after the move: %v, want %v", got, want)
	}
	ix.Delete("r", "q")
	if got := search(); len(got) != 0 {
		t.Fatalf("after the delete: %v, want nothing", got)
	}
}

// TestThreadContextScopes: records of two scopes under one thread id are
// no neighbours. Alice's record beside bob's at seq 0 of "conv-bob" is not
// found by bob's words (she could probe his conversation word by word),
// bob's is not found by hers, and neither score moves; a record that
// changes scope leaves its old place and joins the new one; a snapshot
// keeps the rule.
func TestThreadContextScopes(t *testing.T) {
	ix, err := New(Options{Weights: ftsWeights, ContextWeight: ContextWeight})
	if err != nil {
		t.Fatal(err)
	}
	put := func(ix *Index, id, scope, body, thread string, seq int64) {
		t.Helper()
		if err := ix.Put(Doc{ID: id, Realm: "r", Scope: scope, Fields: [][]string{nil, nil, nil, FieldTerms(body)}, Thread: thread, ThreadSeq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	search := func(ix *Index, query string, scopes ...string) []Hit {
		t.Helper()
		hits, err := ix.Search(Query{Realm: "r", Terms: QueryTerms(query), Scopes: scopes, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for i := range hits {
			hits[i].Seq = 0 // the two indexes number their writes apart
		}
		return hits
	}
	// alone holds the same documents, bob's in a thread of his own: the
	// scores every query must see.
	alone, _ := New(Options{Weights: ftsWeights, ContextWeight: ContextWeight})
	put(ix, "bob0", "identity:bob", "we flew to zanzibar", "conv-bob", 0)
	put(ix, "alice1", "identity:alice", "probe text", "conv-bob", 1)
	put(alone, "bob0", "identity:bob", "we flew to zanzibar", "bob's own", 0)
	put(alone, "alice1", "identity:alice", "probe text", "conv-bob", 1)
	for _, q := range []struct {
		query  string
		scopes []string
	}{{"zanzibar", nil}, {"zanzibar", []string{"identity:alice"}}, {"probe", nil}, {"probe", []string{"identity:bob"}}} {
		if got, want := search(ix, q.query, q.scopes...), search(alone, q.query, q.scopes...); !slices.Equal(got, want) {
			t.Errorf("Search(%q, %v) = %v, want %v (as with no shared thread id)", q.query, q.scopes, got, want)
		}
	}
	// Alice's record moves to bob's scope: now it is his neighbour.
	put(ix, "alice1", "identity:bob", "probe text", "conv-bob", 1)
	if got := search(ix, "zanzibar", "identity:bob"); len(got) != 2 {
		t.Errorf("after the move into bob's scope: %v, want both records", got)
	}
	// And back: it leaves his place.
	put(ix, "alice1", "identity:alice", "probe text", "conv-bob", 1)
	var snap bytes.Buffer
	if err := ix.Encode(&snap); err != nil {
		t.Fatal(err)
	}
	back, err := Decode(&snap)
	if err != nil {
		t.Fatal(err)
	}
	for name, ix := range map[string]*Index{"after the move back": ix, "decoded": back} {
		if got, want := search(ix, "zanzibar"), search(alone, "zanzibar"); !slices.Equal(got, want) {
			t.Errorf("%s: Search(zanzibar) = %v, want %v", name, got, want)
		}
	}
	// A write beside bob's record in the decoded index must not join
	// alice's either.
	put(back, "bob2", "identity:bob", "more", "conv-bob", 2)
	put(alone, "bob2", "identity:bob", "more", "bob's own", 2)
	if got, want := search(back, "probe"), search(alone, "probe"); !slices.Equal(got, want) {
		t.Errorf("decoded, after a write: Search(probe) = %v, want %v", got, want)
	}
}

// TestLocate answers a document's scope and Seq while the index holds it,
// and nothing for another realm, an unknown id or a deleted document.
func TestLocate(t *testing.T) {
	ix, err := New(Options{Weights: ftsWeights})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []Doc{
		{ID: "a", Realm: "r1", Scope: "identity:alice", Seq: 7, Fields: [][]string{{"walrus"}, nil, nil, nil}},
		{ID: "b", Realm: "r1", Scope: "realm", Seq: 9, Fields: [][]string{{"otter"}, nil, nil, nil}},
	} {
		if err := ix.Put(d); err != nil {
			t.Fatal(err)
		}
	}
	ix.Delete("r1", "b")
	cases := []struct {
		realm, id string
		scope     string
		seq       uint64
		ok        bool
	}{
		{"r1", "a", "identity:alice", 7, true},
		{"r1", "b", "", 0, false},
		{"r2", "a", "", 0, false},
		{"r1", "c", "", 0, false},
	}
	for _, c := range cases {
		scope, seq, ok := ix.Locate(c.realm, c.id)
		if scope != c.scope || seq != c.seq || ok != c.ok {
			t.Errorf("Locate(%s, %s) = %q, %d, %v; want %q, %d, %v", c.realm, c.id, scope, seq, ok, c.scope, c.seq, c.ok)
		}
	}
}

// TestAtPlacesIsBounded: a crowded place answers its MaxPlaceReads least
// ids (in byte order), place by place.
func TestAtPlacesIsBounded(t *testing.T) {
	ix, err := New(Options{Weights: ftsWeights, ContextWeight: ContextWeight})
	if err != nil {
		t.Fatal(err)
	}
	put := func(id string, seq int64) {
		t.Helper()
		if err := ix.Put(Doc{ID: id, Realm: "r", Scope: "realm", Fields: [][]string{nil, nil, nil, FieldTerms("word " + id)}, Thread: "t", ThreadSeq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	var crowd []string
	for i := MaxPlaceReads + 3; i >= 0; i-- {
		id := fmt.Sprintf("c%02d", i)
		put(id, 1)
		crowd = append(crowd, id)
	}
	put("B", 1) // byte order puts it first
	crowd = append(crowd, "B")
	put("a", 2)
	slices.Sort(crowd)
	want := append(crowd[:MaxPlaceReads], "a")
	if got := ix.AtPlaces("r", []Place{{"realm", "t", 1}, {"realm", "t", 2}, {"realm", "t", 3}}); !slices.Equal(got, want) {
		t.Errorf("AtPlaces = %v, want %v", got, want)
	}
}

// TestDeadTermsAndTagsAreShed: from an outside review. A realm kept every
// term and tag it ever saw, in memory and in every snapshot, so one whose
// records carry one-off words (request ids, hashes) and session tags grew
// without bound while its live records stayed few. Renumbering sheds the
// terms and tags no live document holds, and Encode writes only those.
func TestDeadTermsAndTagsAreShed(t *testing.T) {
	ix, _ := New(Options{Weights: ftsWeights, Stats: StatsRealm, ContextWeight: ContextWeight})
	const live, puts = 10, 20_000
	for i := range puts {
		d := Doc{ID: fmt.Sprintf("rec%d", i), Realm: "r", Scope: "realm", Tags: []string{fmt.Sprintf("session-%d", i)},
			Fields: [][]string{nil, {"deploy"}, nil, {"request", fmt.Sprintf("req%08x", i*2654435761)}}}
		if i%3 == 0 {
			d.Thread, d.ThreadSeq = "t", int64(i)
		}
		if err := ix.Put(d); err != nil {
			t.Fatal(err)
		}
		if i >= live {
			ix.Delete("r", fmt.Sprintf("rec%d", i-live))
		}
	}
	ix.Cluster(0)
	rm := ix.realms["r"]
	// Up to the 1024 deleted documents a renumbering waits for keep theirs.
	if n, m := len(rm.termNames), len(rm.tagIDs); n > 2*1100 || m > 1100 {
		t.Errorf("%d live documents, but the realm holds %d terms and %d tags", ix.Len(), n, m)
	}
	var buf bytes.Buffer
	if err := ix.Encode(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := Decode(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	brm := back.realms["r"]
	if n, m := len(brm.termNames), len(brm.tagIDs); n > 2+live || m > live {
		t.Errorf("%d live documents, but a snapshot keeps %d terms and %d tags", back.Len(), n, m)
	}
	last := fmt.Sprintf("rec%d", puts-1)
	for _, x := range []*Index{ix, back} {
		hits, err := x.Search(Query{Realm: "r", Terms: []string{fmt.Sprintf("req%08x", (puts-1)*2654435761)}, Tags: []string{fmt.Sprintf("SESSION-%d", puts-1)}, Limit: 5})
		if err != nil || len(hits) != 1 || hits[0].ID != last {
			t.Errorf("the last record by its own word and tag: %v, %v", hits, err)
		}
		hits, err = x.Search(Query{Realm: "r", Terms: []string{"req00000000"}, Limit: 5})
		if err != nil || len(hits) != 0 {
			t.Errorf("a deleted record's word: %v, %v", hits, err)
		}
	}
}

// TestChurnUnderClusterStaysBounded: from an outside review. Terms and
// tags were shed only when deleted slots outnumbered the live documents,
// but Cluster (which the stores run after writes) drops the deleted slots
// of recent documents, so a large realm whose churn lands on recent
// records never renumbered, and kept every one-off word and session tag
// it ever saw in memory. The terms and tags no live document holds now
// renumber the realm once they outnumber the live documents.
func TestChurnUnderClusterStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 puts and clusterings, single-goroutine (nothing for the race run to find); the plain run checks it")
	}
	ix, _ := New(Options{Weights: ftsWeights, Stats: StatsRealm, ContextWeight: ContextWeight})
	const live, puts = 10_000, 100_000
	for i := range live {
		d := Doc{ID: fmt.Sprintf("rec%d", i), Realm: "r", Scope: []string{"alice", "bob"}[i%2],
			Fields: [][]string{nil, {"deploy"}, nil, {"request", fmt.Sprintf("base%d", i)}}}
		if err := ix.Put(d); err != nil {
			t.Fatal(err)
		}
	}
	ix.Cluster(1.0 / 16)
	req := func(i int) string { return fmt.Sprintf("req%08x", i*2654435761) }
	for i := range puts {
		// Two "current state" records, rewritten with a request id and a
		// session tag each time.
		d := Doc{ID: fmt.Sprintf("state%d", i%2), Realm: "r", Scope: []string{"bob", "alice"}[i%2], Tags: []string{fmt.Sprintf("session-%d", i)},
			Fields: [][]string{nil, {"deploy"}, nil, {"request", req(i)}}}
		if err := ix.Put(d); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			ix.Cluster(1.0 / 16) // as the stores do after writes
		}
	}
	rm := ix.realms["r"]
	checkUnheld(t, rm)
	// The live documents hold live+4 terms and 2 tags; as many again may
	// wait for the next renumbering.
	if n, m := len(rm.termNames), len(rm.tagIDs); n+m > 2*(live+6)+1024 {
		t.Errorf("%d live documents, but the realm keeps %d terms and %d tags", rm.live, n, m)
	}
	for i := puts - 2; i < puts; i++ {
		hits, err := ix.Search(Query{Realm: "r", Terms: []string{req(i)}, Tags: []string{fmt.Sprintf("session-%d", i)}, Limit: 5})
		if err != nil || len(hits) != 1 || hits[0].ID != fmt.Sprintf("state%d", i%2) {
			t.Errorf("state%d by its own word and tag: %v, %v", i%2, hits, err)
		}
	}
	if hits, err := ix.Search(Query{Realm: "r", Terms: []string{req(puts - 3)}, Limit: 5}); err != nil || len(hits) != 0 {
		t.Errorf("a replaced record's word: %v, %v", hits, err)
	}
}

// checkUnheld fails unless rm counts the terms and tags no live document
// holds as they are.
func checkUnheld(t *testing.T, rm *realm) {
	t.Helper()
	tags := make([]int32, len(rm.tagIDs))
	for no := range rm.ids {
		if rm.scope[no] != deadScope {
			for _, tag := range rm.tags.at(uint32(no)) {
				tags[tag]++
			}
		}
	}
	if !slices.Equal(tags, rm.tagLive) {
		t.Errorf("the live documents carry tags %v times, the realm counts %v", tags, rm.tagLive)
	}
	n := 0
	for _, c := range tags {
		if c == 0 {
			n++
		}
	}
	for i := range rm.lists {
		if rm.lists[i].df == 0 {
			n++
		}
	}
	if n != rm.unheld {
		t.Errorf("%d terms and tags no live document holds, counted %d", n, rm.unheld)
	}
}

// TestShedTermsKeepExactness: documents with words and tags of their own,
// in threads, deleted, replaced, superseded and expiring, rank as the
// reference ranks them across renumberings that shed terms and tags, and
// after a snapshot that leaves them out.
func TestShedTermsKeepExactness(t *testing.T) {
	if testing.Short() {
		t.Skip("single-goroutine exactness over random corpora; the plain run checks it")
	}
	for i, ctx := range []float64{0, 0.5} {
		c := newThreadCorpus(t, uint64(40+i), 30, StatsRealm, ctx)
		c.oneOff = true
		for n := range 6000 {
			c.step()
			if n%4 == 0 && len(c.ids) > 0 {
				// Churn: deletes outnumber the rest, so realms renumber.
				k := c.ids[c.rng.IntN(len(c.ids))]
				realm, id, _ := strings.Cut(k, "\x00")
				c.ix.Delete(realm, id)
				delete(c.ref.docs, k)
			}
			if n%97 == 0 {
				c.check(c.query())
			}
		}
		for _, k := range c.ids[:len(c.ids)*4/5] {
			realm, id, _ := strings.Cut(k, "\x00")
			c.ix.Delete(realm, id)
			delete(c.ref.docs, k)
		}
		for range 200 {
			c.check(c.query())
		}
		held := 0
		for _, rm := range c.ix.realms {
			held += len(rm.termNames)
		}
		if held >= int(c.seq) {
			t.Fatalf("%d documents put, each with a word of its own, and %d terms held: none shed", c.seq, held)
		}
		var buf bytes.Buffer
		if err := c.ix.Encode(&buf); err != nil {
			t.Fatal(err)
		}
		back, err := Decode(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatal(err)
		}
		c.ix = back
		for range 200 {
			c.check(c.query())
		}
		for range 2000 {
			c.step() // writes go on after the decode
		}
		c.ix.Cluster(0)
		for range 200 {
			c.check(c.query())
		}
		for _, rm := range c.ix.realms {
			checkUnheld(t, rm)
		}
	}
}
