package pluginhost_test

import (
	"context"
	"encoding/json"
	"slices"

	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
)

// BenchmarkHostReady measures how long a host takes from discovery to every
// first-party provider started, verified and configured (one instance of
// each, in parallel, as `memhost serve` does at boot).
func BenchmarkHostReady(b *testing.B) {
	dir := testbin.PluginDir(b)
	configs := map[string]string{"markdown": `{"root":"md"}`, "sqlite": `{"path":"memory.db"}`, "bleve": `{"dir":"bleve"}`}
	for b.Loop() {
		b.StopTimer()
		data := b.TempDir()
		b.StartTimer()
		start := time.Now()
		entries, _, err := pluginhost.Discover(dir)
		if err != nil {
			b.Fatal(err)
		}
		var specs []pluginhost.Spec
		for _, e := range entries {
			specs = append(specs, pluginhost.Spec{Kind: sdk.KindProvider, Name: e.Manifest.Name, Plugin: e.Manifest.Name, Config: json.RawMessage(configs[e.Manifest.Name])})
		}
		sup := pluginhost.New(entries, pluginhost.Options{StartOptions: pluginhost.StartOptions{Logger: hclog.NewNullLogger(), Dir: data}})
		if err := sup.Start(context.Background(), specs); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(time.Since(start).Microseconds())/1000, "ms/ready")
		b.ReportMetric(float64(len(specs)), "plugins")
		b.StopTimer()
		sup.Close()
		b.StartTimer()
	}
}

// BenchmarkRoundTrip is the bare cost of the plugin boundary: one recall
// through a real plugin process against a provider with nothing stored.
func BenchmarkRoundTrip(b *testing.B) {
	dir := b.TempDir()
	testbin.InstallPlugin(b, dir, testbin.Build(b, "./internal/pluginhost/testdata/echo"))
	entries, _, err := pluginhost.Discover(dir)
	if err != nil {
		b.Fatal(err)
	}
	sup := pluginhost.New(entries, pluginhost.Options{StartOptions: pluginhost.StartOptions{Logger: hclog.NewNullLogger()}})
	if err := sup.Start(context.Background(), []pluginhost.Spec{{Kind: sdk.KindProvider, Name: "e", Plugin: "echo"}}); err != nil {
		b.Fatal(err)
	}
	defer sup.Close()
	p, _ := sup.Provider("e")
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		if _, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "q"}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "ms/p50")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "ms/p99")
}
