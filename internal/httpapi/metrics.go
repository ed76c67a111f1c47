package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/memhost/memhost/coordinator"
	"github.com/memhost/memhost/internal/hybrid"
	"github.com/memhost/memhost/internal/procstat"
	"github.com/memhost/memhost/sdk"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the host's Prometheus registry and the series it keeps. It
// implements coordinator.Metrics.
type Metrics struct {
	Registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec

	// provider labels a realm with the provider instance serving it: any
	// realm name is accepted (unlisted ones fall back to the default
	// realm's provider), so realms themselves would be unbounded labels.
	provider      func(realm string) string
	injectedBytes *prometheus.HistogramVec
	skips         *prometheus.CounterVec
	recalls       *prometheus.HistogramVec
	defangHits    *prometheus.CounterVec
	telemetryLost *prometheus.CounterVec
	pluginCalls   *prometheus.HistogramVec
}

// NewMetrics registers the host series. Plugin health is read from
// plugins at scrape time; provider maps a realm to the provider instance
// name that labels memory series (nil labels every realm "default").
func NewMetrics(plugins Plugins, provider func(realm string) string) *Metrics {
	if provider == nil {
		provider = func(string) string { return "default" }
	}
	m := &Metrics{
		provider: provider,
		injectedBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "memhost_injection_bytes", Help: "Rendered bytes of each injection, by surface and provider.",
			Buckets: prometheus.ExponentialBuckets(256, 2, 9),
		}, []string{"surface", "provider"}),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memhost_injection_skips_total", Help: "Injections that answered nothing, by surface, provider and skip reason.",
		}, []string{"surface", "provider", "reason"}),
		recalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "memhost_recall_duration_seconds", Help: "Recall latency by surface, provider and outcome code.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}, []string{"surface", "provider", "code"}),
		defangHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memhost_defang_hits_total", Help: "Reserved markers neutralised in inbound content, by provider.",
		}, []string{"provider"}),
		telemetryLost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memhost_telemetry_lost_total", Help: "Ledger rows and usage marks not written, by kind and cause (dropped: queue full; failed: provider error).",
		}, []string{"kind", "cause"}),
		pluginCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "memhost_plugin_call_duration_seconds", Help: "Plugin call latency (every kind) by plugin instance, method and outcome code.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}, []string{"instance", "method", "code"}),
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memhost_http_requests_total", Help: "HTTP API requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "memhost_http_request_duration_seconds", Help: "HTTP API request latency by route and status code.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}, []string{"route", "code"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "memhost_http_requests_in_flight", Help: "HTTP API requests being served now, by route.",
		}, []string{"route"}),
	}
	m.Registry.MustRegister(m.requests, m.latency, m.inFlight, m.injectedBytes, m.skips, m.recalls, m.defangHits, m.telemetryLost, m.pluginCalls, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if plugins != nil {
		m.Registry.MustRegister(pluginCollector{plugins})
	}
	return m
}

// Handler serves the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

// servingGauge answers the in-flight gauge of route, looked up once when
// the route is mounted rather than on every request.
func (m *Metrics) servingGauge(route string) prometheus.Gauge {
	return m.inFlight.WithLabelValues(route)
}

// RouteUnmatched labels the requests refused before any route took them:
// an unknown path or method, a path with an empty, . or .. segment, a
// cross-origin write, a Host this host does not answer. Counted so that a
// client probing or misbehaving shows; one label, so a series per status.
const RouteUnmatched = "unmatched"

// countUnmatched counts a request refused before any route took it (its
// refusal takes no time worth a latency series).
func (m *Metrics) countUnmatched(status int) {
	m.requests.WithLabelValues(RouteUnmatched, strconv.Itoa(status)).Inc()
}

func (m *Metrics) observeRequest(route string, status int, d time.Duration) {
	code := strconv.Itoa(status)
	m.requests.WithLabelValues(route, code).Inc()
	m.latency.WithLabelValues(route, code).Observe(d.Seconds())
}

// Injected implements coordinator.Metrics.
func (m *Metrics) Injected(surface coordinator.Surface, realm string, bytes, _ int) {
	m.injectedBytes.WithLabelValues(string(surface), m.provider(realm)).Observe(float64(bytes))
}

// Skipped implements coordinator.Metrics.
func (m *Metrics) Skipped(surface coordinator.Surface, realm string, reason coordinator.SkipReason) {
	m.skips.WithLabelValues(string(surface), m.provider(realm), string(reason)).Inc()
}

// Recalled implements coordinator.Metrics.
func (m *Metrics) Recalled(surface coordinator.Surface, realm string, took time.Duration, code sdk.Code) {
	m.recalls.WithLabelValues(string(surface), m.provider(realm), string(code)).Observe(took.Seconds())
}

// Defanged implements coordinator.Metrics.
func (m *Metrics) Defanged(realm string, hits int) {
	m.defangHits.WithLabelValues(m.provider(realm)).Add(float64(hits))
}

// TelemetryDropped implements coordinator.Metrics.
func (m *Metrics) TelemetryDropped(kind string, n int) {
	m.telemetryLost.WithLabelValues(kind, "dropped").Add(float64(n))
}

// TelemetryFailed implements coordinator.Metrics.
func (m *Metrics) TelemetryFailed(kind string, n int) {
	m.telemetryLost.WithLabelValues(kind, "failed").Add(float64(n))
}

// PluginCall records one plugin call (a pluginhost.CallObserver).
func (m *Metrics) PluginCall(instance, method string, took time.Duration, err error) {
	code := "ok"
	if err != nil {
		code = string(coordinator.MetricCode(err))
	}
	m.pluginCalls.WithLabelValues(instance, method, code).Observe(took.Seconds())
}

var _ coordinator.Metrics = (*Metrics)(nil)

var (
	pluginUpDesc       = prometheus.NewDesc("memhost_plugin_up", "1 when the plugin instance's process is up.", []string{"instance", "kind", "plugin"}, nil)
	pluginRestartsDesc = prometheus.NewDesc("memhost_plugin_restarts_total", "Restarts of the plugin instance after a crash.", []string{"instance", "kind", "plugin"}, nil)
	pluginResidentDesc = prometheus.NewDesc("memhost_plugin_resident_memory_bytes", "Resident memory of the plugin instance's process (Linux only).", []string{"instance", "kind", "plugin"}, nil)
	pluginCPUDesc      = prometheus.NewDesc("memhost_plugin_cpu_seconds_total", "User and system CPU time of the plugin instance's current process (Linux only); a restart starts it again from 0.", []string{"instance", "kind", "plugin"}, nil)
)

// pluginCollector reads plugin status at scrape time, and each plugin
// process's memory and CPU from /proc: the process collector covers the
// host alone, and a provider's index is most of a deployment's memory.
type pluginCollector struct{ plugins Plugins }

func (c pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pluginUpDesc
	ch <- pluginRestartsDesc
	ch <- pluginResidentDesc
	ch <- pluginCPUDesc
}

func (c pluginCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.plugins.Status() {
		up := 0.0
		if st.Healthy {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(pluginUpDesc, prometheus.GaugeValue, up, st.Instance, string(st.Kind), st.Plugin)
		ch <- prometheus.MustNewConstMetric(pluginRestartsDesc, prometheus.CounterValue, float64(st.Restarts), st.Instance, string(st.Kind), st.Plugin)
		if st.Pid <= 0 {
			continue // not running
		}
		if rss, ok := procstat.Resident(st.Pid); ok {
			ch <- prometheus.MustNewConstMetric(pluginResidentDesc, prometheus.GaugeValue, float64(rss), st.Instance, string(st.Kind), st.Plugin)
		}
		if cpu, ok := procstat.CPU(st.Pid); ok {
			ch <- prometheus.MustNewConstMetric(pluginCPUDesc, prometheus.CounterValue, cpu.Seconds(), st.Instance, string(st.Kind), st.Plugin)
		}
	}
}

var (
	semanticEmbeddedDesc  = prometheus.NewDesc("memhost_semantic_embedded_total", "Records the embedding backlogs embedded since the start, by provider.", []string{"provider"}, nil)
	semanticFallbacksDesc = prometheus.NewDesc("memhost_semantic_fallbacks_total", "Recalls in realms with an embedder that stayed lexical, by provider and reason.", []string{"provider", "reason"}, nil)
	semanticFailingDesc   = prometheus.NewDesc("memhost_semantic_backlogs_failing", "Embedding backlogs whose last step failed, by provider.", []string{"provider"}, nil)
)

// WatchTraces adds memhost_trace_dropped_total, read from dropped (the
// trace recorder's count) at scrape time: a turn missing from a trace is
// otherwise invisible.
func (m *Metrics) WatchTraces(dropped func() int64) {
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "memhost_trace_dropped_total", Help: "Turn traces not stored: the queue was full, a write failed, or the host was stopping.",
	}, func() float64 { return float64(dropped()) }))
}

// WatchSemantic adds the semantic recall series, read from s at scrape
// time and summed by provider (realms are unbounded labels).
func (m *Metrics) WatchSemantic(s SemanticStatus) {
	m.Registry.MustRegister(semanticCollector{s: s, provider: m.provider})
}

type semanticCollector struct {
	s        SemanticStatus
	provider func(realm string) string
}

func (c semanticCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- semanticEmbeddedDesc
	ch <- semanticFallbacksDesc
	ch <- semanticFailingDesc
}

func (c semanticCollector) Collect(ch chan<- prometheus.Metric) {
	embedded, failing := map[string]float64{}, map[string]float64{}
	fallbacks := map[[2]string]float64{}
	for _, st := range c.s.Status() {
		p := c.provider(st.Realm)
		embedded[p] += float64(st.Embedded)
		failing[p] += 0 // a series for every provider, 0 while all is well
		if st.State == hybrid.StateFailing {
			failing[p]++
		}
		for reason, n := range st.Fallbacks {
			fallbacks[[2]string{p, reason}] += float64(n)
		}
	}
	for p, n := range embedded {
		ch <- prometheus.MustNewConstMetric(semanticEmbeddedDesc, prometheus.CounterValue, n, p)
		ch <- prometheus.MustNewConstMetric(semanticFailingDesc, prometheus.GaugeValue, failing[p], p)
	}
	for k, n := range fallbacks {
		ch <- prometheus.MustNewConstMetric(semanticFallbacksDesc, prometheus.CounterValue, n, k[0], k[1])
	}
}
