package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/memhost/memhost/internal/bench"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
)

// BenchmarkSqlitePaths is one recall or turn through the host `memhost
// bench` runs (in this process, the sqlite plugin as a real process) on
// 20k synthetic records: the host's share of each path, for a CPU profile
// of the host (-cpuprofile covers this process only):
//
//	go test ./cmd/memhost/ -run '^$' -bench SqlitePaths -benchtime 2000x -cpuprofile cpu.out
func BenchmarkSqlitePaths(b *testing.B) {
	ctx := context.Background()
	h, err := startBenchHostOn(ctx, benchOptions{pluginDir: testbin.PluginDir(b)}, "sqlite", nil)
	if err != nil {
		b.Fatal(err)
	}
	defer h.close()
	c := bench.NewCorpus(1, 20_000, 500)
	if _, err := c.Load(ctx, h, sdk.DefaultRealm, 500, nil); err != nil {
		b.Fatal(err)
	}
	paths := []struct {
		name string
		run  func(i int, q bench.Query) error
	}{
		{"plugin-recall", func(_ int, q bench.Query) error {
			return h.pluginRecall(ctx, sdk.DefaultRealm, q.Identity, q.Text, 10)
		}},
		{"http-recall", func(_ int, q bench.Query) error {
			_, err := h.Recall(ctx, sdk.DefaultRealm, q.Identity, q.Text, 10)
			return err
		}},
		{"http-inject", func(i int, q bench.Query) error {
			_, _, err := h.Inject(ctx, sdk.DefaultRealm, q.Identity, fmt.Sprintf("b-%d", i), q.Text)
			return err
		}},
	}
	for _, p := range paths {
		b.Run(p.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				if err := p.run(i, c.Queries[i%len(c.Queries)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
