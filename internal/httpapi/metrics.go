package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is the host's Prometheus registry and the series it keeps.
type Metrics struct {
	Registry *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

// NewMetrics registers the host series; plugin health is read from
// plugins at scrape time.
func NewMetrics(plugins Plugins) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "memhost_http_requests_total", Help: "HTTP API requests by route and status code.",
		}, []string{"route", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "memhost_http_request_duration_seconds", Help: "HTTP API request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}, []string{"route"}),
	}
	m.Registry.MustRegister(m.requests, m.latency, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if plugins != nil {
		m.Registry.MustRegister(pluginCollector{plugins})
	}
	return m
}

// Handler serves the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
}

func (m *Metrics) observeRequest(route string, status int, d time.Duration) {
	m.requests.WithLabelValues(route, strconv.Itoa(status)).Inc()
	m.latency.WithLabelValues(route).Observe(d.Seconds())
}

var (
	pluginUpDesc       = prometheus.NewDesc("memhost_plugin_up", "1 when the plugin instance's process is up.", []string{"instance", "kind", "plugin"}, nil)
	pluginRestartsDesc = prometheus.NewDesc("memhost_plugin_restarts_total", "Restarts of the plugin instance after a crash.", []string{"instance", "kind", "plugin"}, nil)
)

// pluginCollector reads plugin status at scrape time.
type pluginCollector struct{ plugins Plugins }

func (c pluginCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pluginUpDesc
	ch <- pluginRestartsDesc
}

func (c pluginCollector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.plugins.Status() {
		up := 0.0
		if st.Healthy {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(pluginUpDesc, prometheus.GaugeValue, up, st.Instance, string(st.Kind), st.Plugin)
		ch <- prometheus.MustNewConstMetric(pluginRestartsDesc, prometheus.CounterValue, float64(st.Restarts), st.Instance, string(st.Kind), st.Plugin)
	}
}
