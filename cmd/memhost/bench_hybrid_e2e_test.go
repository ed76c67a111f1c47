package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/bench"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
)

// TestBenchPluginPathCarriesTheVector: with an embedder, the plugin path's
// queries carry the query's embedding (so its rows time the provider's
// hybrid recall), and the provider answers them; without one they stay
// lexical.
func TestBenchPluginPathCarriesTheVector(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plugins := testbin.PluginDir(t, "sqlite", "wordvec")
	table, err := filepath.Abs(filepath.Join(testbin.ModuleRoot(t), "plugins", "wordvec", "testdata", "tiny.wvt"))
	if err != nil {
		t.Fatal(err)
	}
	queries := []bench.Query{{Identity: "u1", Text: "coffee in the morning"}, {Identity: "u2", Text: "zzqq"}}
	for _, embedder := range []string{"", "wordvec"} {
		o := benchOptions{pluginDir: plugins, embedder: embedder, embedderConfig: `{ table = "` + table + `" }`, semanticWeight: -1}
		b, err := startBenchHostIn(ctx, t.TempDir(), o, "sqlite", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer b.close()
		prepared, err := b.embedQueries(ctx, sdk.DefaultRealm, queries, 10)
		if err != nil {
			t.Fatal(err)
		}
		for i, q := range prepared {
			if hasVec := q.QueryVector != nil && q.VectorModel != ""; hasVec != (embedder != "") {
				t.Errorf("embedder %q, query %d: vector %v model %q", embedder, i, q.QueryVector != nil, q.VectorModel)
			}
			if q.Query != queries[i].Text || len(q.Scopes) != 2 || q.Limit != 10 {
				t.Errorf("query %d: %+v", i, q)
			}
			if err := b.pluginRecallQuery(ctx, q); err != nil {
				t.Errorf("embedder %q, query %d: %v", embedder, i, err)
			}
		}
		// With an embedder, each query is also timed lexically beside its
		// hybrid form; without one there is nothing to pair. Neither side
		// embeds: the hybrid's queries come embedded, and the lexical side
		// must reach the provider without the embedding the host would add.
		embeds := embedCalls(t, b)
		paired, err := b.measurePaired(ctx, "sqlite", 0, prepared, io.Discard)
		if err != nil {
			t.Fatalf("embedder %q: %v", embedder, err)
		}
		if n := embedCalls(t, b) - embeds; n != 0 {
			t.Errorf("embedder %q: the paired run embedded %d queries, want none", embedder, n)
		}
		if (paired != nil) != (embedder != "") {
			t.Fatalf("embedder %q: paired %+v", embedder, paired)
		}
		if paired != nil && (paired.A != "lexical" || paired.B != "hybrid" || paired.P50A <= 0 || paired.P50B <= 0) {
			t.Errorf("paired %+v", paired)
		}
		for i, q := range prepared {
			if embedder != "" && q.QueryVector == nil {
				t.Errorf("query %d lost its embedding to the lexical side", i)
			}
		}
	}
}

// TestBenchStopsWhenTheEmbedderCannotStart: a bench whose embedder
// refuses its config (here its word-vector table is missing) stops with
// the embedder's reason before it measures anything, without backing off
// to retry the plugin as a serving host would, and leaves no data behind.
func TestBenchStopsWhenTheEmbedderCannotStart(t *testing.T) {
	tmp := testbin.ShortTempDir(t)
	t.Setenv("TMPDIR", tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	missing := filepath.Join(tmp, "missing.wvt")
	o := benchOptions{
		pluginDir: testbin.PluginDir(t, "sqlite", "wordvec"), embedder: "wordvec", embedderConfig: `{ table = "` + missing + `" }`, semanticWeight: -1,
		providers: []string{"sqlite"}, sizes: []int{200}, queries: 5, clients: []int{1},
	}
	var report, progress bytes.Buffer
	err := runBench(ctx, o, &report, &progress)
	if err == nil {
		t.Fatal("a bench whose embedder cannot start ran")
	}
	for _, want := range []string{"configure", missing, "does not exist"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// "next start attempt" is what a backing-off supervisor reports.
	if strings.Contains(err.Error(), "next start attempt") {
		t.Errorf("the bench waited for the plugin to be restarted: %v", err)
	}
	if strings.Contains(progress.String(), "records:") || report.Len() > 0 {
		t.Errorf("the bench measured before it found the embedder cannot start:\n%s%s", progress.String(), report.String())
	}
	if ctx.Err() != nil {
		t.Errorf("the bench waited out the test's deadline: %v", ctx.Err())
	}
	assertNoBenchData(t, tmp)
}

// embedCalls answers how many embed calls the host has made to its
// embedder plugins, from its metrics.
func embedCalls(t *testing.T, b *benchHost) int {
	t.Helper()
	resp, err := b.client.Get(b.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %d %v", resp.StatusCode, err)
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "memhost_plugin_call_duration_seconds_count{") && strings.Contains(line, `method="embed"`) {
			v, err := strconv.Atoi(line[strings.LastIndexByte(line, ' ')+1:])
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			n += v
		}
	}
	return n
}

// TestBenchHTTPRowsEmbedTheirQueries: with an embedder, every HTTP row
// (recall and inject, at each client count) embeds each of its queries,
// as a turn with a new text does, though the plugin rows' preparation and
// the rows before it embedded the same texts and the host keeps the last
// 256 query embeddings.
func TestBenchHTTPRowsEmbedTheirQueries(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plugins := testbin.PluginDir(t, "sqlite", "wordvec")
	table, err := filepath.Abs(filepath.Join(testbin.ModuleRoot(t), "plugins", "wordvec", "testdata", "tiny.wvt"))
	if err != nil {
		t.Fatal(err)
	}
	o := benchOptions{pluginDir: plugins, embedder: "wordvec", embedderConfig: `{ table = "` + table + `" }`, semanticWeight: -1, clients: []int{1, 2}}
	b, err := startBenchHostIn(ctx, t.TempDir(), o, "sqlite", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	c := bench.NewCorpus(1, 200, 12)
	for i := range c.Queries { // words the tiny table knows, each text its own
		c.Queries[i].Text = fmt.Sprintf("coffee morning tea %d", i)
	}
	before := embedCalls(t, b)
	rows, _, err := measureProvider(ctx, b, "sqlite", "sqlite+wordvec", &c, o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	httpRows := 0
	for _, r := range rows {
		if r.Path == bench.PathHTTP {
			httpRows++
		}
	}
	// The preparation embeds each query once; so does each HTTP row.
	n, q := embedCalls(t, b)-before, len(c.Queries)
	if want := q * (1 + httpRows); httpRows != 4 || n < want {
		t.Errorf("%d HTTP rows made %d embed calls with the preparation, want 4 rows and at least %d", httpRows, n, want)
	}
}
