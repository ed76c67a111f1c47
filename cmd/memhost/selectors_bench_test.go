package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// BenchmarkTurnByKind is the per-turn cost of each optional kind through
// `memhost serve` and real plugin processes: the median turn over HTTP
// with sqlite alone, then with a selector or resolvers added (resolver
// answers uncached, then cached as by default). Compare the medians:
//
//	go test ./cmd/memhost/ -run '^$' -bench TurnByKind -benchtime 400x
func BenchmarkTurnByKind(b *testing.B) {
	variants := []struct{ name, coordinator string }{
		{"baseline", ``},
		{"lexical-selector", `selector = "rerank"`},
		{"mob-resolver-uncached", "mob_resolver = \"teams\"\nresolver_cache_ms = 0"},
		{"both-resolvers-uncached", "mob_resolver = \"teams\"\noperator_resolver = \"ops\"\noperator_scope = \"provisional\"\nresolver_cache_ms = 0"},
		{"both-resolvers-cached", "mob_resolver = \"teams\"\noperator_resolver = \"ops\"\noperator_scope = \"provisional\""},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			body := resolverDeployment(v.coordinator) + "selector \"rerank\" { plugin = \"lexical\" }\n"
			cfgPath, dataDir := writeConfig(b, body)
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dataDir, "bindings.json"), []byte(aliceBindings), 0o644); err != nil {
				b.Fatal(err)
			}
			m, err := startWithConfig(b, cfgPath, dataDir)
			if err != nil {
				b.Fatal(err)
			}
			var recs []map[string]any
			for i := range 60 {
				recs = append(recs, map[string]any{"scope": "identity:alice", "kind": "fact", "title": fmt.Sprintf("Espresso note %d", i), "body": "espresso machine details"})
			}
			remember(b, m, recs...)
			remember(b, m, scopeRecords...)
			var d []time.Duration
			for b.Loop() {
				start := time.Now()
				turn(b, m, "", "espresso machine rules")
				d = append(d, time.Since(start))
			}
			slices.Sort(d)
			b.ReportMetric(float64(d[len(d)/2].Microseconds()), "median-µs")
		})
	}
}
