package sqlite

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/sdk"
)

// Benchmarks run on databases of 10k and 100k synthetic records (see
// corpus), or the sizes BENCH_SQLITE_SIZES lists, built once per process
// and copied per benchmark. Latencies are reported as percentiles over b.N
// operations:
//
//	go test -run '^$' -bench . -benchtime 2000x ./plugins/sqlite/
//	BENCH_SQLITE_SIZES=1000000 go test -run '^$' -bench 'Open/records=1000k/snapshot' -benchtime 3x ./plugins/sqlite/

var benchSizes = sizesFromEnv("BENCH_SQLITE_SIZES", []int{10_000, 100_000})

// sizesFromEnv answers the comma-separated record counts in the variable
// name, or def when it is unset.
func sizesFromEnv(name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var sizes []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			panic(fmt.Sprintf("%s: %q is not a record count", name, f))
		}
		sizes = append(sizes, n)
	}
	return sizes
}

const benchBatch = 1000

var benchCorpus = sync.OnceValue(newCorpus)

// benchDBs caches the built databases: fresh (as written, never merged)
// and optimized (its index merged to one segment), by record count.
var benchDBs struct {
	sync.Mutex
	fresh, optimized map[int]string
}

func benchRecords(start, n int) []sdk.Record {
	c := benchCorpus()
	out := make([]sdk.Record, n)
	for i := range out {
		out[i] = c.record(start + i)
	}
	return out
}

// builtDB answers a database of n corpus records. One record in twenty is
// marked used, at spread-out times, so working sets have ranked rows.
func builtDB(b *testing.B, n int, optimized bool) string {
	b.Helper()
	benchDBs.Lock()
	defer benchDBs.Unlock()
	if benchDBs.fresh == nil {
		benchDBs.fresh, benchDBs.optimized = map[int]string{}, map[int]string{}
	}
	if !optimized {
		if path, ok := benchDBs.fresh[n]; ok {
			return path
		}
	} else if path, ok := benchDBs.optimized[n]; ok {
		return path
	}
	fresh, ok := benchDBs.fresh[n]
	if !ok {
		fresh = filepath.Join(sharedTempDir(b, "memhost-sqlite-bench-"), "memory.db")
		s := newStore()
		ctx := context.Background()
		if err := s.Configure(ctx, configJSON(fresh)); err != nil {
			b.Fatal(err)
		}
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
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
		benchDBs.fresh[n] = fresh
	}
	if !optimized {
		return fresh
	}
	// "Optimized" is now a store reopened once: its index snapshot is
	// written and read back.
	opt := filepath.Join(sharedTempDir(b, "memhost-sqlite-bench-"), "memory.db")
	copyFile(b, fresh, opt)
	if _, err := os.Stat(fresh + ".index"); err == nil {
		copyFile(b, fresh+".index", opt+".index")
	}
	start := time.Now()
	s := openAt(b, opt)
	b.Logf("opened %d records in %v", n, time.Since(start).Round(time.Millisecond))
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	benchDBs.optimized[n] = opt
	return opt
}

func copyFile(b *testing.B, src, dst string) {
	b.Helper()
	in, err := os.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

// copyDB copies a built database into a fresh directory, for benchmarks
// that write.
func copyDB(b *testing.B, src string) string {
	dst := filepath.Join(b.TempDir(), "memory.db")
	copyFile(b, src, dst)
	for _, suffix := range []string{"-wal", ".index", ".index.log"} {
		if _, err := os.Stat(src + suffix); err == nil {
			copyFile(b, src+suffix, dst+suffix)
		}
	}
	return dst
}

func sizeName(n int) string { return fmt.Sprintf("records=%dk", n/1000) }

// reportLatency reports the 50th and 99th percentiles of lat.
func reportLatency(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
	b.ReportMetric(ms(lat[len(lat)*99/100]), "p99-ms")
}

// BenchmarkWrite measures Remember in batches of benchBatch records into a
// store already holding n; one op is one record.
func BenchmarkWrite(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			s := openAt(b, copyDB(b, builtDB(b, n, true)))
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i += benchBatch {
				b.StopTimer()
				recs := benchRecords(n+i, min(benchBatch, b.N-i))
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

// benchQueries is how many distinct queries the recall benchmarks cycle
// through.
const benchQueries = 500

// exactAnswers caches the exact top-10 ids of each benchmark query, per
// record count, to measure how far a posting budget strays from them.
var exactAnswers struct {
	sync.Mutex
	ids map[int][][]string
}

func exactTop10(b *testing.B, n int) [][]string {
	exactAnswers.Lock()
	defer exactAnswers.Unlock()
	if ids, ok := exactAnswers.ids[n]; ok {
		return ids
	}
	s := openAt(b, builtDB(b, n, true))
	c := benchCorpus()
	ids := make([][]string, benchQueries)
	for i := range ids {
		hits, err := s.Recall(context.Background(), sdk.RecallQuery{Realm: "bench", Query: c.query(i, n), Limit: 10})
		if err != nil {
			b.Fatal(err)
		}
		for _, h := range hits {
			ids[i] = append(ids[i], h.Record.ID)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	if exactAnswers.ids == nil {
		exactAnswers.ids = map[int][][]string{}
	}
	exactAnswers.ids[n] = ids
	return ids
}

// benchRecall runs queries through recall and reports their latency and,
// given the exact answers, the share of them found.
func benchRecall(b *testing.B, n int, exact [][]string, recall func(sdk.RecallQuery) ([]sdk.Hit, error)) {
	c := benchCorpus()
	var lat []time.Duration
	hits, found, want := 0, 0, 0
	i := 0
	for b.Loop() {
		k := i % benchQueries
		q := sdk.RecallQuery{Realm: "bench", Query: c.query(k, n), Limit: 10}
		i++
		start := time.Now()
		h, err := recall(q)
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		hits += len(h)
		if exact != nil {
			want += len(exact[k])
			for _, hit := range h {
				if slices.Contains(exact[k], hit.Record.ID) {
					found++
				}
			}
		}
	}
	reportLatency(b, lat)
	b.ReportMetric(float64(hits)/float64(b.N), "hits/op")
	if want > 0 {
		b.ReportMetric(float64(found)/float64(want), "exact-top10-share")
	}
}

func BenchmarkRecall(b *testing.B) {
	ctx := context.Background()
	for _, n := range benchSizes {
		for _, v := range []struct {
			name      string
			optimized bool
			budget    int
		}{
			{"exact-fresh", false, 0},
			{"exact", true, 0},
		} {
			b.Run(sizeName(n)+"/inprocess-"+v.name, func(b *testing.B) {
				var exact [][]string
				if v.budget > 0 {
					exact = exactTop10(b, n)
				}
				s := openAt(b, builtDB(b, n, v.optimized))
				benchRecall(b, n, exact, func(q sdk.RecallQuery) ([]sdk.Hit, error) { return s.Recall(ctx, q) })
			})
		}
		for _, budget := range []int{0} {
			name := "exact"
			if budget > 0 {
				name = fmt.Sprintf("budget%d", budget)
			}
			b.Run(sizeName(n)+"/plugin-"+name, func(b *testing.B) {
				path := builtDB(b, n, true)
				cfg, _ := json.Marshal(Config{Path: path, PostingBudget: budget})
				conn, p, err := launchPlugin(b, filepath.Dir(path), cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer conn.Close() // before the next benchmark opens the database
				benchRecall(b, n, nil, func(q sdk.RecallQuery) ([]sdk.Hit, error) { return p.Recall(ctx, q) })
			})
		}
	}
}

// BenchmarkHitRead is the second half of a recall alone: reading ten hits'
// records by row key, as recall does after the index answered. The rows
// step through the table by a stride prime to its size, so no row is read
// twice before all have been (every 10,000 ops at 100k records).
//
//	go test -run '^$' -bench HitRead -benchtime 20000x ./plugins/sqlite/
func BenchmarkHitRead(b *testing.B) {
	ctx := context.Background()
	s := openAt(b, builtDB(b, 100_000, true))
	var rows int64
	if err := s.db.r.QueryRowContext(ctx, "SELECT max(seq) FROM records").Scan(&rows); err != nil {
		b.Fatal(err)
	}
	seq := int64(1)
	for b.Loop() {
		seqs := make([]int64, 10)
		for i := range seqs {
			seq = (seq + 7919) % rows
			seqs[i] = seq + 1
		}
		list, _ := json.Marshal(seqs)
		n := 0
		err := s.db.readRecords(ctx, "bench", `r.seq IN (SELECT value FROM json_each(?))`, []any{string(list)},
			func(*sdk.Record, int64) { n++ })
		if err != nil || n == 0 {
			b.Fatalf("read %d hits: %v", n, err)
		}
	}
}

func BenchmarkManifestWorkingSet(b *testing.B) {
	ctx := context.Background()
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			s := openAt(b, builtDB(b, n, true))
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

// BenchmarkDiskSize reports the size of the database files (after the
// close checkpoint folded the WAL in) per record count.
func BenchmarkDiskSize(b *testing.B) {
	for _, n := range benchSizes {
		for _, optimized := range []bool{false, true} {
			name := sizeName(n) + "/fresh"
			if optimized {
				name = sizeName(n) + "/optimized"
			}
			b.Run(name, func(b *testing.B) {
				path := builtDB(b, n, optimized)
				for b.Loop() {
				}
				var total int64
				for _, suffix := range []string{"", "-wal", "-shm"} {
					if fi, err := os.Stat(path + suffix); err == nil {
						total += fi.Size()
					}
				}
				b.ReportMetric(float64(total)/(1<<20), "MiB")
				b.ReportMetric(float64(total)/float64(n), "bytes/record")
			})
		}
	}
}

// BenchmarkOpen measures Configure on a store of n records: from the index
// snapshot a clean close leaves; after a crash (kill -9) that left the
// snapshot of n records behind while 10k more were written, replayed from
// the index log; and rebuilt from the records (no snapshot and no log).
func BenchmarkOpen(b *testing.B) {
	for _, n := range benchSizes {
		for _, mode := range []string{"snapshot", "crash", "rebuild"} {
			b.Run(sizeName(n)+"/"+mode, func(b *testing.B) {
				src := builtDB(b, n, false)
				if mode == "crash" {
					src = crashedDB(b, src, n)
				}
				for range b.N {
					b.StopTimer()
					path := copyDB(b, src)
					if mode == "rebuild" {
						os.Remove(path + ".index")
						os.Remove(path + ".index.log")
					}
					b.StartTimer()
					s := newStore(func(o *options) { o.maintainIdle = time.Hour })
					if err := s.Configure(context.Background(), configJSON(path)); err != nil {
						b.Fatal(err)
					}
					b.StopTimer()
					if got := s.db.fromSnapshot; got != (mode == "snapshot") {
						b.Fatalf("opened from a snapshot: %v, want %v", got, mode == "snapshot")
					}
					if got := s.db.replayed > 0; got != (mode == "crash") {
						b.Fatalf("replayed %d log frames", s.db.replayed)
					}
					if err := s.Close(); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			})
		}
	}
}

// BenchmarkReindex rebuilds the whole index of an open store, snapshot
// write included, and reports records per second:
//
//	go test -run '^$' -bench Reindex -benchtime 3x ./plugins/sqlite/
func BenchmarkReindex(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			s := newStore()
			if err := s.Configure(context.Background(), configJSON(copyDB(b, builtDB(b, n, false)))); err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			indexed := 0
			b.ResetTimer()
			for range b.N {
				got, err := s.Reindex(context.Background(), "", nil)
				if err != nil {
					b.Fatal(err)
				}
				indexed += got
			}
			b.ReportMetric(float64(indexed)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// crashedDB answers a copy of the n-record database src after 10k more
// records were written and the process died: the files as they stood
// before its close, with the snapshot of n records and the log after it.
func crashedDB(b *testing.B, src string, n int) string {
	b.Helper()
	path := copyDB(b, src)
	s := newStore(func(o *options) { o.maintainIdle = time.Hour })
	if err := s.Configure(context.Background(), configJSON(path)); err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 10_000; i += benchBatch {
		if _, err := s.Remember(context.Background(), "bench", benchRecords(n+i, benchBatch)); err != nil {
			b.Fatal(err)
		}
	}
	dst := filepath.Join(b.TempDir(), "memory.db")
	for _, suffix := range []string{"", "-wal", ".index", ".index.log"} {
		if _, err := os.Stat(path + suffix); err == nil {
			copyFile(b, path+suffix, dst+suffix)
		}
	}
	return dst
}

// BenchmarkUsageBatch writes one telemetry batch's usage: 256 turns, each
// injecting one record every turn injects and 7 others at random. "marks"
// sends it as the host does to a provider without usage_counts (one
// MarkUsed round per repeat: 256 calls, each a commit); "counts" as one
// CountUses of each record with its count.
func BenchmarkUsageBatch(b *testing.B) {
	ctx := context.Background()
	const turns, perTurn = 256, 8
	for _, n := range benchSizes {
		for _, mode := range []string{"marks", "counts"} {
			b.Run(sizeName(n)+"/"+mode, func(b *testing.B) {
				s := openAt(b, copyDB(b, builtDB(b, n, true)))
				rows, err := s.db.r.QueryContext(ctx, "SELECT id FROM records")
				if err != nil {
					b.Fatal(err)
				}
				var ids []string
				for rows.Next() {
					var id string
					if err := rows.Scan(&id); err != nil {
						b.Fatal(err)
					}
					ids = append(ids, id)
				}
				rows.Close()
				rng := rand.New(rand.NewPCG(1, 2))
				at := time.Now()
				calls := 0
				for b.Loop() {
					count := map[string]int64{}
					var order []string
					for range turns {
						for k := range perTurn {
							id := ids[0]
							if k > 0 {
								id = ids[rng.IntN(len(ids))]
							}
							if count[id] == 0 {
								order = append(order, id)
							}
							count[id]++
						}
					}
					at = at.Add(time.Second)
					if mode == "counts" {
						uses := make([]sdk.Use, len(order))
						for i, id := range order {
							uses[i] = sdk.Use{ID: id, Count: count[id]}
						}
						for part := range slices.Chunk(uses, sdk.MaxBatch) {
							if err := s.CountUses(ctx, "bench", part, at); err != nil {
								b.Fatal(err)
							}
							calls++
						}
						continue
					}
					for round := int64(1); len(order) > 0; round++ {
						for part := range slices.Chunk(order, sdk.MaxBatch) {
							if err := s.MarkUsed(ctx, "bench", part, at); err != nil {
								b.Fatal(err)
							}
							calls++
						}
						order = slices.DeleteFunc(order, func(id string) bool { return count[id] <= round })
					}
				}
				b.ReportMetric(float64(calls)/float64(b.N), "calls/batch")
			})
		}
	}
}

// BenchmarkLedgerBatch writes one telemetry batch's ledger rows: 256
// turns of 8 records each, in calls of sdk.MaxBatch, into a ledger that
// grows by the batch each iteration, as a running host's does.
func BenchmarkLedgerBatch(b *testing.B) {
	ctx := context.Background()
	const turns, perTurn = 256, 8
	for _, n := range benchSizes {
		b.Run(sizeName(n), func(b *testing.B) {
			s := openAt(b, copyDB(b, builtDB(b, n, true)))
			at, next := time.Now(), 0
			for b.Loop() {
				entries := make([]sdk.LedgerEntry, 0, turns*perTurn)
				for turn := range turns {
					for k := range perTurn {
						entries = append(entries, sdk.LedgerEntry{
							Realm: "bench", Identity: fmt.Sprintf("user-%d", turn%50), Session: fmt.Sprintf("s-%d", next/perTurn),
							RecordID: fmt.Sprintf("r%07d", (next*7919+k)%n), Surface: "turn", Bytes: 300, At: at,
						})
						next++
					}
				}
				for part := range slices.Chunk(entries, sdk.MaxBatch) {
					if err := s.WriteLedger(ctx, part); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
