package main

import (
	"context"
	"path/filepath"
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
	}
}
