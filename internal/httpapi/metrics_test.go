package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/hybrid"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/sdk"
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

type oneSemanticRealm struct{}

func (oneSemanticRealm) Status() []hybrid.Status {
	return []hybrid.Status{{Realm: "default", State: hybrid.StateFailing, Embedded: 3, Fallbacks: map[string]int64{"no_time": 1}}}
}

// TestEverySeriesIsDocumented: every memhost_ series the host can serve
// has its row in docs/api.md's metrics table, so an operator reading it
// knows every series a scrape shows.
func TestEverySeriesIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(ownPlugins{}, nil)
	m.WatchTraces(func() int64 { return 0 })
	m.WatchSemantic(oneSemanticRealm{})
	// One value in each series, so each is gathered.
	m.servingGauge("POST /v1/recall").Inc()
	m.observeRequest("POST /v1/recall", 200, time.Millisecond)
	m.Injected(coordinator.SurfaceTurn, "default", 1, 1)
	m.Skipped(coordinator.SurfaceTurn, "default", coordinator.SkipNoRecords)
	m.Recalled(coordinator.SurfaceTurn, "default", time.Millisecond, sdk.CodeOK)
	m.Defanged("default", 1)
	m.TelemetryDropped(coordinator.TelemetryLedger, 1)
	m.PluginCall("main", "recall", time.Millisecond, nil)
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		name := f.GetName()
		if !strings.HasPrefix(name, "memhost_") {
			continue
		}
		n++
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("%s is served on /metrics but docs/api.md does not list it", name)
		}
	}
	if n < 15 {
		t.Fatalf("gathered %d memhost_ series; the test no longer touches them all", n)
	}
}

// TestCallsTheCallerGaveUpOnAreCanceled: a plugin call or recall cut
// short because its client went away is labelled canceled, not
// unavailable, so the plugin's unavailable counts only its own failures
// (a soak whose clients hung up mid-turn showed 1909 "unavailable"
// recalls of a healthy markdown provider).
func TestCallsTheCallerGaveUpOnAreCanceled(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"ok", nil, "ok"},
		{"caller went away", fmt.Errorf("plugin notes (markdown): recall: %w", context.Canceled), "canceled"},
		{"plugin down", fmt.Errorf("plugin notes (markdown): recall: %w", sdk.ErrUnavailable), "unavailable"},
		{"connection closed under the call", fmt.Errorf("recall: %w", errors.Join(sdk.ErrUnavailable, context.Canceled)), "unavailable"},
		{"deadline", fmt.Errorf("recall: %w", context.DeadlineExceeded), "deadline_exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMetrics(nil, nil)
			m.PluginCall("notes", "recall", time.Millisecond, tc.err)
			m.Recalled(coordinator.SurfaceTurn, "default", time.Millisecond, coordinator.MetricCode(tc.err))
			for _, series := range []string{
				fmt.Sprintf(`memhost_plugin_call_duration_seconds_count{code=%q,instance="notes",method="recall"} 1`, tc.want),
				fmt.Sprintf(`memhost_recall_duration_seconds_count{code=%q,provider="default",surface="turn"} 1`, tc.want),
			} {
				if !strings.Contains(scrape(t, m), series) {
					t.Errorf("no %s in:\n%s", series, scrape(t, m))
				}
			}
		})
	}
}

// scrape answers m's series in the text format.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}
