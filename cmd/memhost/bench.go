package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/bench"
	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/internal/procstat"
	"github.com/memhost/memhost/sdk"
	memindex "github.com/memhost/memhost/sdk/index"
	"github.com/spf13/cobra"
)

// benchProviders are the first-party providers and the config each runs
// with in the benchmark (paths under a fresh data directory).
var benchProviders = map[string]string{
	"sqlite":   `{ path = "memory.db" }`,
	"bleve":    `{ dir = "bleve" }`,
	"markdown": `{ root = "md" }`,
	// postgres's schema and session store are per run (benchPostgres).
	"postgres": `{ schema = %q, pool_size = 16 }`,
}

type benchOptions struct {
	providers []string
	sizes     []int
	queries   int
	clients   []int
	seed      uint64
	locomo    string
	samples   []int
	// longMemEval is the LongMemEval file; lmeQuestions the first n
	// questions to run (0: all).
	longMemEval  string
	lmeQuestions int
	pluginDir    string
	out          string
	svg          string
	categories   bool
	multiHost    bool
	// compactor, when set, is the HCL body of the bench host's compactor.
	compactor string
	retention retentionOptions
	// embedder, when set, is an embedder plugin: every provider is also
	// measured with it (label "provider+embedder"), configured with
	// embedderConfig (an HCL object) and semanticWeight (< 0: the
	// provider's default).
	embedder       string
	embedderConfig string
	semanticWeight float64
}

// benchVariant is one configuration a provider is measured in.
type benchVariant struct {
	label string
	o     benchOptions
}

// variants answers provider p lexical, then with the embedder when one
// is given.
func (o benchOptions) variants(p string) []benchVariant {
	lexical := o
	lexical.embedder = ""
	out := []benchVariant{{label: p, o: lexical}}
	if o.embedder != "" {
		out = append(out, benchVariant{label: p + "+" + o.embedder, o: o})
	}
	return out
}

// embedderHCL answers the embedder block and the realm's extra lines.
func (o benchOptions) embedderHCL() (block, realm string) {
	if o.embedder == "" {
		return "", ""
	}
	cfg := o.embedderConfig
	if cfg == "" {
		cfg = "{}"
	}
	// The query's embedding gets half the bench's recall deadline, not
	// the 250 ms production default: a hybrid row must time hybrid
	// recalls, not fall back to lexical ones whenever a loaded machine
	// (or a remote endpoint) takes longer, and the plugin path's
	// preparation fails on a fallback.
	realm = "\n  embedder = \"bench\"\n  query_embed_timeout_ms = 15000"
	if o.semanticWeight >= 0 {
		realm += fmt.Sprintf("\n  semantic_weight = %g", o.semanticWeight)
	}
	return fmt.Sprintf("embedder \"bench\" {\n  plugin = %q\n  config = %s\n}\n", o.embedder, cfg), realm
}

func benchCommand() *cobra.Command { return benchCommandRunning(runBench) }

// benchCommandRunning is the bench command running run with the options
// its flags give.
func benchCommandRunning(run func(ctx context.Context, o benchOptions, w, progress io.Writer) error) *cobra.Command {
	var o benchOptions
	var quick bool
	var sizes, clients, samples string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure latency, throughput and LoCoMo retrieval per provider through a real memhost",
		Long: `Start memhost (in this process, real plugin processes, a fresh data
directory per provider) and measure, per provider:

  - writes per second through POST /v1/records (batches of 500);
  - recall and inject-for-turn p50/p99 through HTTP and recall through the
    plugin alone, with 1 and 8 concurrent clients, on synthetic records
    spread over 100 identities' scopes and the realm; each size's first
    row is the exact in-process engine (sdk/index) over the same records,
    and every row's p50 is shown as a multiple of it; each row's CPU per
    operation (this process, host and clients, and the plugins) too;
  - host start time and each plugin process's resident memory;
  - LoCoMo retrieval: every turn remembered as one record (each sample an
    identity of one realm), each question of categories 1-4 recalled (turn
    and session recall at k = 5, 10, 20) and injected into a fresh session
    (the share of evidence delivered whole under the default budget; the
    share delivered only cut, as an excerpt or a body over 2 KiB, which
    may stop before the answer, apart and not counted), dev (samples 0-4)
    and held-out (5-9) apart, both ranked by the statistics of the one
    realm every sample run is loaded into (see --locomo-samples);
  - retention through compaction (sqlite, template compactor): LoCoMo and
    LongMemEval conversations replayed through compaction with a fixed
    window, then each question's evidence turns counted as they reach the
    model through the window, the summary and the archive (via injection),
    against a baseline that stores every turn.
  - LongMemEval-S retrieval: each question's haystack remembered as its own
    identity of one realm, one record per turn, user and assistant turns
    alike, then recalled (sessions ranked by their best turn: any@5,
    all@5, all@10, NDCG@10; turn recall@10) and injected into a fresh
    session, per question type. Not the paper's retrieval figures: its
    run_retrieval.py indexes the user turns only, and its NDCG discounts
    rank i by log2(i) from rank 2 (ranks 1 and 2 weigh alike) where this
    one uses the standard log2(i+1); the report gives NDCG@10 both ways.

Results are printed as Markdown. Runs are reproducible with --seed. A
write or a retrieval question's recall answered 503 or 504 (a loaded
machine), or an injection answered empty because the host's recall failed
(skip_reason recall_failed), is tried again, up to three times, as any
client may; a provider's run that still fails is reported
at the end, after what the other runs measured, and the command exits
non-zero.`,
		Example: `  memhost bench --quick
  memhost bench --providers sqlite --sizes 100000 --out docs/bench-run.md`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if quick {
				// Flags given explicitly win over --quick's.
				quickSet := func(flag string, apply func()) {
					if !cmd.Flags().Changed(flag) {
						apply()
					}
				}
				quickSet("queries", func() { o.queries = 60 })
				quickSet("sizes", func() { sizes = "1000" })
				quickSet("clients", func() { clients = "1,8" })
				quickSet("locomo-samples", func() { samples = "0,5" })
				quickSet("longmemeval-questions", func() { o.lmeQuestions = quickLongMemEval })
			}
			// A data set named explicitly must be there, and so must the
			// default one a subset is asked of; otherwise the default paths
			// may be missing (the report then says so).
			for _, d := range []struct{ flag, subset, path, source string }{{"locomo", "locomo-samples", o.locomo, locomoSource}, {"longmemeval", "longmemeval-questions", o.longMemEval, longMemEvalSource}} {
				if d.path == "" || !cmd.Flags().Changed(d.flag) && !cmd.Flags().Changed(d.subset) {
					continue
				}
				if info, err := os.Stat(d.path); err != nil {
					return fmt.Errorf("%w (%s)", unreadable("--"+d.flag+" "+d.path, err), d.source)
				} else if info.IsDir() {
					return fmt.Errorf("--%s %s is a directory: name the data set's file (%s)", d.flag, d.path, d.source)
				}
			}
			if o.sizes, err = intList(sizes, 1); err != nil {
				return fmt.Errorf("--sizes: %w", err)
			}
			if o.clients, err = intList(clients, 1); err != nil {
				return fmt.Errorf("--clients: %w", err)
			}
			if samples != "" {
				if o.samples, err = intList(samples, 0); err != nil {
					return fmt.Errorf("--locomo-samples: %w", err)
				}
			}
			if err := checkBenchOptions(cmd, o); err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			interrupted := false
			if o.out != "" {
				// The report replaces the file whole once written: an
				// interrupted or failed run leaves the last report as it was.
				f, err := createBenchOutput(o.out, cmd.ErrOrStderr())
				if err != nil {
					return fmt.Errorf("--out: %w", err)
				}
				defer f.discard()
				w = f
				defer func() {
					if interrupted {
						return // its report may stop anywhere
					}
					if e := f.commit(); err == nil && e != nil {
						err = fmt.Errorf("--out: %w", e)
					}
				}()
			}
			if o.svg != "" {
				// Checked now, not after an hour of measuring.
				f, err := createBenchOutput(o.svg, cmd.ErrOrStderr())
				if err != nil {
					return fmt.Errorf("--svg: %w", err)
				}
				f.discard()
			}
			// An interrupted run still closes its hosts, which removes their
			// data and drops their PostgreSQL schemas. A second interrupt
			// during that cleanup ends the process at once.
			ctx, stop := signal.NotifyContext(cmd.Context(), stopSignals...)
			defer stop()
			context.AfterFunc(ctx, stop)
			err = run(ctx, o, w, cmd.ErrOrStderr())
			// Read before the deferred stop cancels ctx.
			interrupted = ctx.Err() != nil
			return err
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.providers, "providers", []string{"sqlite", "bleve", "markdown"}, "providers to measure (postgres: a database from $"+postgresDSNEnv+", skipped when unset)")
	f.StringVar(&sizes, "sizes", "10000,100000", "synthetic store sizes (records)")
	f.IntVar(&o.queries, "queries", 500, "queries per measurement")
	f.StringVar(&clients, "clients", "1,8", "concurrent client counts")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the synthetic corpus")
	f.StringVar(&o.locomo, "locomo", defaultLoCoMo, `LoCoMo file ("" to skip); `+locomoSource)
	f.StringVar(&o.longMemEval, "longmemeval", defaultLongMemEval, `LongMemEval file ("" to skip); `+longMemEvalSource)
	f.IntVar(&o.lmeQuestions, "longmemeval-questions", 0, "LongMemEval questions to run, the first n (default all)")
	f.StringVar(&samples, "locomo-samples", "", "LoCoMo sample indexes to run (default all). Every sample is an identity of one realm, ranked by statistics over all the samples loaded, so a subset's figures differ from the same samples' in a run of all ten; the dev and held-out figures docs/benchmarks.md publishes are those of a run of all")
	f.StringVar(&o.pluginDir, "plugin-dir", "", "plugin directory (default: ./plugins beside the binary)")
	f.StringVar(&o.out, "out", "", "write the Markdown report to this file instead of standard output")
	f.StringVar(&o.svg, "svg", "", "also write the latency chart as SVG to this file")
	f.BoolVar(&o.categories, "categories", true, "LoCoMo rows per question category too")
	f.BoolVar(&o.multiHost, "multihost", false, "also measure turns/s through two hosts sharing PostgreSQL against one (needs $"+postgresDSNEnv+")")
	f.StringVar(&o.embedder, "embedder", "", "also measure every provider with this embedder plugin (wordvec, openai): hybrid recall, its latency (and against lexical recall on the same index, paired) and the backlog's drain rate")
	f.StringVar(&o.embedderConfig, "embedder-config", "", "the embedder's config, an HCL object (default {})")
	f.Float64Var(&o.semanticWeight, "semantic-weight", -1, "the realms' semantic_weight with --embedder (default: the provider's)")
	f.BoolVar(&quick, "quick", false, "a run under two minutes: 1,000 records, 60 queries, LoCoMo samples 0 and 5, the first LongMemEval questions (retrieval and retention); flags given explicitly keep their values")
	retentionFlags(f, &o.retention)
	return cmd
}

// checkBenchOptions refuses, before anything is measured, flags a run
// would otherwise take in silence and report nonsense for.
func checkBenchOptions(cmd *cobra.Command, o benchOptions) error {
	if o.queries < 1 {
		return fmt.Errorf("--queries: %d is not an integer of at least 1", o.queries)
	}
	if o.lmeQuestions < 0 {
		return fmt.Errorf("--longmemeval-questions: %d is not an integer of at least 0 (0 runs every question)", o.lmeQuestions)
	}
	choices := strings.Join(slices.Sorted(maps.Keys(benchProviders)), ", ")
	if len(o.providers) == 0 {
		return fmt.Errorf("--providers: name at least one; choose among %s", choices)
	}
	for i, p := range o.providers {
		if _, ok := benchProviders[p]; !ok {
			return fmt.Errorf("--providers: %q is not a first-party provider; choose among %s", p, choices)
		}
		if slices.Contains(o.providers[:i], p) {
			return fmt.Errorf("--providers: %q is named twice", p)
		}
	}
	for _, flag := range []string{"semantic-weight", "embedder-config"} {
		if cmd.Flags().Changed(flag) && o.embedder == "" {
			return fmt.Errorf("--%s needs --embedder", flag)
		}
	}
	// A subset of a data set not run is a mistake to say, not to drop.
	for _, d := range []struct{ flag, data, path string }{{"locomo-samples", "locomo", o.locomo}, {"longmemeval-questions", "longmemeval", o.longMemEval}} {
		if cmd.Flags().Changed(d.flag) && d.path == "" {
			return fmt.Errorf("--%s needs --%s, which is empty", d.flag, d.data)
		}
	}
	if cmd.Flags().Changed("semantic-weight") && !(o.semanticWeight >= 0 && o.semanticWeight <= 1) {
		return fmt.Errorf("--semantic-weight: %g is not between 0 and 1", o.semanticWeight)
	}
	return nil
}

// intList parses a comma-separated list of integers of at least least.
func intList(s string, least int) ([]int, error) {
	var out []int
	for _, part := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n < least {
			return nil, fmt.Errorf("%q is not an integer of at least %d", part, least)
		}
		out = append(out, n)
	}
	return out, nil
}

// benchHost is one memhost under measurement: the host in this process and
// its API on a loopback port.
type benchHost struct {
	h       *host
	dir     string // the run's own config and data, removed by close
	base    string
	client  *http.Client
	srv     *http.Server
	started time.Duration
}

// startBenchHostOn starts a bench host; pg, for the postgres provider, names
// the run's schemas (hosts given one pg share the store and the sessions).
func startBenchHostOn(ctx context.Context, o benchOptions, provider string, pg *benchPostgres) (*benchHost, error) {
	dir, err := os.MkdirTemp("", "memhost-bench-")
	if err != nil {
		return nil, err
	}
	b, err := startBenchHostIn(ctx, dir, o, provider, pg)
	if err != nil {
		// A run at 100k records leaves hundreds of MB here: nothing is kept
		// of a host that did not start.
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if b.h.semantic != nil {
		// The backlog's drain waits for the embedder without end, as a
		// serving host must; a run whose embedder cannot start stops here.
		ready, cancel := context.WithTimeout(ctx, benchEmbedderStart)
		err := b.h.semantic.Ready(ready, sdk.DefaultRealm)
		cancel()
		if err != nil {
			b.close()
			return nil, fmt.Errorf("embedder %s did not start: %w", o.embedder, err)
		}
	}
	return b, nil
}

// benchEmbedderStart is how long a bench host's embedder is given to
// answer before the run stops.
const benchEmbedderStart = 20 * time.Second

// startBenchHostIn starts a bench host whose config and data live in dir.
func startBenchHostIn(ctx context.Context, dir string, o benchOptions, provider string, pg *benchPostgres) (*benchHost, error) {
	providerConfig, extra := benchProviders[provider], ""
	if provider == "postgres" {
		providerConfig, extra = fmt.Sprintf(providerConfig, pg.schema), pg.hcl()
	}
	// The recall deadline is raised far above any latency measured: the
	// benchmark reports slow recalls in its percentiles rather than dying
	// on the first one past the 500 ms production default.
	coordinator := "coordinator { recall_timeout_ms = 25000 }"
	if o.compactor != "" {
		coordinator = "compactor \"bench\" " + o.compactor + "\ncoordinator {\n  recall_timeout_ms = 25000\n  compactor = \"bench\"\n}"
	}
	embedder, realm := o.embedderHCL()
	hcl := fmt.Sprintf("data_dir = %q\nlog_level = \"error\"\n%s\nprovider \"main\" {\n  plugin = %q\n  config = %s\n}\n%srealm \"default\" {\n  provider = \"main\"%s\n}\n%s\n%s",
		filepath.Join(dir, "data"), pluginDirLine(o.pluginDir), provider, providerConfig, embedder, realm, coordinator, extra)
	path := filepath.Join(dir, "memhost.hcl")
	if err := os.WriteFile(path, []byte(hcl), 0o600); err != nil {
		return nil, err
	}
	cfg, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	// A plugin that cannot start (a refused config, say) ends the run with
	// its reason at once; a serving host would back off and retry it.
	cfg.Supervisor.RequireAll = true
	t0 := time.Now()
	h, err := startHost(ctx, cfg, newLogger(cfg))
	if err != nil {
		return nil, err
	}
	started := time.Since(t0)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.close()
		return nil, err
	}
	srv := &http.Server{Handler: h.server.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return &benchHost{
		h: h, dir: dir, base: "http://" + ln.Addr().String(), srv: srv, started: started,
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}, nil
}

func pluginDirLine(dir string) string {
	if dir == "" {
		return ""
	}
	abs, _ := filepath.Abs(dir)
	return fmt.Sprintf("plugin_dir = %q", abs)
}

func (b *benchHost) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.srv.Shutdown(ctx)
	b.h.close()
	// After the plugins have exited, so none still writes into it.
	_ = os.RemoveAll(b.dir)
}

func (b *benchHost) post(ctx context.Context, path string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", b.base+path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		answer, _ := io.ReadAll(resp.Body)
		return &benchHTTPError{path: path, status: resp.StatusCode, body: answer}
	}
	if out == nil {
		// The latency rows' client reads the answer whole but does not
		// decode it: it runs in the host's process, on the same two
		// cores, and decoding ten records' JSON cost it a tenth of the
		// CPU a recall took, time the host's throughput was charged.
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	// Decoded as it is read, in one pass (Unmarshal of a read-all copy
	// scans the answer twice): this client's time counts in the HTTP rows.
	// The rest (the final line feed) is drained so the connection is kept.
	err = json.NewDecoder(resp.Body).Decode(out)
	_, _ = io.Copy(io.Discard, resp.Body)
	return err
}

// benchIdentity is a request's identity.
type benchIdentity struct {
	Realm string `json:"realm"`
	ID    string `json:"id"`
}

// recallBody is the body of POST /v1/recall.
type recallBody struct {
	Identity benchIdentity `json:"identity"`
	Query    string        `json:"query"`
	Limit    int           `json:"limit"`
	Now      string        `json:"now,omitempty"`
}

// injectBody is the body of POST /v1/turns/inject.
type injectBody struct {
	Identity benchIdentity `json:"identity"`
	Session  string        `json:"session"`
	Content  string        `json:"content"`
	Now      string        `json:"now,omitempty"`
}

// nowField is a request's reference time when the benchmark gives one.
func nowField(now time.Time) string {
	if now.IsZero() {
		return ""
	}
	return now.Format(time.RFC3339)
}

// Remember implements bench.Target.
func (b *benchHost) Remember(ctx context.Context, realm string, recs []bench.Record) ([]string, error) {
	var out struct {
		IDs []string `json:"ids"`
	}
	err := retried(ctx, func() error {
		return b.post(ctx, "/v1/records", map[string]any{"realm": realm, "records": recs}, &out)
	})
	return out.IDs, err
}

// Recall implements bench.Target.
func (b *benchHost) Recall(ctx context.Context, realm, identity, query string, limit int, now time.Time) ([]string, error) {
	var out struct {
		Hits []struct {
			Record struct {
				ID string `json:"id"`
			} `json:"record"`
		} `json:"hits"`
	}
	body := recallBody{Identity: benchIdentity{realm, identity}, Query: query, Limit: limit, Now: nowField(now)}
	// A recall changes nothing its answer depends on, so it is tried again
	// as a write is: one 504 on a loaded machine failed a whole run.
	err := retried(ctx, func() error { return b.post(ctx, "/v1/recall", body, &out) })
	ids := make([]string, len(out.Hits))
	for i, h := range out.Hits {
		ids[i] = h.Record.ID
	}
	return ids, err
}

// Inject implements bench.Target.
func (b *benchHost) Inject(ctx context.Context, realm, identity, session, content string, now time.Time) (bench.Injection, error) {
	var out struct {
		Context    []string `json:"injected_context"`
		RecordIDs  []string `json:"record_ids"`
		Bytes      int      `json:"bytes"`
		SkipReason *string  `json:"skip_reason"`
	}
	body := injectBody{Identity: benchIdentity{realm, identity}, Session: session, Content: content, Now: nowField(now)}
	err := retried(ctx, func() error {
		out.SkipReason = nil
		err := b.post(ctx, "/v1/turns/inject", body, &out)
		if err == nil && out.SkipReason != nil && *out.SkipReason == string(coordinator.SkipRecallFailed) {
			return errInjectRecallFailed
		}
		return err
	})
	return bench.Injection{IDs: out.RecordIDs, Excerpts: excerptsOf(out.Context, out.RecordIDs), Bytes: out.Bytes}, err
}

// excerptAttrRE is the attribute an observation shown as an excerpt names
// its record by (docs/api.md, Excerpts); attribute values and bodies are
// escaped, so the pattern cannot be spelled by a record's text.
var excerptAttrRE = regexp.MustCompile(`<memhost_memory_observation [^>]*\bexcerpt_of="([^"]*)"`)

// excerptsOf answers the ids among ids that the injected text shows as an
// excerpt.
func excerptsOf(injected []string, ids []string) []string {
	var out []string
	for _, text := range injected {
		for _, m := range excerptAttrRE.FindAllStringSubmatch(text, -1) {
			if slices.Contains(ids, m[1]) && !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	return out
}

// pluginRecall recalls through the provider plugin alone (gRPC, no HTTP),
// over the scopes an identity reads.
func (b *benchHost) pluginRecall(ctx context.Context, realm, identity, query string, limit int) error {
	return b.pluginRecallQuery(ctx, pluginQuery(realm, identity, query, limit))
}

func pluginQuery(realm, identity, query string, limit int) sdk.RecallQuery {
	return sdk.RecallQuery{Realm: realm, Query: query, Limit: limit,
		Scopes: []sdk.Scope{sdk.IdentityScope(identity), sdk.RealmScope}}
}

func (b *benchHost) pluginRecallQuery(ctx context.Context, q sdk.RecallQuery) error {
	p, err := b.h.provider(q.Realm)
	if err != nil {
		return err
	}
	_, err = p.Recall(ctx, q)
	return err
}

// embedQueries answers each query as pluginRecall sends it, with its
// embedding when realm has an embedder: embedded here, before the
// measurement, so the plugin path's rows time the provider's hybrid
// recall alone. The HTTP rows include the embedding call: measureProvider
// drops the host's cached query embeddings before each.
func (b *benchHost) embedQueries(ctx context.Context, realm string, queries []bench.Query, limit int) ([]sdk.RecallQuery, error) {
	out := make([]sdk.RecallQuery, len(queries))
	for i, q := range queries {
		out[i] = pluginQuery(realm, q.Identity, q.Text, limit)
		if reason := b.h.semantic.PrepareRecall(ctx, &out[i]); reason != "" {
			return nil, fmt.Errorf("embedding bench query %d: %s", i, reason)
		}
	}
	return out, nil
}

// pluginRSS answers the resident memory of each plugin process in bytes.
func (b *benchHost) pluginRSS() map[string]int64 {
	out := map[string]int64{}
	for _, st := range b.h.supervisor.Status() {
		if rss, ok := procstat.Resident(st.Pid); ok {
			out[st.Instance] = rss
		}
	}
	return out
}

// cpuTime answers the processor time, user and system, spent so far by
// this process (the host and the bench's clients) and the plugins, and
// how many plugin processes it read in clock ticks. It is 0 where /proc
// or getrusage is not there, and then so is every difference of two
// readings.
func (b *benchHost) cpuTime() (time.Duration, int) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	total, ticked := time.Duration(ru.Utime.Nano()+ru.Stime.Nano()), 0
	for _, st := range b.h.supervisor.Status() {
		if cpu, ok := procstat.CPU(st.Pid); ok {
			total += cpu
			ticked++
		}
	}
	return total, ticked
}

// coarseCPU reports whether spent, a difference of two cpuTime readings
// over ticked plugin processes, is too small to mean much: each process's
// time is read in whole ticks, so up to a tick of each may be missing,
// and that is over a tenth of spent.
func coarseCPU(spent time.Duration, ticked int) bool {
	return time.Duration(ticked)*procstat.ClockTick*10 > spent
}

// progressLine reports progress on w at most every tenth.
func progressLine(w io.Writer, what string) func(done, total int) {
	last := -1
	return func(done, total int) {
		if tenth := done * 10 / max(total, 1); tenth != last {
			last = tenth
			fmt.Fprintf(w, "bench: %s %d/%d\n", what, done, total)
		}
	}
}

type hostFacts struct {
	provider string
	records  int
	start    time.Duration
	writes   float64
	rss      int64
	// embedded is the embedding backlog's drain rate after the load,
	// records/s (0: no embedder).
	embedded float64
	// paired is lexical against hybrid recall on the same index (nil: no
	// embedder).
	paired *bench.Paired
}

// defaultLoCoMo is the LoCoMo file bench reads unless told otherwise: in
// the working directory, as no path outside it is the same on two
// machines.
const defaultLoCoMo = "locomo10.json"

// locomoSource says where the LoCoMo file comes from.
const locomoSource = "locomo10.json is data/locomo10.json of github.com/snap-research/locomo; pass its path with --locomo"

func runBench(ctx context.Context, o benchOptions, w, progress io.Writer) error {
	var samples []bench.Sample
	locomoTotal := 0 // samples in the file
	locomoMissing := false
	if o.locomo != "" {
		all, err := bench.LoadLoCoMo(o.locomo)
		locomoTotal = len(all)
		switch {
		case errors.Is(err, os.ErrNotExist):
			// Only the default path gets here: a path given is checked.
			locomoMissing = true
			fmt.Fprintf(progress, "bench: no LoCoMo file at %s; skipping retrieval (%s)\n", o.locomo, locomoSource)
		case err != nil:
			return err
		default:
			for _, s := range all {
				if len(o.samples) == 0 || containsInt(o.samples, s.Index) {
					samples = append(samples, s)
				}
			}
			for _, i := range o.samples {
				if !slices.ContainsFunc(all, func(s bench.Sample) bool { return s.Index == i }) {
					return fmt.Errorf("--locomo-samples: %s has no sample %d (it has %d, from 0)", o.locomo, i, len(all))
				}
			}
		}
	}
	questions, lmeMissing, err := loadLongMemEval(o, progress)
	if err != nil {
		return err
	}
	var providers []string
	for _, p := range o.providers {
		if p == "postgres" && os.Getenv(postgresDSNEnv) == "" {
			fmt.Fprintf(progress, "bench: %s is unset; skipping the postgres provider\n", postgresDSNEnv)
			continue
		}
		providers = append(providers, p)
	}
	if o.embedder != "" && len(providers) > 0 {
		// The embedder starts once before anything is measured, so a
		// config it refuses ends the run now, not after the lexical rows.
		if err := inFreshHost(ctx, o, providers[0], func(*benchHost) error { return nil }); err != nil {
			return err
		}
	}
	var latencies []bench.Latency
	var facts []hostFacts
	retrieval := map[string][]bench.Retrieval{}
	lme := map[string][]bench.LMEScore{}
	for _, n := range o.sizes {
		row, err := measureInProcess(ctx, bench.NewCorpus(o.seed, n, o.queries), progress)
		if err != nil {
			return fmt.Errorf("in-process reference at %d records: %w", n, err)
		}
		latencies = append(latencies, row)
	}
	// A run that fails leaves the others' figures to report: a long run
	// must not lose an hour's measurements to one provider's failure.
	var failed []error
	for _, p := range providers {
		for _, v := range o.variants(p) {
			if err := benchVariantRun(ctx, p, v, samples, questions, progress, &latencies, &facts, retrieval, lme); err != nil {
				if ctx.Err() != nil {
					return err
				}
				fmt.Fprintf(progress, "bench: %s failed; going on with the rest: %v\n", v.label, err)
				failed = append(failed, err)
			}
		}
	}
	fmt.Fprintf(w, "## Latency and throughput\n\nseed %d, %d queries per row, identity + realm scopes, limit 10.\n\n", o.seed, o.queries)
	fmt.Fprintf(w, "ops/s per core divides by the machine's %d cores, which the host, its plugins and the bench's clients share; CPU per op is the processor time (user and system) the bench's process, host and clients, and the plugins spent per operation, which the machine's other load does not inflate as it does latency; the plugins' share is read from /proc in 10 ms ticks, so a short row's figure is marked ~. p50 and p99 are nearest-rank percentiles.\n\n", runtime.NumCPU())
	bench.WriteLatencyTable(w, latencies, runtime.NumCPU())
	fmt.Fprintf(w, "\n## Writes, start and memory\n\n| provider | records | writes/s (batches of 500) | embedded/s after the load | host ready | plugin RSS after load | RSS per record |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range facts {
		embedded := "—"
		if f.embedded > 0 {
			embedded = fmt.Sprintf("%.0f", f.embedded)
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %s | %d ms | %.0f MiB | %.0f B |\n", f.provider, f.records, f.writes, embedded, f.start.Milliseconds(), float64(f.rss)/(1<<20), float64(f.rss)/float64(max(f.records, 1)))
	}
	var paired []bench.Paired
	for _, f := range facts {
		if f.paired != nil {
			paired = append(paired, *f.paired)
		}
	}
	if len(paired) > 0 {
		fmt.Fprintf(w, "\n## Hybrid against lexical recall, paired\n\nThrough the plugin, one client, on the embedder's host: each query asked lexically (A) and with its embedding (B) back to back on the same index, alternating which goes first, so the machine's load moves both alike.\n\n")
		bench.WritePairedTable(w, paired)
	}
	if o.svg != "" {
		chart, err := bench.LatencyChart(latencies)
		if err != nil {
			return err
		}
		if err := writeWhole(o.svg, chart, progress); err != nil {
			return fmt.Errorf("--svg: %w", err)
		}
		fmt.Fprintf(w, "\n![p50 latency per provider and path](%s)\n", filepath.Base(o.svg))
	}
	if o.multiHost {
		if err := benchMultiHost(ctx, o, w, progress); err != nil {
			return fmt.Errorf("multihost: %w", err)
		}
	}
	if locomoMissing {
		writeNotRun(w, "LoCoMo retrieval", "LoCoMo", o.locomo, locomoSource)
	}
	writeLoCoMo(w, retrieval, samples, locomoTotal, o.categories)
	if lmeMissing {
		writeNotRun(w, "LongMemEval-S retrieval", "LongMemEval", o.longMemEval, longMemEvalSource)
	}
	writeLongMemEval(w, lme)
	if err := runRetention(ctx, o, w, progress); err != nil {
		failed = append(failed, fmt.Errorf("retention: %w", err))
	}
	if len(failed) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\n## Runs that failed\n\nTheir rows above are those measured before the failure, or none.\n\n")
	for _, err := range failed {
		fmt.Fprintf(w, "- %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
	}
	// Each failure was on the progress stream when it happened.
	return fmt.Errorf("%d of the bench's runs failed; the report lists them after what the others measured", len(failed))
}

// writeNotRun writes a report section saying it was not run because the
// data set at its default path is not there.
func writeNotRun(w io.Writer, section, what, path, source string) {
	fmt.Fprintf(w, "\n## %s\n\nNot run: no %s file at %s, the default (%s).\n", section, what, path, source)
}

// writeLoCoMo renders the LoCoMo block of the report, naming the samples
// run when they are not all the file's total.
func writeLoCoMo(w io.Writer, results map[string][]bench.Retrieval, samples []bench.Sample, total int, categories bool) {
	if len(results) == 0 {
		return
	}
	fmt.Fprintf(w, "\n## LoCoMo retrieval\n\nEvery turn one record; categories 1-4 with evidence; dev = samples 0-4, held-out = 5-9; %s\n\n", evidenceNote)
	if len(samples) < total {
		var idx []string
		for _, s := range samples {
			idx = append(idx, strconv.Itoa(s.Index))
		}
		fmt.Fprintf(w, "Samples %s only, of %d: every sample is an identity of one realm ranked by the statistics of the samples loaded, so these figures differ from the same samples' in a run of all.\n\n", strings.Join(idx, ", "), total)
	}
	if unreadable, missing := bench.EvidenceFaults(samples); len(unreadable)+len(missing) > 0 {
		fmt.Fprintf(w, "Evidence of the questions of categories 1-4 that the data set gets wrong: %d string(s) naming no dia id, left out (%s); %d id(s) naming no turn of their sample, kept and never retrieved (%s).\n\n",
			len(unreadable), strings.Join(unreadable, ", "), len(missing), strings.Join(missing, ", "))
	}
	bench.WriteRetrievalTable(w, results, categories)
}

// evidenceNote says what the retrieval tables' evidence columns count.
const evidenceNote = "evidence = share of evidence turns a fresh session's inject delivers whole under the default budget; cut = share delivered only as an excerpt or a body cut at 2 KiB (it may stop before the answer), not counted in evidence."

// measureInProcess builds the exact engine (sdk/index, ranked as the
// sqlite provider ranks) over the corpus in this process and measures
// recall on it alone: the floor every other path is compared with.
func measureInProcess(ctx context.Context, c bench.Corpus, progress io.Writer) (bench.Latency, error) {
	const realm = sdk.DefaultRealm
	fmt.Fprintf(progress, "bench: in-process reference over %d records\n", len(c.Records))
	ix, err := memindex.New(memindex.Options{Weights: []float64{5, 4, 2, 1}})
	if err != nil {
		return bench.Latency{}, err
	}
	for i, r := range c.Records {
		d := memindex.Doc{ID: strconv.Itoa(i), Realm: realm, Scope: r.Scope, Tags: r.Tags, Fields: [][]string{
			memindex.FieldTerms(memindex.TagText(r.Tags)), memindex.FieldTerms(r.Title),
			memindex.FieldTerms(r.Description), memindex.FieldTerms(r.Body),
		}}
		if err := ix.Put(d); err != nil {
			return bench.Latency{}, err
		}
	}
	ix.Cluster(0) // in scope order, as a provider's index is after its snapshot
	p50, p99, perSec, err := bench.Measure(ctx, c.Queries, 1, func(_ context.Context, _ int, q bench.Query) error {
		_, err := ix.Search(memindex.Query{Realm: realm, Terms: memindex.QueryTerms(q.Text), Limit: 10,
			Scopes: []string{string(sdk.IdentityScope(q.Identity)), string(sdk.RealmScope)}})
		return err
	})
	return bench.Latency{Provider: "sdk/index", Records: len(c.Records), Op: "recall", Path: bench.PathInProcess,
		Clients: 1, P50: p50, P99: p99, PerSec: perSec}, err
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// benchSettle is how long the background work a bulk load sets off is
// given before latency is measured.
const benchSettle = 4 * time.Second

// measureProvider loads the corpus and measures every path and client
// count on it. The corpus's records are let go once loaded: the host
// runs in this process, and a production host does not carry a copy of
// its store in its heap for the collector to walk on every cycle.
func measureProvider(ctx context.Context, b *benchHost, plugin, provider string, c *bench.Corpus, o benchOptions, progress io.Writer) ([]bench.Latency, hostFacts, error) {
	const realm = sdk.DefaultRealm
	records := len(c.Records)
	writes, err := c.Load(ctx, b, realm, 500, progressLine(progress, fmt.Sprintf("%s loading %d records", provider, records)))
	if err != nil {
		return nil, hostFacts{}, err
	}
	var embedded float64
	if b.h.semantic != nil {
		fmt.Fprintf(progress, "bench: %s embedding %d records\n", provider, records)
		t0 := time.Now()
		if err := b.h.semantic.WaitDrained(ctx, realm); err != nil {
			return nil, hostFacts{}, err
		}
		embedded = float64(records) / time.Since(t0).Seconds()
	}
	c.Records = nil
	// Collected and given back to the OS now: the runtime would otherwise
	// return the freed corpus and load buffers a little at a time in the
	// background, CPU spent during the rows measured below.
	debug.FreeOSMemory()
	// Latency is measured at steady state: the load sets off background
	// work (sqlite's and markdown's index snapshots a second or two after
	// the last write, WAL checkpoints, bleve's segment merges) that would
	// otherwise share these two cores with the first rows measured.
	select {
	case <-ctx.Done():
		return nil, hostFacts{}, ctx.Err()
	case <-time.After(benchSettle):
	}
	if plugin == "postgres" {
		// As after any bulk load: fresh statistics and visibility map.
		if err := vacuumAnalyze(ctx); err != nil {
			return nil, hostFacts{}, err
		}
	}
	facts := hostFacts{provider: provider, records: records, start: b.started, writes: writes, embedded: embedded}
	for _, rss := range b.pluginRSS() {
		facts.rss += rss
	}
	var rows []bench.Latency
	run := func(op string, path bench.Path, clients int, fn func(ctx context.Context, i int, q bench.Query) error) error {
		fmt.Fprintf(progress, "bench: %s %d records: %s via %s, %d clients\n", provider, records, op, path, clients)
		if path == bench.PathHTTP {
			// Each HTTP row embeds its queries, as a turn with a new text
			// does: the host keeps the last queries' embeddings, which
			// embedQueries and the rows before this one filled.
			b.h.semantic.ForgetQueries()
		}
		cpu0, _ := b.cpuTime()
		p50, p99, perSec, err := measureTurns(ctx, []*benchHost{b}, c.Queries, clients, fn)
		if err != nil {
			return fmt.Errorf("%s via %s: %w", op, path, err)
		}
		cpu1, ticked := b.cpuTime()
		spent := cpu1 - cpu0
		rows = append(rows, bench.Latency{Provider: provider, Records: records, Op: op, Path: path, Clients: clients, P50: p50, P99: p99, PerSec: perSec,
			CPU: spent / time.Duration(max(len(c.Queries), 1)), CPUCoarse: coarseCPU(spent, ticked)})
		return nil
	}
	prepared, err := b.embedQueries(ctx, realm, c.Queries, 10)
	if err != nil {
		return nil, facts, err
	}
	for _, clients := range o.clients {
		if err := run("recall", bench.PathPlugin, clients, func(ctx context.Context, i int, _ bench.Query) error {
			return b.pluginRecallQuery(ctx, prepared[i])
		}); err != nil {
			return nil, facts, err
		}
		if err := run("recall", bench.PathHTTP, clients, func(ctx context.Context, _ int, q bench.Query) error {
			return b.post(ctx, "/v1/recall", recallBody{Identity: benchIdentity{realm, q.Identity}, Query: q.Text, Limit: 10}, nil)
		}); err != nil {
			return nil, facts, err
		}
		// A fresh session per query, so every turn pays a real recall
		// (nothing is suppressed by an earlier turn's dedup).
		if err := run("inject", bench.PathHTTP, clients, func(ctx context.Context, i int, q bench.Query) error {
			return b.post(ctx, "/v1/turns/inject", injectBody{Identity: benchIdentity{realm, q.Identity},
				Session: fmt.Sprintf("bench-%d-%d", clients, i), Content: q.Text}, nil)
		}); err != nil {
			return nil, facts, err
		}
	}
	if facts.paired, err = b.measurePaired(ctx, provider, records, prepared, progress); err != nil {
		return nil, facts, err
	}
	return rows, facts, nil
}

// measureTurns runs every query through fn with the given number of
// clients (bench.Measure), then waits until the hosts have written the
// ledger rows and usage marks the turns queued, which a turn writes after
// it answers: the rate counts that wait, as a host taking turns without
// pause has to keep up with them, and the next row does not pay for them.
func measureTurns(ctx context.Context, hosts []*benchHost, queries []bench.Query, clients int, fn func(ctx context.Context, i int, q bench.Query) error) (p50, p99 time.Duration, perSec float64, err error) {
	flush := make([]func(context.Context) error, len(hosts))
	for i, h := range hosts {
		flush[i] = h.h.coordinator.Flush
	}
	return measureFlushed(ctx, flush, queries, clients, fn)
}

// measureFlushed is measureTurns with the hosts' flushes, run together.
func measureFlushed(ctx context.Context, flush []func(context.Context) error, queries []bench.Query, clients int, fn func(ctx context.Context, i int, q bench.Query) error) (p50, p99 time.Duration, perSec float64, err error) {
	p50, p99, perSec, err = bench.Measure(ctx, queries, clients, fn)
	if err != nil {
		return 0, 0, 0, err
	}
	t0 := time.Now()
	errs := make([]error, len(flush))
	var wg sync.WaitGroup
	for i, f := range flush {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(ctx)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, 0, 0, fmt.Errorf("writing the turns' ledger and usage: %w", err)
	}
	if flushed := time.Since(t0); perSec > 0 {
		perSec = float64(len(queries)) / (float64(len(queries))/perSec + flushed.Seconds())
	}
	return p50, p99, perSec, nil
}

// measurePaired times each prepared query both lexically and with its
// embedding, back to back on this one index: rows measured minutes apart
// (the lexical variant's on another host) move with the machine's load.
// It answers nil when the queries carry no embedding.
func (b *benchHost) measurePaired(ctx context.Context, provider string, records int, prepared []sdk.RecallQuery, progress io.Writer) (*bench.Paired, error) {
	if len(prepared) == 0 || prepared[0].QueryVector == nil {
		return nil, nil
	}
	fmt.Fprintf(progress, "bench: %s %d records: lexical and hybrid recall via plugin, paired\n", provider, records)
	paired, err := bench.MeasurePaired(ctx, len(prepared), func(ctx context.Context, i int) error {
		return b.pluginRecallQuery(pluginhost.LexicalOnly(ctx), lexicalOf(prepared[i]))
	}, func(ctx context.Context, i int) error {
		return b.pluginRecallQuery(ctx, prepared[i])
	})
	if err != nil {
		return nil, fmt.Errorf("paired lexical and hybrid recall: %w", err)
	}
	paired.Provider, paired.Records, paired.A, paired.B = provider, records, "lexical", "hybrid"
	return &paired, nil
}

// lexicalOf answers q without its embedding.
func lexicalOf(q sdk.RecallQuery) sdk.RecallQuery {
	q.QueryVector, q.VectorModel, q.Fusion = nil, "", sdk.Fusion{}
	return q
}

// benchVariantRun measures provider p in one variant: latency at each
// size, LoCoMo and LongMemEval, each in a fresh host, into the report's
// tables under the variant's label.
func benchVariantRun(ctx context.Context, p string, v benchVariant, samples []bench.Sample, questions []bench.LongMemEval, progress io.Writer,
	latencies *[]bench.Latency, facts *[]hostFacts, retrieval map[string][]bench.Retrieval, lme map[string][]bench.LMEScore) error {
	o := v.o
	// Each part runs on a host of its own: one that fails leaves the
	// others to run and report, unless the run was cancelled or the
	// provider's host cannot start at all.
	var errs []error
	stop := func(err error) bool { return ctx.Err() != nil || errors.Is(err, errHostStart) }
	for _, n := range o.sizes {
		corpus := bench.NewCorpus(o.seed, n, o.queries)
		err := inFreshHost(ctx, o, p, func(b *benchHost) error {
			rows, f, err := measureProvider(ctx, b, p, v.label, &corpus, o, progress)
			*latencies, *facts = append(*latencies, rows...), append(*facts, f)
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s at %d records: %w", v.label, n, err))
			if stop(err) {
				return errors.Join(errs...)
			}
		}
	}
	if len(samples) > 0 {
		var res []bench.Retrieval
		err := inFreshHost(ctx, o, p, func(b *benchHost) (err error) {
			res, err = bench.EvaluateLoCoMo(ctx, b, samples, progressLine(progress, v.label+" LoCoMo questions"))
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s LoCoMo: %w", v.label, err))
			if stop(err) {
				return errors.Join(errs...)
			}
		} else {
			retrieval[v.label] = res
		}
	}
	if len(questions) > 0 {
		res, err := benchLongMemEval(ctx, o, p, v.label, questions, progress)
		if err != nil {
			errs = append(errs, err)
		} else {
			lme[v.label] = res
		}
	}
	return errors.Join(errs...)
}

// inFreshHost runs fn on a bench host of its own for provider p (its own
// PostgreSQL schemas for postgres), closed and dropped after.
func inFreshHost(ctx context.Context, o benchOptions, p string, fn func(*benchHost) error) error {
	pg, err := newBenchPostgres(ctx, p)
	if err != nil {
		return err
	}
	defer pg.drop(ctx)
	b, err := startBenchHostOn(ctx, o, p, pg)
	if err != nil {
		return fmt.Errorf("%w: %w", errHostStart, err)
	}
	defer b.close()
	return fn(b)
}

// errHostStart is a bench host that did not start: the provider's other
// parts would fail the same way, so its run stops there.
var errHostStart = errors.New("the bench host did not start")

// Settle waits until realm's records are embedded (bench.Settler).
func (b *benchHost) Settle(ctx context.Context, realm string) error {
	if b.h.semantic == nil {
		return nil
	}
	return b.h.semantic.WaitDrained(ctx, realm)
}
