package httpapi

import (
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// ownPlugins reports one healthy plugin instance running as this test's
// process, and one not running.
type ownPlugins struct{}

func (ownPlugins) Status() []pluginhost.Status {
	return []pluginhost.Status{
		{Instance: "main", Kind: "provider", Plugin: "sqlite", Healthy: true, Pid: os.Getpid()},
		{Instance: "down", Kind: "provider", Plugin: "bleve"},
	}
}
func (ownPlugins) Ready() bool { return true }

// TestPluginProcessSeries: each running plugin process has its memory and
// CPU time on /metrics; one not running has neither, and no series is
// made up for it. Every series passes Prometheus's naming lint.
func TestPluginProcessSeries(t *testing.T) {
	m := NewMetrics(ownPlugins{}, nil)
	m.WatchTraces(func() int64 { return 0 })
	problems, err := testutil.GatherAndLint(m.Registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	n, err := testutil.GatherAndCount(m.Registry, "memhost_plugin_resident_memory_bytes", "memhost_plugin_cpu_seconds_total")
	if err != nil {
		t.Fatal(err)
	}
	want := 2 // main's two; down has none
	if runtime.GOOS != "linux" {
		want = 0
	}
	if n != want {
		t.Errorf("%d plugin process series, want %d", n, want)
	}
	const up = `
# HELP memhost_plugin_up 1 when the plugin instance's process is up.
# TYPE memhost_plugin_up gauge
memhost_plugin_up{instance="down",kind="provider",plugin="bleve"} 0
memhost_plugin_up{instance="main",kind="provider",plugin="sqlite"} 1
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(up), "memhost_plugin_up"); err != nil {
		t.Error(err)
	}
}
