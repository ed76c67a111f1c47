package index

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk/tokenize"
)

// The benchmark corpus is shaped like the sqlite provider's: made-up words
// from a 20,000-word vocabulary drawn with a Zipf law (s = 1.1, the 150
// commonest ranks flattened), 3-9 title words, 6-16 description words,
// 10-60 body words, 0-3 tags; 20 identities and the realm scope. A query
// is two words of a random record's title and 2-4 Zipf words, asked in
// one identity's scope plus the realm scope, limit 10.

var benchSyllables = strings.Fields("ka ri to mu sen ra pel dor vin esh lo tam quo bri zel nor fa gu hin jop kel mir nat pov rus sil tev ul wex yor zan cha dri fel gro hal ist jun kra lum mok nib orf pra qui ros sta tru umb vel wra xen yal zor")

type benchCorpus struct {
	vocab []string
	tags  []string
}

var benchWords = sync.OnceValue(func() *benchCorpus {
	r := rand.New(rand.NewPCG(1, 2))
	c := &benchCorpus{}
	seen := map[string]bool{}
	for len(c.vocab) < 20000 {
		var b strings.Builder
		for range 2 + r.IntN(3) {
			b.WriteString(benchSyllables[r.IntN(len(benchSyllables))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			c.vocab = append(c.vocab, w)
		}
	}
	for i := range 200 {
		c.tags = append(c.tags, c.vocab[i*7+3])
	}
	return c
})

func (c *benchCorpus) words(z *rand.Zipf, n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = c.vocab[z.Uint64()]
	}
	return strings.Join(parts, " ")
}

type benchRecord struct {
	title, desc, body string
	tags              []string
	scope             string
}

func (c *benchCorpus) record(i int) benchRecord {
	r := rand.New(rand.NewPCG(uint64(i), 99))
	z := rand.NewZipf(r, 1.1, 150, uint64(len(c.vocab)-1))
	out := benchRecord{scope: fmt.Sprintf("identity:user%d", i%20)}
	if i%10 == 0 {
		out.scope = "realm"
	}
	out.title, out.desc, out.body = c.words(z, 3+r.IntN(7)), c.words(z, 6+r.IntN(11)), c.words(z, 10+r.IntN(51))
	for range r.IntN(4) {
		out.tags = append(out.tags, c.tags[r.IntN(len(c.tags))])
	}
	return out
}

func (rec benchRecord) doc(i int) Doc {
	return Doc{
		ID: fmt.Sprintf("r%07d", i), Realm: "default", Scope: rec.scope, Tags: rec.tags,
		Fields: [][]string{tokenize.Tokens(strings.Join(rec.tags, " ")), tokenize.Tokens(rec.title), tokenize.Tokens(rec.desc), tokenize.Tokens(rec.body)},
	}
}

func (c *benchCorpus) query(i, n int) Query {
	r := rand.New(rand.NewPCG(uint64(i), 7))
	z := rand.NewZipf(r, 1.1, 150, uint64(len(c.vocab)-1))
	title := strings.Fields(c.record(r.IntN(n)).title)
	text := strings.Join([]string{title[r.IntN(len(title))], title[r.IntN(len(title))], c.words(z, 2+r.IntN(3))}, " ")
	return Query{
		Realm: "default", Terms: tokenize.Terms(text), Limit: 10, NowMs: 1,
		Scopes: []string{fmt.Sprintf("identity:user%d", i%20), "realm"},
	}
}

var benchIndexes sync.Map // n -> *Index

func benchIndex(tb testing.TB, n int) *Index {
	if ix, ok := benchIndexes.Load(n); ok {
		return ix.(*Index)
	}
	c := benchWords()
	ix, err := New(Options{Weights: ftsWeights})
	if err != nil {
		tb.Fatal(err)
	}
	for i := range n {
		if err := ix.Put(c.record(i).doc(i)); err != nil {
			tb.Fatal(err)
		}
	}
	ix.Cluster(0) // as a provider holds it after its snapshot
	benchIndexes.Store(n, ix)
	return ix
}

// BenchmarkSearch reports recall latency percentiles in-process, over
// 1,000 distinct queries, at 10k and 100k records or at the sizes
// BENCH_SEARCH_RECORDS lists.
func BenchmarkSearch(b *testing.B) {
	for _, n := range benchSizes(b, "BENCH_SEARCH_RECORDS", 10_000, 100_000) {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			ix := benchIndex(b, n)
			c := benchWords()
			queries := make([]Query, 1000)
			for i := range queries {
				queries[i] = c.query(i, n)
			}
			var lat []time.Duration
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				if _, err := ix.Search(queries[i%len(queries)]); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
}

// BenchmarkHybrid reports recall latency at 100k records (or
// BENCH_HYBRID_RECORDS), lexical alone and fused with a vector half, for
// embeddings of 100 (static word vectors) and 384 dimensions (a small
// sentence encoder): exact (the vectors put with annThreshold out of
// reach, so no graph) and ann (the graph built at any size, answering
// the queries whose scopes list annThreshold vectors or more; the
// graph's recall is also reported for the queries without scopes). The vectors are clustered
// random ones (256 centres, Gaussian noise of half their scale), as
// embeddings of texts on a number of topics are: brute force does not
// care, a graph does (on structureless Gaussian vectors it searches far
// more of itself). BENCH_HYBRID_MODES=exact skips the graphs' build.
func BenchmarkHybrid(b *testing.B) {
	n := 100_000
	if s := os.Getenv("BENCH_HYBRID_RECORDS"); s != "" { // where the graph starts to pay
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	ix := benchIndex(b, n)
	c := benchWords()
	queries := make([]Query, 1000)
	for i := range queries {
		queries[i] = c.query(i, n)
	}
	// timed answers how long each query takes, sorted.
	timed := func(b *testing.B, n int, query func(i int) Query) []time.Duration {
		var lat []time.Duration
		for i := 0; n < 0 && b.Loop() || i < n; i++ {
			q := query(i)
			t0 := time.Now()
			if _, err := ix.Search(q); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		return lat
	}
	run := func(b *testing.B, vector func(i int) []float32, model string) {
		lat := timed(b, -1, func(i int) Query {
			q := queries[i%len(queries)]
			if vector != nil {
				q.Vector, q.Model = vector(i), model
			}
			return q
		})
		b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
	}
	b.Run("lexical", func(b *testing.B) { run(b, nil, "") })
	// The lexical half of a hybrid search: its top FusionDepth, the floor
	// under a hybrid search's cost.
	b.Run(fmt.Sprintf("lexical-limit=%d", FusionDepth), func(b *testing.B) {
		saved := queries
		queries = slices.Clone(queries)
		for i := range queries {
			queries[i].Limit = FusionDepth
		}
		defer func() { queries = saved }()
		run(b, nil, "")
	})
	modes := []string{"exact", "ann"}
	if m := os.Getenv("BENCH_HYBRID_MODES"); m != "" {
		modes = strings.Split(m, ",")
	}
	for _, dims := range []int{100, 384} {
		for _, mode := range modes {
			b.Run(fmt.Sprintf("hybrid-dims=%d-%s", dims, mode), func(b *testing.B) {
				r := rand.New(rand.NewPCG(uint64(dims), 5))
				centres := make([][]float32, 256)
				for c := range centres {
					centres[c] = make([]float32, dims)
					for i := range centres[c] {
						centres[c][i] = float32(r.NormFloat64())
					}
				}
				gauss := func() []float32 { // near a random centre
					ctr := centres[r.IntN(len(centres))]
					v := make([]float32, dims)
					for i := range v {
						v[i] = ctr[i] + float32(0.5*r.NormFloat64())
					}
					return v
				}
				model := fmt.Sprintf("bench-%d-%s", dims, mode)
				if _, ok := benchModels.Load(model); !ok {
					// Put rate: the graph is grown on every put.
					saved := annThreshold
					annThreshold = 1000 // ann: the graph at any size measured
					if mode == "exact" {
						annThreshold = math.MaxInt
					}
					t0 := time.Now()
					for i := range n {
						if _, err := ix.PutVector("default", fmt.Sprintf("r%07d", i), model, gauss()); err != nil {
							b.Fatal(err)
						}
					}
					annThreshold = saved
					benchModels.Store(model, float64(n)/time.Since(t0).Seconds())
				}
				qv := make([][]float32, 64)
				for i := range qv {
					qv[i] = gauss()
				}
				run(b, func(i int) []float32 { return qv[i%len(qv)] }, model)
				rate, _ := benchModels.Load(model)
				b.ReportMetric(rate.(float64), "vector-puts/s")
				// Without scopes every vector is listed: the graph (ann)
				// against the whole set's scan (exact).
				lat := timed(b, 300, func(i int) Query {
					q := queries[i]
					q.Scopes, q.Vector, q.Model = nil, qv[i%len(qv)], model
					return q
				})
				b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "unscoped-p50-µs")
				if mode == "ann" {
					recall, share := benchRecall(ix, queries, qv, model)
					b.ReportMetric(recall, "recall@10")
					b.ReportMetric(share, "graph-share")
					// The queries' scopes list too few vectors for the
					// graph; without them it answers.
					all := slices.Clone(queries[:len(qv)])
					for i := range all {
						all[i].Scopes = nil
					}
					recall, share = benchRecall(ix, all, qv, model)
					b.ReportMetric(recall, "unscoped-recall@10")
					b.ReportMetric(share, "unscoped-graph-share")
				}
			})
		}
	}
}

// benchRecall answers the mean recall@10 of the vector half's top (as
// hybrid takes it, under each query's filters) against exact cosine, and
// the share of queries the graph answered rather than brute force.
func benchRecall(ix *Index, queries []Query, qv [][]float32, model string) (recall, share float64) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	rm := ix.realms["default"]
	ms := rm.models[model]
	sum := 0.0
	for i, v := range qv {
		q := queries[i]
		unit, _ := normalize(v)
		f, _ := newFilter(rm, &q)
		sc := ix.getScratch(len(rm.ids))
		docs, cos, approx := semanticTop(rm, ms, unit, &f, nil, sc, FusionDepth)
		if approx {
			share += 1 / float64(len(qv))
		}
		got := top(rm, sc, docs, cos, 10)
		var all []uint32
		var exact []float64
		for no, dv := range rm.vec {
			if dv != nil && dv.set == ms && f.pass(uint32(no)) {
				all, exact = append(all, uint32(no)), append(exact, dot(unit, dv.v))
			}
		}
		want := top(rm, sc, all, exact, 10)
		for _, h := range got {
			if slices.ContainsFunc(want, func(w Hit) bool { return w.ID == h.ID }) {
				sum += 0.1
			}
		}
		ix.putScratch(sc)
	}
	return sum / float64(len(qv)), share
}

// benchSizes answers the record counts the environment variable env
// lists, comma-separated, or sizes when it is unset.
func benchSizes(b *testing.B, env string, sizes ...int) []int {
	s := os.Getenv(env)
	if s == "" {
		return sizes
	}
	sizes = nil
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			b.Fatalf("%s: %q is not a record count", env, f)
		}
		sizes = append(sizes, n)
	}
	return sizes
}

var benchModels sync.Map // models BenchmarkHybrid has put -> their puts/s

// BenchmarkHeapPerRecord reports the index's live heap per record, at
// 10k and 100k records or at the sizes BENCH_HEAP_RECORDS lists
// (comma-separated; 1000000 needs about 3 GiB).
func BenchmarkHeapPerRecord(b *testing.B) {
	for _, n := range benchSizes(b, "BENCH_HEAP_RECORDS", 10_000, 100_000) {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			c := benchWords()
			docs := make([]Doc, n)
			for i := range docs {
				docs[i] = c.record(i).doc(i)
			}
			var per float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				ix, _ := New(Options{Weights: ftsWeights})
				for _, d := range docs {
					if err := ix.Put(d); err != nil {
						b.Fatal(err)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				// The docs' term strings are shared with the caller's
				// slices, which stay alive; count them as the index's.
				per = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
				runtime.KeepAlive(ix)
			}
			runtime.KeepAlive(docs)
			b.ReportMetric(per, "heap-B/record")
			// Reopened from a snapshot the slices are exact, without the
			// slack of growing them one document at a time.
			var buf bytes.Buffer
			if err := benchIndex(b, n).Encode(&buf); err != nil {
				b.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ix, err := Decode(bytes.NewReader(buf.Bytes()))
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			runtime.KeepAlive(ix)
			runtime.KeepAlive(&buf)
			b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "decoded-heap-B/record")
		})
	}
}

// BenchmarkOpen measures reopening from a snapshot (Decode), the path a
// store takes at start instead of tokenizing every record, at 10k and
// 100k records or at the sizes BENCH_OPEN_RECORDS lists.
func BenchmarkOpen(b *testing.B) {
	for _, n := range benchSizes(b, "BENCH_OPEN_RECORDS", 10_000, 100_000) {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			var buf bytes.Buffer
			if err := benchIndex(b, n).Encode(&buf); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := Decode(bytes.NewReader(buf.Bytes())); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(buf.Len())/float64(n), "snapshot-B/record")
			b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/open")
		})
	}
}

// BenchmarkEncode measures writing a snapshot at 10k and 100k records
// (or BENCH_OPEN_RECORDS): as held, and with one document in a hundred
// deleted, when every list is rebuilt on the dense docnos.
func BenchmarkEncode(b *testing.B) {
	for _, n := range benchSizes(b, "BENCH_OPEN_RECORDS", 10_000, 100_000) {
		for _, deleted := range []bool{false, true} {
			b.Run(fmt.Sprintf("records=%d/deleted=%v", n, deleted), func(b *testing.B) {
				var ix *Index
				if !deleted {
					ix = benchIndex(b, n)
				} else {
					var buf bytes.Buffer
					if err := benchIndex(b, n).Encode(&buf); err != nil {
						b.Fatal(err)
					}
					var err error
					if ix, err = Decode(&buf); err != nil {
						b.Fatal(err)
					}
					for i := 0; i < n; i += 100 {
						if !ix.Delete("default", fmt.Sprintf("r%07d", i)) {
							b.Fatalf("document %d not deleted", i)
						}
					}
				}
				var buf bytes.Buffer
				for b.Loop() {
					buf.Reset()
					if err := ix.Encode(&buf); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(b.Elapsed().Seconds()*1e3/float64(b.N), "ms/encode")
			})
		}
	}
}

// BenchmarkPut measures adding tokenized documents (the write path, and a
// rebuild without a snapshot).
func BenchmarkPut(b *testing.B) {
	c := benchWords()
	docs := make([]Doc, 10_000)
	for i := range docs {
		docs[i] = c.record(i).doc(i)
	}
	b.ResetTimer()
	for b.Loop() {
		ix, _ := New(Options{Weights: ftsWeights})
		for _, d := range docs {
			if err := ix.Put(d); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(docs))*float64(b.N)/b.Elapsed().Seconds(), "docs/s")
}

// BenchmarkPutChurn measures rewriting recent records that carry one-off
// words and tags in a realm of 10k, with Cluster run after every 1,000
// writes as the stores do: the writes pay for the renumberings that shed
// what the rewritten records no longer hold.
func BenchmarkPutChurn(b *testing.B) {
	ix, _ := New(Options{Weights: ftsWeights, Stats: StatsRealm, ContextWeight: ContextWeight})
	for i := range 10_000 {
		ix.Put(Doc{ID: fmt.Sprintf("rec%d", i), Realm: "r", Scope: []string{"alice", "bob"}[i%2],
			Fields: [][]string{nil, {"deploy"}, nil, {"request", fmt.Sprintf("base%d", i)}}})
	}
	ix.Cluster(1.0 / 16)
	i := 0
	for b.Loop() {
		ix.Put(Doc{ID: fmt.Sprintf("state%d", i%8), Realm: "r", Scope: []string{"bob", "alice"}[i%2], Tags: []string{fmt.Sprintf("session-%d", i)},
			Fields: [][]string{nil, {"deploy"}, nil, {"request", fmt.Sprintf("req%08x", i*2654435761)}}})
		if i++; i%1000 == 0 {
			ix.Cluster(1.0 / 16)
		}
	}
}

// BenchmarkMissingVectors measures one backlog page of 256 ids, from the
// start and from the middle, of a realm of 300k documents with no vector
// yet (a first embedder, or a model change), held under the index's read
// lock: every realm's writes wait on it.
func BenchmarkMissingVectors(b *testing.B) {
	const n = 300_000
	ix, err := New(Options{Weights: []float64{1}})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("r%024x", uint64(i)*0x9e3779b97f4a7c15)
		if err := ix.Put(Doc{ID: id, Realm: "r", Scope: "realm", Fields: [][]string{{"w"}}}); err != nil {
			b.Fatal(err)
		}
	}
	for _, after := range []string{"", "r000000008"} {
		b.Run(fmt.Sprintf("after=%q", after), func(b *testing.B) {
			for b.Loop() {
				if page := ix.MissingVectors("r", "m", after, 0, 256); len(page) != 256 {
					b.Fatalf("%d ids", len(page))
				}
			}
		})
	}
}

// BenchmarkDot compares dot (assembly where there is one) with dotGo on
// vectors in cache.
func BenchmarkDot(b *testing.B) {
	for _, dims := range []int{100, 384} {
		x, y := make([]float32, dims), make([]float32, dims)
		for i := range x {
			x[i], y[i] = float32(i%7)/7, float32(i%5)/5
		}
		for _, f := range []struct {
			name string
			fn   func(a, b []float32) float64
		}{{"dot", dot}, {"dotGo", dotGo}} {
			b.Run(fmt.Sprintf("%s-dims=%d", f.name, dims), func(b *testing.B) {
				s := 0.0
				for b.Loop() {
					s += f.fn(x, y)
				}
				runtime.KeepAlive(s)
			})
		}
	}
}

// BenchmarkDotsI8 times each int8 kernel over 30,000 copies of 112
// components (100 dimensions padded), about the lists memhost bench's
// queries read at 100k records, and over a copy set small enough for the
// processor's caches.
func BenchmarkDotsI8(b *testing.B) {
	for _, n := range []int{1_000, 30_000} {
		const pad = 112
		rng := rand.New(rand.NewPCG(1, 2))
		codes, q, out := make([]int8, n*pad), make([]int16, pad), make([]int32, n)
		for i := range codes {
			codes[i] = int8(rng.IntN(255) - 127)
		}
		for i := range q {
			q[i] = int16(rng.IntN(65535) - 32767)
		}
		for name, kernel := range dotsI8Kernels() {
			b.Run(fmt.Sprintf("%s-copies=%d", name, n), func(b *testing.B) {
				b.SetBytes(int64(len(codes)))
				for b.Loop() {
					kernel(codes, q, out)
				}
			})
		}
	}
}
