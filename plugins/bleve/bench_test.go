package bleve

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	blevesearch "github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
)

// Benchmarks at 10k and 100k records over synthetic text (deterministic:
// same seed, same corpus):
//
//	go test -run '^$' -bench Write -benchtime 1x ./plugins/bleve/
//	go test -run '^$' -bench 'Recall|Manifest' -benchtime 2000x ./plugins/bleve/
//
// Write builds its indexes from empty (one iteration is one whole index);
// an index it built is reused by the other benchmarks of the same run, and
// they build one, untimed, when it is missing. Set MEMHOST_BLEVE_BENCH_DIR
// to keep built indexes across runs.

var benchSizes = []int{10_000, 100_000}

func TestMain(m *testing.M) {
	code := testbin.Main(m)
	fixtures.Lock()
	for _, dir := range fixtures.dirs {
		os.RemoveAll(dir)
	}
	fixtures.Unlock()
	os.Exit(code)
}

var fixtures = struct {
	sync.Mutex
	dirs map[int]string
}{dirs: map[int]string{}}

// corpus draws words from a Zipf distribution over a synthetic vocabulary,
// so a few words are common and most are rare, as in real text. The law
// is offset (v=40) so the commonest word is about 0.45% of all words, as
// for English content words once the tokenizer drops stopwords; an
// unshifted law makes its top words stopwords that every record holds.
type corpus struct {
	rnd   *rand.Rand
	zipf  *rand.Zipf
	words []string
}

var syllables = strings.Fields("ka ri to mu se na lo pe vi da zu ko ba ne si ro ta me gu fi ha jo le qu wa xe yo ce di po")

func newCorpus(seed uint64) *corpus {
	rnd := rand.New(rand.NewPCG(seed, 0x6d656d686f7374))
	words := make([]string, 50_000)
	for i := range words {
		var b strings.Builder
		n := i
		for {
			b.WriteString(syllables[n%len(syllables)])
			n /= len(syllables)
			if n == 0 {
				break
			}
		}
		words[i] = b.String()
	}
	return &corpus{rnd: rnd, zipf: rand.NewZipf(rnd, 1.07, 40, uint64(len(words)-1)), words: words}
}

func (c *corpus) text(minWords, maxWords int) string {
	n := minWords + c.rnd.IntN(maxWords-minWords+1)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = c.words[c.zipf.Uint64()]
	}
	return strings.Join(parts, " ")
}

func (c *corpus) record() sdk.Record {
	scope := sdk.RealmScope
	switch x := c.rnd.IntN(10); {
	case x < 7:
		scope = sdk.IdentityScope(fmt.Sprintf("user%d", c.rnd.IntN(50)))
	case x < 9:
		scope = sdk.MobScope(fmt.Sprintf("team%d", c.rnd.IntN(10)))
	}
	var tags []string
	for range c.rnd.IntN(3) {
		tags = append(tags, fmt.Sprintf("tag%d", c.rnd.IntN(200)))
	}
	return sdk.Record{
		Scope: scope, Kind: sdk.KindFact, Tags: tags,
		Title:       c.text(3, 8),
		Description: c.text(6, 14),
		Body:        c.text(30, 150),
	}
}

// queries answers n deterministic query texts of 2 to 5 words.
func queries(n int) []string {
	c := newCorpus(99)
	out := make([]string, n)
	for i := range out {
		out[i] = c.text(2, 5)
	}
	return out
}

// writeCorpus writes n records in batches of sdk.MaxBatch, marks 1% used,
// and answers the time spent in Remember calls alone.
func writeCorpus(tb testing.TB, p *Provider, n int) time.Duration {
	c := newCorpus(1)
	var spent time.Duration
	for written := 0; written < n; {
		recs := make([]sdk.Record, min(sdk.MaxBatch, n-written))
		for i := range recs {
			recs[i] = c.record()
		}
		start := time.Now()
		ids, err := p.Remember(ctx, realm, recs)
		spent += time.Since(start)
		if err != nil {
			tb.Fatal(err)
		}
		if err := p.MarkUsed(ctx, realm, ids[:len(ids)/100], time.Now()); err != nil {
			tb.Fatal(err)
		}
		written += len(recs)
	}
	return spent
}

// keepDir, when set, keeps built indexes across runs (for profiling);
// delete it whenever the corpus or the index layout changes.
var keepDir = os.Getenv("MEMHOST_BLEVE_BENCH_DIR")

// fixture answers a closed data dir holding an n-record realm.
func fixture(b *testing.B, n int) string {
	fixtures.Lock()
	defer fixtures.Unlock()
	if dir, ok := fixtures.dirs[n]; ok {
		return dir
	}
	var dir string
	if keepDir != "" {
		dir = filepath.Join(keepDir, fmt.Sprintf("records-%d", n))
		if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
			return dir
		}
		os.RemoveAll(dir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
	} else {
		d, err := os.MkdirTemp("", fmt.Sprintf("memhost-bleve-bench-%d-", n))
		if err != nil {
			b.Fatal(err)
		}
		dir = d
		fixtures.dirs[n] = dir
	}
	p := NewWithLogger(nil)
	if err := p.Configure(ctx, configJSON(dir)); err != nil {
		b.Fatal(err)
	}
	writeCorpus(b, p, n)
	if err := p.Close(); err != nil {
		b.Fatal(err)
	}
	if keepDir != "" {
		if err := os.WriteFile(filepath.Join(dir, "complete"), nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

func diskBytes(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// BenchmarkWrite builds an index of n records from empty, in batches of
// 1000, each batch durable before the next. It reports records/s and the
// index's size on disk, and keeps the index for the other benchmarks.
func BenchmarkWrite(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			var spent time.Duration
			var dir string
			for range b.N {
				d, err := os.MkdirTemp("", fmt.Sprintf("memhost-bleve-bench-%d-", n))
				if err != nil {
					b.Fatal(err)
				}
				p := NewWithLogger(nil)
				if err := p.Configure(ctx, configJSON(d)); err != nil {
					b.Fatal(err)
				}
				spent += writeCorpus(b, p, n)
				if err := p.Close(); err != nil {
					b.Fatal(err)
				}
				if dir != "" {
					os.RemoveAll(dir)
				}
				dir = d
			}
			b.ReportMetric(float64(n*b.N)/spent.Seconds(), "records/s")
			b.ReportMetric(float64(diskBytes(dir))/1e6, "disk-MB")
			b.ReportMetric(float64(diskBytes(dir))/float64(n), "disk-B/record")
			fixtures.Lock()
			if old, ok := fixtures.dirs[n]; ok {
				os.RemoveAll(old)
			}
			fixtures.dirs[n] = dir
			fixtures.Unlock()
		})
	}
}

// latencies collects per-call durations.
type latencies []time.Duration

// percentiles answers p50 and p99 in milliseconds.
func (l latencies) percentiles() (p50, p99 float64) {
	s := slices.Clone(l)
	slices.Sort(s)
	pct := func(p float64) float64 {
		return float64(s[min(len(s)-1, int(p*float64(len(s))))].Nanoseconds()) / 1e6
	}
	return pct(0.50), pct(0.99)
}

// report reports p50 and p99.
func (l latencies) report(b *testing.B) {
	if len(l) == 0 {
		return
	}
	p50, p99 := l.percentiles()
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
}

// settle waits until a freshly opened realm has loaded its catalog (a
// manifest call waits for it), so timings see the steady state.
func settle(b *testing.B, m sdk.ManifestLister) {
	if _, err := m.Manifest(ctx, sdk.ManifestQuery{Realm: realm, Tier: sdk.TierWorkingSet, K: 1}); err != nil {
		b.Fatal(err)
	}
}

// benchScopes are what the host asks with for an identity: its own scope
// and the realm's (the plain yardstick ignores them). Set
// MEMHOST_BLEVE_BENCH_UNSCOPED to search the whole realm instead.
var benchScopes = func() []sdk.Scope {
	if os.Getenv("MEMHOST_BLEVE_BENCH_UNSCOPED") != "" {
		return nil
	}
	return []sdk.Scope{sdk.IdentityScope("user7"), sdk.RealmScope}
}()

// BenchmarkRecall measures top-10 BM25 recall three ways, side by side:
// plain bleve over the same corpus (the yardstick), the provider called
// in-process, and the provider through its plugin process (the built
// binary over gRPC with mTLS, as the host calls it). The three are
// interleaved query by query, on separate copies of the index, so that
// load from other processes on the machine falls on all of them alike; it
// reports each one's p50 and p99 and the plugin's p50 over the
// in-process p50.
func BenchmarkRecall(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			dir := fixture(b, n)
			plain, err := blevesearch.Open(plainFixture(b, n))
			if err != nil {
				b.Fatal(err)
			}
			defer plain.Close()
			p := NewWithLogger(nil)
			if err := p.Configure(ctx, configJSON(dir)); err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			copyDir := filepath.Join(b.TempDir(), "plugin")
			if err := copyTree(dir, copyDir); err != nil {
				b.Fatal(err)
			}
			_, prov := launchProvider(b, copyDir)
			settle(b, p)
			settle(b, prov)
			ways := []struct {
				name   string
				recall func(sdk.RecallQuery) (int, error)
			}{
				{"plain", func(q sdk.RecallQuery) (int, error) {
					req := blevesearch.NewSearchRequestOptions(query.NewMatchQuery(q.Query), q.Limit, 0, false)
					req.Fields = []string{"*"}
					res, err := plain.Search(req)
					if err != nil {
						return 0, err
					}
					return len(res.Hits), nil
				}},
				{"in-process", func(q sdk.RecallQuery) (int, error) {
					hits, err := p.Recall(ctx, q)
					return len(hits), err
				}},
				{"plugin", func(q sdk.RecallQuery) (int, error) {
					hits, err := prov.Recall(ctx, q)
					return len(hits), err
				}},
			}
			qs := queries(500)
			for _, q := range qs[:50] { // warm caches and the connection
				for _, w := range ways {
					if _, err := w.recall(sdk.RecallQuery{Realm: realm, Query: q, Limit: 10}); err != nil {
						b.Fatal(err)
					}
				}
			}
			lat := make([]latencies, len(ways))
			hits := make([]int, len(ways))
			b.ResetTimer()
			for i := range b.N {
				q := sdk.RecallQuery{Realm: realm, Query: qs[i%len(qs)], Limit: 10, Scopes: benchScopes}
				for k := range ways {
					w := (i + k) % len(ways) // rotate who goes first
					start := time.Now()
					got, err := ways[w].recall(q)
					lat[w] = append(lat[w], time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
					hits[w] += got
				}
			}
			b.StopTimer()
			for w := range ways {
				if hits[w] == 0 {
					b.Fatalf("%s found nothing: the benchmark measures nothing", ways[w].name)
				}
				p50, p99 := lat[w].percentiles()
				b.ReportMetric(p50, ways[w].name+"-p50-ms")
				b.ReportMetric(p99, ways[w].name+"-p99-ms")
			}
			inProcess, _ := lat[1].percentiles()
			plugin, _ := lat[2].percentiles()
			b.ReportMetric(plugin/inProcess, "plugin/in-process")
		})
	}
}

// copyTree copies the directory src to dst (files and directories only).
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o700)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o600)
	})
}

// BenchmarkManifest measures working_set(24) over the whole realm (the
// widest case: every scope) and over one identity scope.
func BenchmarkManifest(b *testing.B) {
	for _, n := range benchSizes {
		for _, scopes := range [][]sdk.Scope{nil, {sdk.IdentityScope("user7")}} {
			name := "realm"
			if scopes != nil {
				name = "identity"
			}
			b.Run(fmt.Sprintf("records=%d/working_set_24/%s", n, name), func(b *testing.B) {
				dir := fixture(b, n)
				p := NewWithLogger(nil)
				if err := p.Configure(ctx, configJSON(dir)); err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				settle(b, p)
				q := sdk.ManifestQuery{Realm: realm, Scopes: scopes, Tier: sdk.TierWorkingSet, K: 24}
				lat := make(latencies, 0, b.N)
				b.ResetTimer()
				for range b.N {
					start := time.Now()
					rows, err := p.Manifest(ctx, q)
					lat = append(lat, time.Since(start))
					if err != nil {
						b.Fatal(err)
					}
					if len(rows) != 48 {
						b.Fatalf("working set has %d rows, want 48", len(rows))
					}
				}
				b.StopTimer()
				lat.report(b)
			})
		}
	}
}

// plainFixture answers an index of the same corpus built with plain,
// default bleve: the dynamic default mapping (standard analyzer, stored
// fields, _all), BM25, batches of 1000. It is the yardstick for what the
// provider adds on top of the library.
func plainFixture(b *testing.B, n int) string {
	fixtures.Lock()
	defer fixtures.Unlock()
	key := -n // beside the provider's fixtures
	if dir, ok := fixtures.dirs[key]; ok {
		return filepath.Join(dir, "index")
	}
	var dir string
	if keepDir != "" {
		dir = filepath.Join(keepDir, fmt.Sprintf("plain-%d", n))
		if _, err := os.Stat(filepath.Join(dir, "complete")); err == nil {
			return filepath.Join(dir, "index")
		}
		os.RemoveAll(dir)
	} else {
		d, err := os.MkdirTemp("", fmt.Sprintf("memhost-bleve-plain-%d-", n))
		if err != nil {
			b.Fatal(err)
		}
		dir = d
		fixtures.dirs[key] = dir
	}
	im := mapping.NewIndexMapping()
	im.ScoringModel = index.BM25Scoring
	idx, err := blevesearch.NewUsing(filepath.Join(dir, "index"), im, scorch.Name, scorch.Name, nil)
	if err != nil {
		b.Fatal(err)
	}
	c := newCorpus(1)
	for written := 0; written < n; written += sdk.MaxBatch {
		batch := idx.NewBatch()
		for i := 0; i < sdk.MaxBatch; i++ {
			r := c.record()
			doc := map[string]any{"title": r.Title, "description": r.Description, "body": r.Body, "tags": r.Tags}
			if err := batch.Index(fmt.Sprintf("doc%d", written+i), doc); err != nil {
				b.Fatal(err)
			}
		}
		if err := idx.Batch(batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := idx.Close(); err != nil {
		b.Fatal(err)
	}
	if keepDir != "" {
		os.WriteFile(filepath.Join(dir, "complete"), nil, 0o600)
	}
	return filepath.Join(dir, "index")
}
