package pluginhost_test

import (
	"context"
	"encoding/json"
	"slices"
	"syscall"

	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk"
	"github.com/memhost/memhost/sdk/host"
)

// BenchmarkHostReady measures how long a host takes from discovery to every
// first-party provider started, verified and configured (one instance of
// each, in parallel, as `memhost serve` does at boot).
func BenchmarkHostReady(b *testing.B) {
	dir := testbin.PluginDir(b, "markdown", "sqlite", "bleve")
	configs := map[string]string{"markdown": `{"root":"md"}`, "sqlite": `{"path":"memory.db"}`, "bleve": `{"dir":"bleve"}`}
	var ready time.Duration
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
		ready += time.Since(start)
		b.ReportMetric(float64(len(specs)), "plugins")
		b.StopTimer()
		sup.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(ready.Microseconds())/1000/float64(b.N), "ms/ready")
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

// BenchmarkPluginRestart measures one crash recovery of the sqlite plugin
// (a 25 MB binary): from SIGKILL to the answer of the call that found the
// process dead and waited for its replacement to start, be verified and
// be configured.
func BenchmarkPluginRestart(b *testing.B) {
	dir := testbin.PluginDir(b, "sqlite")
	entries, _, err := pluginhost.Discover(dir)
	if err != nil {
		b.Fatal(err)
	}
	// A freshly written executable is rehashed until its timestamps are
	// old enough to trust (see host.Verifier); restarts after that are
	// what a long-running host sees.
	time.Sleep(2100 * time.Millisecond)
	// Back-to-back crashes would otherwise wait out a growing backoff.
	verifier := host.NewVerifier()
	sup := pluginhost.New(entries, pluginhost.Options{StartOptions: pluginhost.StartOptions{Logger: hclog.NewNullLogger(), Dir: b.TempDir(), Verifier: verifier},
		MinBackoff: time.Microsecond, MaxBackoff: time.Microsecond})
	spec := pluginhost.Spec{Kind: sdk.KindProvider, Name: "s", Plugin: "sqlite", Config: json.RawMessage(`{"path":"memory.db"}`)}
	if err := sup.Start(context.Background(), []pluginhost.Spec{spec}); err != nil {
		b.Fatal(err)
	}
	defer sup.Close()
	p, _ := sup.Provider("s")
	ctx := context.Background()
	hashed := verifier.Hashes()
	for b.Loop() {
		pid := sup.Status()[0].Pid
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			b.Fatal(err)
		}
		if _, err := p.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "q"}); err != nil {
			b.Fatal(err)
		}
		if sup.Status()[0].Pid == pid {
			b.Fatal("the call was answered by the killed process")
		}
	}
	b.ReportMetric(float64(verifier.Hashes()-hashed)/float64(b.N), "hashes/op")
}

// BenchmarkStart measures one plugin start (verify, exec, handshake,
// Info, no Configure) of the sqlite plugin, hashing the binary each time
// against remembering the verdict as a host's restarts do.
func BenchmarkStart(b *testing.B) {
	dir := testbin.PluginDir(b, "sqlite")
	entries, _, err := pluginhost.Discover(dir)
	if err != nil {
		b.Fatal(err)
	}
	time.Sleep(2100 * time.Millisecond) // see BenchmarkPluginRestart
	shared := host.NewVerifier()
	for _, c := range []struct {
		name     string
		verifier func() *host.Verifier
	}{
		{"hash-every-start", func() *host.Verifier { return nil }},
		{"remembered", func() *host.Verifier { return shared }},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				conn, err := pluginhost.Start(context.Background(), entries[0], pluginhost.StartOptions{Logger: hclog.NewNullLogger(), Dir: b.TempDir(), Verifier: c.verifier()})
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				conn.Kill(0)
				b.StartTimer()
			}
		})
	}
}
