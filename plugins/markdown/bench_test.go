package markdown

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/conformance"
	"github.com/memhost/memhost/sdk/host"
)

// Benchmarks. Run them all with
//
//	go test -run '^$' -bench . -benchtime 2000x ./plugins/markdown/
//
// Recall reports p50 and p99 latency (µs) beside the mean, in-process and
// through the plugin boundary, and what opening the corpus cost (open-ms:
// read, parse and index every file; index-MiB: heap held in-process), on
// a synthetic corpus: English-like text
// with a Zipf word distribution and stopwords, ~100-word bodies, records
// spread over 100 identities, 10 mobs and the realm scope; queries are
// 8-word "turn texts" drawn from the same distribution.

var corpora = struct {
	sync.Mutex
	dirs map[int]string
	base string
}{dirs: map[int]string{}}

func TestMain(m *testing.M) {
	code := testbin.Main(m)
	for _, c := range opened.closers {
		c()
	}
	if corpora.base != "" {
		os.RemoveAll(corpora.base)
	}
	os.Exit(code)
}

// textGen writes pseudo-English from a fixed seed.
type textGen struct {
	rng   *rand.Rand
	zipf  *rand.Zipf
	vocab []string
}

var stopSample = strings.Fields("the a of and to in is it that for on with as was be this are by at or from not have an but")

func newTextGen(seed uint64) *textGen {
	rng := rand.New(rand.NewPCG(seed, 7))
	syll := strings.Fields("ka lo mi ra ten sor vel dun pri ang est ion ment ful ber tra co de plo yar nis ob ul ter ix gan")
	seen := map[string]bool{}
	var vocab []string
	for len(vocab) < 20000 {
		var b strings.Builder
		for range 2 + rng.IntN(3) {
			b.WriteString(syll[rng.IntN(len(syll))])
		}
		if w := b.String(); !seen[w] {
			seen[w] = true
			vocab = append(vocab, w)
		}
	}
	return &textGen{rng: rng, zipf: rand.NewZipf(rng, 1.1, 2, uint64(len(vocab)-1)), vocab: vocab}
}

func (g *textGen) words(n int) string {
	ws := make([]string, n)
	for i := range ws {
		if g.rng.IntN(10) < 4 {
			ws[i] = stopSample[g.rng.IntN(len(stopSample))]
		} else {
			ws[i] = g.vocab[g.zipf.Uint64()]
		}
	}
	return strings.Join(ws, " ")
}

func (g *textGen) record(i int) sdk.Record {
	var scope sdk.Scope
	switch k := i % 20; {
	case k < 17:
		scope = sdk.IdentityScope(fmt.Sprint("agent", i%100))
	case k < 19:
		scope = sdk.MobScope(fmt.Sprint("team", i%10))
	default:
		scope = sdk.RealmScope
	}
	r := sdk.Record{
		ID: fmt.Sprintf("b%06d", i), Scope: scope, Kind: sdk.KindFact,
		Title: g.words(4 + g.rng.IntN(5)), Description: g.words(8 + g.rng.IntN(7)), Body: g.words(40 + g.rng.IntN(80)),
	}
	for range g.rng.IntN(3) {
		r.Tags = append(r.Tags, g.vocab[g.rng.IntN(60)])
	}
	return r
}

// corpus answers a root holding n records, written once per test binary
// straight to disk (the way a git checkout would appear).
func corpus(b *testing.B, n int) string {
	corpora.Lock()
	defer corpora.Unlock()
	if dir, ok := corpora.dirs[n]; ok {
		return dir
	}
	if corpora.base == "" {
		base, err := os.MkdirTemp("", "md-bench-")
		if err != nil {
			b.Fatal(err)
		}
		corpora.base = base
	}
	dir := filepath.Join(corpora.base, fmt.Sprint(n))
	g := newTextGen(1)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	made := map[string]bool{}
	for i := range n {
		r := g.record(i)
		if err := prepare(&r, "default", at.Add(time.Duration(i)*time.Second)); err != nil {
			b.Fatal(err)
		}
		k := fileKey{"default", r.Scope, r.ID}
		d := filepath.Join(dir, filepath.FromSlash(k.dirRel()))
		if !made[d] {
			if err := os.MkdirAll(d, dirPerm); err != nil {
				b.Fatal(err)
			}
			made[d] = true
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(k.rel())), renderRecord(&r), filePerm); err != nil {
			b.Fatal(err)
		}
	}
	corpora.dirs[n] = dir
	return dir
}

func benchQueries() []sdk.RecallQuery {
	g := newTextGen(99)
	qs := make([]sdk.RecallQuery, 64)
	for i := range qs {
		qs[i] = sdk.RecallQuery{Realm: "default", Query: g.words(8)}
		if i%2 == 1 { // half ask for one identity's composed scopes
			qs[i].Scopes = []sdk.Scope{sdk.IdentityScope(fmt.Sprint("agent", i%100)), sdk.MobScope(fmt.Sprint("team", i%10)), sdk.RealmScope}
		}
	}
	return qs
}

// opened caches one provider per corpus: a Go benchmark function runs
// more than once (b.N probing), and loading 50k files is not what it
// measures. closers run in TestMain.
var opened = struct {
	sync.Mutex
	providers map[string]sdk.Provider
	metrics   map[string][2]float64 // open ms, index MiB
	closers   []func()
}{providers: map[string]sdk.Provider{}, metrics: map[string][2]float64{}}

// cachedProvider opens (once) a provider named key on the corpus of n
// records and reports how long the open took and, in-process, the heap
// the index holds.
func cachedProvider(b *testing.B, key string, n int, open func(root string) (sdk.Provider, func())) sdk.Provider {
	opened.Lock()
	defer opened.Unlock()
	b.Cleanup(func() { // after measure's ResetTimer, which drops metrics
		m := opened.metrics[key]
		b.ReportMetric(m[0], "open-ms")
		if m[1] > 0 {
			b.ReportMetric(m[1], "index-MiB")
		}
	})
	if p, ok := opened.providers[key]; ok {
		return p
	}
	root := corpus(b, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	p, closer := open(root)
	took := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := 0.0
	if strings.HasPrefix(key, "inprocess") && after.HeapAlloc > before.HeapAlloc {
		heap = float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
	}
	opened.providers[key] = p
	opened.metrics[key] = [2]float64{float64(took.Milliseconds()), heap}
	opened.closers = append(opened.closers, closer)
	return p
}

func openInProcess(b *testing.B) func(string) (sdk.Provider, func()) {
	return func(root string) (sdk.Provider, func()) {
		p := New()
		p.logger = slog.New(slog.DiscardHandler)
		if err := p.Configure(ctx, []byte(fmt.Sprintf(`{"root": %q}`, root))); err != nil {
			b.Fatal(err)
		}
		return p, func() { p.Close() }
	}
}

// measure runs recall b.N times and reports latency percentiles.
func measure(b *testing.B, prov sdk.Provider) {
	qs := benchQueries()
	for _, q := range qs { // warm up and check the queries find something
		if _, err := prov.Recall(ctx, q); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	hits := 0
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		h, err := prov.Recall(ctx, qs[i%len(qs)])
		lat = append(lat, time.Since(start))
		if err != nil {
			b.Fatal(err)
		}
		hits += len(h)
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(hits)/float64(b.N), "hits/op")
}

func BenchmarkRecall(b *testing.B) {
	for _, n := range []int{10000, 50000} {
		b.Run(fmt.Sprintf("inprocess/records=%d", n), func(b *testing.B) {
			measure(b, cachedProvider(b, fmt.Sprint("inprocess", n), n, openInProcess(b)))
		})
	}
	b.Run("grpc-inprocess/records=10000", func(b *testing.B) {
		// go-plugin's test mode: the gRPC stack without a process boundary.
		measure(b, cachedProvider(b, "grpc-inprocess", 10000, func(root string) (sdk.Provider, func()) {
			p := New()
			p.logger = slog.New(slog.DiscardHandler)
			conn, err := host.ServeInProcess(ctx, p, nil)
			if err != nil {
				b.Fatal(err)
			}
			return configureConn(b, conn, root), conn.Close
		}))
	})
	b.Run("process/records=10000", func(b *testing.B) {
		measure(b, cachedProvider(b, "process", 10000, func(root string) (sdk.Provider, func()) {
			conn := launchPlugin(b)
			return configureConn(b, conn, root), conn.Close
		}))
	})
}

func configureConn(b testing.TB, conn *host.Conn, root string) *conformance.Client {
	cfg, _ := json.Marshal(Config{Root: root})
	if err := conn.Configure(ctx, cfg); err != nil {
		b.Fatal(err)
	}
	prov, err := conformance.ClientOf(conn)
	if err != nil {
		b.Fatal(err)
	}
	return prov
}

func launchPlugin(t testing.TB) *host.Conn {
	bin, sum := testbin.Plugin(t, "markdown")
	conn, err := host.Launch(ctx, host.LaunchOptions{Name: "markdown", Path: bin, SHA256: sum, Dir: t.TempDir(), Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

// BenchmarkRemember measures durable write throughput: every record is
// fsynced before Remember answers. One op is one record, written in
// batches of the given size.
func BenchmarkRemember(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			p := New()
			p.logger = slog.New(slog.DiscardHandler)
			if err := p.Configure(ctx, []byte(fmt.Sprintf(`{"root": %q}`, b.TempDir()))); err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			g := newTextGen(5)
			b.ResetTimer()
			for done := 0; done < b.N; {
				recs := make([]sdk.Record, min(batch, b.N-done))
				for j := range recs {
					recs[j] = g.record(done + j)
					recs[j].ID = ""
				}
				if _, err := p.Remember(ctx, "default", recs); err != nil {
					b.Fatal(err)
				}
				done += len(recs)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkOpen measures Configure on a root of 100k records (corpus):
// without a snapshot (read, parse and tokenize every file), and from a
// snapshot (decode it, then stat every file to validate it). One op is
// one open (timed) and close (not timed); cpu-ms is the CPU the open took
// on every core, steadier than wall time on a shared machine.
func BenchmarkOpen(b *testing.B) {
	const n = 100000
	root := corpus(b, n)
	snap := filepath.Join(b.TempDir(), "md.index")
	for _, tt := range []struct{ name, cfg string }{
		{"snapshot=off", fmt.Sprintf(`{"root": %q, "snapshot": false}`, root)},
		{"snapshot=on", fmt.Sprintf(`{"root": %q, "snapshot_path": %q}`, root, snap)},
	} {
		b.Run(fmt.Sprintf("records=%d/%s", n, tt.name), func(b *testing.B) {
			open := func() *Provider {
				p := New()
				p.opts.background = false
				p.logger = slog.New(slog.DiscardHandler)
				if err := p.Configure(ctx, []byte(tt.cfg)); err != nil {
					b.Fatal(err)
				}
				return p
			}
			open().Close() // writes the snapshot when it is on
			var cpu time.Duration
			b.ResetTimer()
			for range b.N {
				c0 := cpuTime()
				p := open()
				cpu += cpuTime() - c0
				b.StopTimer()
				if p.st.fromSnapshot != strings.Contains(tt.name, "=on") {
					b.Fatalf("from snapshot: %v", p.st.fromSnapshot)
				}
				p.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "open-ms")
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms")
			if fi, err := os.Stat(snap); err == nil && strings.Contains(tt.name, "=on") {
				b.ReportMetric(float64(fi.Size())/n, "snapshot-B/record")
			}
		})
	}
}
