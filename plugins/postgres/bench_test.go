package postgres

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/internal/pgtest"
	"github.com/memhost/memhost/sdk"
)

// Benchmarks run on the sqlite provider's corpus (corpus_test.go) at 10k
// and 100k records, on a cluster of their own with fsync on, so commits
// cost what they cost in production. Each store is built once per process,
// then vacuumed and analysed as autovacuum would leave it:
//
//	go test -run '^$' -bench . -benchtime 2000x ./plugins/postgres/

var benchSizes = []int{10_000, 100_000}

const (
	benchBatch  = 1000
	benchDSNEnv = "MEMHOST_POSTGRES_BENCH_DSN"
	// benchQueries is how many distinct queries recall cycles through.
	benchQueries = 500
)

var benchCorpus = sync.OnceValue(newCorpus)

var benchDBs struct {
	sync.Mutex
	dsn     string
	schemas map[int]string
}

func benchRecords(start, n int) []sdk.Record {
	c := benchCorpus()
	out := make([]sdk.Record, n)
	for i := range out {
		out[i] = c.record(start + i)
	}
	return out
}

// benchConfig configures a store whose recall answers from SQL (the
// replica's own benchmark is BenchmarkReplica).
func benchConfig(schema string) []byte {
	return []byte(fmt.Sprintf(`{"dsn_env": %q, "schema": %q, "pool_size": 8, "replica": {"enabled": false}}`, benchDSNEnv, schema))
}

// openBench configures a store on schema of the benchmark cluster.
func openBench(b *testing.B, schema string) *Store {
	b.Helper()
	s := New()
	if err := s.Configure(context.Background(), benchConfig(schema)); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// builtSchema answers a schema holding n corpus records, one in twenty
// marked used, as the sqlite benchmarks build theirs.
func builtSchema(b *testing.B, n int) string {
	b.Helper()
	benchDBs.Lock()
	defer benchDBs.Unlock()
	if benchDBs.dsn == "" {
		c := pgtest.SharedWith(b, pgtest.Options{Durable: true})
		name, err := c.CreateDatabase(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		benchDBs.dsn = c.DSN(name)
		benchDBs.schemas = map[int]string{}
		os.Setenv(benchDSNEnv, benchDBs.dsn)
	}
	if schema, ok := benchDBs.schemas[n]; ok {
		return schema
	}
	schema := fmt.Sprintf("bench_%d", n)
	s := New()
	ctx := context.Background()
	if err := s.Configure(ctx, benchConfig(schema)); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	used := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i += benchBatch {
		ids, err := s.Remember(ctx, "bench", benchRecords(i, min(benchBatch, n-i)))
		if err != nil {
			b.Fatal(err)
		}
		var mark []string
		for j := 0; j < len(ids); j += 20 {
			mark = append(mark, ids[j])
		}
		used = used.Add(time.Hour)
		if err := s.MarkUsed(ctx, "bench", mark, used); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("built %d records in %v (%.0f records/s, record generation included)", n, time.Since(start).Round(time.Millisecond), float64(n)/time.Since(start).Seconds())
	start = time.Now()
	for _, table := range []string{"records", "terms", "postings", "index_totals"} {
		if _, err := s.pool.Exec(ctx, "VACUUM ANALYZE "+table); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("vacuumed %d records in %v", n, time.Since(start).Round(time.Millisecond))
	benchDBs.schemas[n] = schema
	return schema
}

func sizeName(n int) string { return fmt.Sprintf("records=%dk", n/1000) }

// reportLatency reports the 50th and 99th percentiles of lat.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
}

func benchRecall(b *testing.B, n int, recall func(sdk.RecallQuery) ([]sdk.Hit, error)) {
	c := benchCorpus()
	var lat []time.Duration
	hits, i := 0, 0
	for b.Loop() {
		q := sdk.RecallQuery{Realm: "bench", Query: c.query(i%benchQueries, n), Limit: 10}
		i++
		start := time.Now()
		h, err := recall(q)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		hits += len(h)
	}
	reportLatency(b, lat)
	b.ReportMetric(float64(hits)/float64(b.N), "hits/op")
}

func BenchmarkRecall(b *testing.B) {
	ctx := context.Background()
	for _, n := range benchSizes {
		b.Run(sizeName(n)+"/inprocess", func(b *testing.B) {
			s := openBench(b, builtSchema(b, n))
			benchRecall(b, n, func(q sdk.RecallQuery) ([]sdk.Hit, error) { return s.Recall(ctx, q) })
		})
		b.Run(sizeName(n)+"/plugin", func(b *testing.B) {
			_, p := launchPlugin(b, benchConfig(builtSchema(b, n)))
			benchRecall(b, n, func(q sdk.RecallQuery) ([]sdk.Hit, error) { return p.Recall(ctx, q) })
		})
		b.Run(sizeName(n)+"/plugin-scoped", func(b *testing.B) {
			_, p := launchPlugin(b, benchConfig(builtSchema(b, n)))
			i := 0
			benchRecall(b, n, func(q sdk.RecallQuery) ([]sdk.Hit, error) {
				// A turn's scopes: one identity and the realm.
				q.Scopes = []sdk.Scope{benchScope(1 + i%(benchIdentities-1)), sdk.RealmScope}
				i++
				return p.Recall(ctx, q)
			})
		})
	}
}

// BenchmarkRecallStatistics compares the two statistics modes on one
// schema, query by query in turn, so machine load weighs on both alike:
// "store" (the default) adds each term's frequencies over every realm.
func BenchmarkRecallStatistics(b *testing.B) {
	ctx := context.Background()
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			schema := builtSchema(b, n)
			stores := map[string]*Store{}
			for _, mode := range []string{"store", "realm"} {
				s := New()
				cfg := fmt.Sprintf(`{"dsn_env": %q, "schema": %q, "pool_size": 8, "statistics": %q}`, benchDSNEnv, schema, mode)
				if err := s.Configure(ctx, []byte(cfg)); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				stores[mode] = s
			}
			c := benchCorpus()
			lat := map[string][]time.Duration{}
			i := 0
			for b.Loop() {
				q := sdk.RecallQuery{Realm: "bench", Query: c.query(i%benchQueries, n), Limit: 10}
				i++
				for _, mode := range []string{"store", "realm"} {
					start := time.Now()
					if _, err := stores[mode].Recall(ctx, q); err != nil {
						b.Fatal(err)
					}
					lat[mode] = append(lat[mode], time.Since(start))
				}
			}
			for mode, l := range lat {
				slices.Sort(l)
				b.ReportMetric(float64(l[len(l)/2])/float64(time.Millisecond), mode+"-p50-ms")
			}
		})
	}
}

// BenchmarkWrite measures Remember in batches of benchBatch records into a
// store already holding n; one op is one record.
func BenchmarkWrite(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			s := openBench(b, builtSchema(b, n))
			ctx := context.Background()
			// Distinct from every record already stored (and from earlier
			// runs of this benchmark in the process).
			base := 10*n + int(time.Now().UnixNano()%1_000_000)*1000
			b.ResetTimer()
			for i := 0; i < b.N; i += benchBatch {
				b.StopTimer()
				recs := benchRecords(base+i, min(benchBatch, b.N-i))
				b.StartTimer()
				if _, err := s.Remember(ctx, "bench", recs); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

func BenchmarkManifestWorkingSet(b *testing.B) {
	ctx := context.Background()
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			s := openBench(b, builtSchema(b, n))
			var lat []time.Duration
			i := 0
			for b.Loop() {
				q := sdk.ManifestQuery{Realm: "bench", Tier: sdk.TierWorkingSet, K: 24,
					Scopes: []sdk.Scope{benchScope(1 + i%(benchIdentities-1)), sdk.RealmScope}}
				i++
				start := time.Now()
				rows, err := s.Manifest(ctx, q)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				if len(rows) != 48 {
					b.Fatalf("working set of %d rows, want 48", len(rows))
				}
			}
			reportLatency(b, lat)
		})
	}
}

// BenchmarkDiskSize reports the schema's size on disk per record count.
func BenchmarkDiskSize(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			s := openBench(b, builtSchema(b, n))
			for b.Loop() {
			}
			var total int64
			err := s.pool.QueryRow(context.Background(), `
				SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class AS c JOIN pg_namespace AS ns ON ns.oid = c.relnamespace
				WHERE ns.nspname = $1 AND c.relkind = 'r'`, builtSchema(b, n)).Scan(&total)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(total)/(1<<20), "MiB")
			b.ReportMetric(float64(total)/float64(n), "bytes/record")
		})
	}
}

// BenchmarkReplica measures loading a replica whole from the stored
// records (what a plugin process does at start), and recall through a
// plugin process answering from its replica.
func BenchmarkReplica(b *testing.B) {
	ctx := context.Background()
	for _, n := range benchSizes {
		b.Run(sizeName(n)+"/load", func(b *testing.B) {
			s := openBench(b, builtSchema(b, n))
			r := newReplica(s.pool, s.set, s.log)
			for b.Loop() {
				err := pgx.BeginTxFunc(ctx, s.pool, snapshot, func(tx pgx.Tx) error {
					ix, err := r.load(ctx, tx, "")
					if err == nil && ix.Len() != n {
						err = fmt.Errorf("loaded %d records, want %d", ix.Len(), n)
					}
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(sizeName(n)+"/inprocess", func(b *testing.B) {
			schema := builtSchema(b, n)
			s := New()
			if err := s.Configure(ctx, []byte(fmt.Sprintf(`{"dsn_env": %q, "schema": %q}`, benchDSNEnv, schema))); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { s.Close() })
			waitServing(b, s)
			answered := 0
			s.recall.plan = func(p string) {
				if p == "replica" {
					answered++
				}
			}
			benchRecall(b, n, func(q sdk.RecallQuery) ([]sdk.Hit, error) { return s.Recall(ctx, q) })
			b.ReportMetric(float64(answered)/float64(b.N), "replica-share")
		})
	}
}
