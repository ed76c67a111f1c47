package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Path is how a recall reaches the store.
type Path string

const (
	PathHTTP      Path = "http"       // through memhost's HTTP API
	PathPlugin    Path = "plugin"     // the provider plugin over gRPC, no HTTP
	PathInProcess Path = "in-process" // the exact engine in this process
)

// Recaller is one way to run a recall, for the latency runs.
type Recaller func(ctx context.Context, realm, identity, query string, limit int) error

// Corpus is a reproducible synthetic store: records spread over the scopes
// of many identities and the realm, and queries drawn from the same words.
type Corpus struct {
	Records    []Record
	Identities []string
	Queries    []Query
}

// Query is one benchmark query and the identity that asks it.
type Query struct {
	Identity string
	Text     string
}

// NewCorpus generates n records and q queries from seed. Word frequencies
// follow a Zipf law, as natural text does, so posting lists are skewed the
// way real ones are.
func NewCorpus(seed uint64, n, q int) Corpus {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	const vocab = 30000
	zipf := rand.NewZipf(rand.New(rand.NewPCG(seed+1, seed)), 1.1, 2, vocab-1)
	word := func() string { return "w" + strconv.FormatUint(zipf.Uint64(), 36) }
	words := func(lo, hi int) string {
		n := lo + rng.IntN(hi-lo+1)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = word()
		}
		return strings.Join(parts, " ")
	}
	c := Corpus{}
	for i := range 100 {
		c.Identities = append(c.Identities, fmt.Sprintf("u%03d", i))
	}
	kinds := []string{"fact", "preference", "procedure", "gotcha", "reference"}
	for i := range n {
		scope := "realm"
		if rng.IntN(10) < 7 {
			scope = "identity:" + c.Identities[rng.IntN(len(c.Identities))]
		}
		c.Records = append(c.Records, Record{
			Scope: scope, Kind: kinds[i%len(kinds)],
			Title: words(3, 7), Description: words(6, 12), Body: words(25, 70),
		})
	}
	for range q {
		c.Queries = append(c.Queries, Query{Identity: c.Identities[rng.IntN(len(c.Identities))], Text: words(2, 6)})
	}
	return c
}

// Load writes the corpus into realm in batches of batch records and
// answers the write rate in records per second.
func (c Corpus) Load(ctx context.Context, t Target, realm string, batch int, progress func(done, total int)) (float64, error) {
	start := time.Now()
	for i := 0; i < len(c.Records); i += batch {
		part := c.Records[i:min(len(c.Records), i+batch)]
		if _, err := t.Remember(ctx, realm, part); err != nil {
			return 0, fmt.Errorf("load records %d..%d: %w", i, i+len(part), err)
		}
		if progress != nil {
			progress(i+len(part), len(c.Records))
		}
	}
	return float64(len(c.Records)) / time.Since(start).Seconds(), nil
}

// Latency is the distribution of one operation's latency.
type Latency struct {
	Provider string
	Records  int
	Op       string // "recall" or "inject"
	Path     Path
	Clients  int
	P50, P99 time.Duration
	PerSec   float64
	// CPU is the processor time the run took per operation, user and
	// system, of this process (host and clients) and the plugins (0: not
	// measured): the cost per turn, which the machine's other load does
	// not inflate as it does latency.
	CPU time.Duration
	// CPUCoarse marks a CPU figure the run was too short to resolve: the
	// plugins' time is read in clock ticks, and what a tick may hide is
	// over a tenth of the run's total.
	CPUCoarse bool
}

// Measure runs every query through fn with the given number of concurrent
// clients (each takes the next query) and answers the latency spread.
func Measure(ctx context.Context, queries []Query, clients int, fn func(ctx context.Context, i int, q Query) error) (p50, p99 time.Duration, perSec float64, err error) {
	durations := make([]time.Duration, len(queries))
	var next int
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := i >= len(queries) || firstErr != nil
				mu.Unlock()
				if stop {
					return
				}
				t0 := time.Now()
				if err := fn(ctx, i, queries[i]); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				durations[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, 0, 0, firstErr
	}
	elapsed := time.Since(start)
	slices.Sort(durations)
	return percentile(durations, 0.50), percentile(durations, 0.99), float64(len(queries)) / elapsed.Seconds(), nil
}

// Paired is two ways of running the same queries, measured side by side
// on one store: the baseline (A) and the variant (B).
type Paired struct {
	Provider string
	Records  int
	A, B     string // what each side is, as the report names it
	// P50A, P99A, P50B and P99B are each side's latency spread.
	P50A, P99A, P50B, P99B time.Duration
	// Ratio is the median over the queries of B's time ÷ A's time.
	Ratio float64
}

// MeasurePaired runs query i through a and b back to back, one client,
// for i in [0, n), alternating which of the two goes first. Both see the
// same moments of the machine, so load that comes and goes moves them
// alike: their ratio is steadier than that of two runs minutes apart.
func MeasurePaired(ctx context.Context, n int, a, b func(ctx context.Context, i int) error) (p Paired, err error) {
	da, db := make([]time.Duration, n), make([]time.Duration, n)
	ratios := make([]float64, n)
	timed := func(fn func(context.Context, int) error, i int, d []time.Duration) error {
		t0 := time.Now()
		err := fn(ctx, i)
		d[i] = time.Since(t0)
		return err
	}
	for i := range n {
		first, second := a, b
		fd, sd := da, db
		if i%2 == 1 {
			first, second, fd, sd = b, a, db, da
		}
		if err := timed(first, i, fd); err != nil {
			return Paired{}, err
		}
		if err := timed(second, i, sd); err != nil {
			return Paired{}, err
		}
		ratios[i] = float64(db[i]) / float64(max(da[i], 1))
	}
	slices.Sort(ratios)
	if n > 0 {
		p.Ratio = ratios[(n-1)/2]
	}
	slices.Sort(da)
	slices.Sort(db)
	p.P50A, p.P99A = percentile(da, 0.50), percentile(da, 0.99)
	p.P50B, p.P99B = percentile(db, 0.50), percentile(db, 0.99)
	return p, nil
}

// WritePairedTable renders paired measurements as Markdown.
func WritePairedTable(w io.Writer, rows []Paired) {
	fmt.Fprintf(w, "| provider | records | A | B | A p50 | B p50 | B p50 ÷ A p50 | median of B ÷ A per query | A p99 | B p99 |\n|---|---:|---|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %.2f× | %.2f× | %s | %s |\n", r.Provider, r.Records, r.A, r.B,
			ms(r.P50A), ms(r.P50B), float64(r.P50B)/float64(max(r.P50A, 1)), r.Ratio, ms(r.P99A), ms(r.P99B))
	}
}

// percentile answers the nearest-rank p-th percentile of sorted: the
// smallest value at least a share p of the values do not exceed. Over 20
// values p99 is the largest, not the second largest.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// The epsilon keeps a product meant to be whole (0.5 × 20) from
	// rounding up past it.
	rank := int(math.Ceil(p*float64(len(sorted)) - 1e-9))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// WriteLatencyTable renders latency rows as Markdown, with each row's
// throughput per core of the machine (cores; the host, its plugins and
// the bench's clients all share them) and its p50 as a multiple of the
// in-process reference's p50 at the same size when one was measured.
func WriteLatencyTable(w io.Writer, rows []Latency, cores int) {
	ref := map[int]time.Duration{}
	for _, r := range rows {
		if r.Path == PathInProcess && r.Op == "recall" && r.Clients == 1 {
			ref[r.Records] = r.P50
		}
	}
	fmt.Fprintln(w, "| provider | records | op | path | clients | p50 | p99 | ops/s | ops/s per core | CPU per op | p50 ÷ in-process |")
	fmt.Fprintln(w, "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
	coarse := false
	for _, r := range rows {
		ratio := "—"
		if base, ok := ref[r.Records]; ok && base > 0 && r.Path != PathInProcess {
			ratio = fmt.Sprintf("%.1f×", float64(r.P50)/float64(base))
		}
		cpu := "—"
		if r.CPU > 0 {
			cpu = ms(r.CPU)
			if r.CPUCoarse {
				cpu, coarse = "~"+cpu, true
			}
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %d | %s | %s | %.0f | %.0f | %s | %s |\n", r.Provider, r.Records, r.Op, r.Path, r.Clients, ms(r.P50), ms(r.P99), r.PerSec, r.PerSec/float64(max(cores, 1)), cpu, ratio)
	}
	if coarse {
		fmt.Fprintln(w, "\n~ CPU per op of a row too short to resolve it: the plugins' CPU is read from /proc in 10 ms clock ticks, and up to a tick per plugin process is over a tenth of the row's total. Run more --queries for a figure.")
	}
}

// ms renders a duration in milliseconds, the unit of every table.
func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d.Microseconds())/1000) }
