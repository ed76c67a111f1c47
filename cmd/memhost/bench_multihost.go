package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/internal/bench"
	"github.com/memhost/memhost/sdk"
)

// postgresDSNEnv holds the benchmark's PostgreSQL connection string, the
// postgres provider's default variable.
const postgresDSNEnv = "MEMHOST_POSTGRES_DSN"

// benchPostgres is one run's pair of fresh schemas: the provider's and the
// shared session store's. It is nil for other providers.
type benchPostgres struct {
	schema, state string
}

func newBenchPostgres(ctx context.Context, provider string) (*benchPostgres, error) {
	if provider != "postgres" {
		return nil, nil
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	tag := hex.EncodeToString(b[:])
	if os.Getenv(benchHostKeyEnv) == "" {
		// The hosts run in this process: one fresh key serves them all.
		var k [32]byte
		if _, err := rand.Read(k[:]); err != nil {
			return nil, err
		}
		os.Setenv(benchHostKeyEnv, hex.EncodeToString(k[:]))
	}
	return &benchPostgres{schema: "bench_" + tag, state: "bench_state_" + tag}, nil
}

// hcl is the config the hosts of a run add: sessions in PostgreSQL and
// one host key, so any host serves any session.
func (p *benchPostgres) hcl() string {
	return fmt.Sprintf("host_key_env = %q\nsession_store {\n  kind = \"postgres\"\n  dsn_env = %q\n  schema = %q\n}\n", benchHostKeyEnv, postgresDSNEnv, p.state)
}

// benchHostKeyEnv is set by the benchmark itself (a fresh key per process).
const benchHostKeyEnv = "MEMHOST_BENCH_HOST_KEY"

// drop removes the run's schemas, so runs leave the database as found.
func (p *benchPostgres) drop(ctx context.Context) {
	if p == nil {
		return
	}
	// Dropped also when the run was interrupted (ctx cancelled), within
	// a deadline of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, os.Getenv(postgresDSNEnv))
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	for _, s := range []string{p.schema, p.state} {
		_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE")
	}
}

// benchMultiHost measures inject-for-turn throughput through one host and
// through two hosts sharing the postgres provider and session store,
// turns spread round-robin, on the first --sizes corpus.
func benchMultiHost(ctx context.Context, o benchOptions, w, progress io.Writer) error {
	if os.Getenv(postgresDSNEnv) == "" {
		fmt.Fprintf(progress, "bench: %s is unset; skipping --multihost\n", postgresDSNEnv)
		return nil
	}
	pg, err := newBenchPostgres(ctx, "postgres")
	if err != nil {
		return err
	}
	defer pg.drop(ctx)
	corpus := bench.NewCorpus(o.seed, o.sizes[0], o.queries)
	var hosts []*benchHost
	defer func() {
		for _, h := range hosts {
			h.close()
		}
	}()
	for range 2 {
		h, err := startBenchHostOn(ctx, o, "postgres", pg)
		if err != nil {
			return err
		}
		hosts = append(hosts, h)
	}
	if _, err := corpus.Load(ctx, hosts[0], sdk.DefaultRealm, 500, progressLine(progress, fmt.Sprintf("multihost loading %d records", len(corpus.Records)))); err != nil {
		return err
	}
	if err := vacuumAnalyze(ctx); err != nil {
		return err
	}
	clients := 8
	if len(o.clients) > 0 {
		clients = max(o.clients[len(o.clients)-1], 2)
	}
	fmt.Fprintf(w, "\n## Turns through one host and two (postgres provider, shared session store)\n\n%d records, %d turns per row, %d clients, a fresh session per turn.\n\n| hosts | turns/s | p50 | p99 |\n|---:|---:|---:|---:|\n",
		len(corpus.Records), len(corpus.Queries), clients)
	for _, n := range []int{1, 2} {
		fmt.Fprintf(progress, "bench: multihost: inject via %d host(s), %d clients\n", n, clients)
		run := fmt.Sprint(time.Now().UnixNano())
		p50, p99, perSec, err := measureTurns(ctx, hosts[:n], corpus.Queries, clients, func(ctx context.Context, i int, q bench.Query) error {
			_, err := hosts[i%n].Inject(ctx, sdk.DefaultRealm, q.Identity, fmt.Sprintf("mh-%s-%d", run, i), q.Text, time.Time{})
			return err
		})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "| %d | %.0f | %s | %s |\n", n, perSec, p50.Round(10*time.Microsecond), p99.Round(10*time.Microsecond))
	}
	return nil
}

// vacuumAnalyze runs VACUUM ANALYZE on the benchmark database, as an
// operator does after a bulk load (docs/plugins.md, postgres operations).
func vacuumAnalyze(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, os.Getenv(postgresDSNEnv))
	if err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE"); err != nil {
		return fmt.Errorf("vacuum: %w", err)
	}
	return nil
}
