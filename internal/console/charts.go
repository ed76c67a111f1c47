package console

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// maxSamples is how many metric samples the charts keep (an hour at the
// default 15 s).
const maxSamples = 240

// sample is the host's totals at one moment.
type sample struct {
	at       time.Time
	recalls  float64
	injected float64
	skips    map[string]float64
}

// sampler reads the host's own /metrics now and then, so the console can
// draw rates over time without a metrics server.
type sampler struct {
	api     http.Handler
	mu      sync.Mutex
	samples []sample
	stop    chan struct{}
	done    chan struct{}
}

func newSampler(api http.Handler, every time.Duration) *sampler {
	s := &sampler{api: api, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		s.take()
		for {
			select {
			case <-t.C:
				s.take()
			case <-s.stop:
				return
			}
		}
	}()
	return s
}

func (s *sampler) close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	<-s.done
}

// takeIfStale samples now unless the last sample is under a second old:
// a page view then brings the charts up to date.
func (s *sampler) takeIfStale() {
	s.mu.Lock()
	stale := len(s.samples) == 0 || time.Since(s.samples[len(s.samples)-1].at) >= time.Second
	s.mu.Unlock()
	if stale {
		s.take()
	}
}

func (s *sampler) take() {
	req, _ := http.NewRequest(http.MethodGet, "/metrics", nil)
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	s.api.ServeHTTP(rec, req)
	if rec.status != http.StatusOK {
		return
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(rec.body.Bytes()))
	if err != nil {
		return
	}
	sm := sample{at: time.Now(), skips: map[string]float64{}}
	for _, m := range metrics(fams, "memhost_recall_duration_seconds") {
		sm.recalls += float64(m.GetHistogram().GetSampleCount())
	}
	for _, m := range metrics(fams, "memhost_injection_bytes") {
		sm.injected += m.GetHistogram().GetSampleSum()
	}
	for _, m := range metrics(fams, "memhost_injection_skips_total") {
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" {
				sm.skips[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	s.mu.Lock()
	s.samples = append(s.samples, sm)
	if len(s.samples) > maxSamples {
		s.samples = slices.Delete(s.samples, 0, len(s.samples)-maxSamples)
	}
	s.mu.Unlock()
}

func metrics(fams map[string]*dto.MetricFamily, name string) []*dto.Metric {
	if f, ok := fams[name]; ok {
		return f.GetMetric()
	}
	return nil
}

// chart is one server-drawn SVG chart: a line of points or a set of bars.
type chart struct {
	Title   string
	Caption string
	Points  string // polyline points, for a line chart
	Area    string // the polygon under the line
	Bars    []bar
	Max     string
	Empty   bool
	H       int // the bar chart's height
}

type bar struct {
	Label string
	Value string
	Y     int
	Width int
}

const (
	chartW = 600
	chartH = 120
)

// charts draws recalls and injected bytes per interval, and skip reasons
// since the start.
func (s *sampler) charts() []chart {
	s.mu.Lock()
	samples := slices.Clone(s.samples)
	s.mu.Unlock()
	return []chart{
		line("Recalls per interval", samples, func(x sample) float64 { return x.recalls }, "%.0f"),
		line("Injected bytes per interval", samples, func(x sample) float64 { return x.injected }, "%.0f B"),
		skipBars(samples),
	}
}

func line(title string, samples []sample, v func(sample) float64, format string) chart {
	c := chart{Title: title}
	if len(samples) < 2 {
		c.Empty, c.Caption = true, "Not enough samples yet: the chart fills in as the host runs."
		return c
	}
	deltas := make([]float64, len(samples)-1)
	peak := 0.0
	for i := 1; i < len(samples); i++ {
		deltas[i-1] = max(0, v(samples[i])-v(samples[i-1]))
		peak = max(peak, deltas[i-1])
	}
	var pts []string
	for i, d := range deltas {
		x := 0
		if len(deltas) > 1 {
			x = i * chartW / (len(deltas) - 1)
		}
		y := chartH - 4
		if peak > 0 {
			y = chartH - 4 - int(d/peak*float64(chartH-12))
		}
		pts = append(pts, fmt.Sprintf("%d,%d", x, y))
	}
	c.Points = strings.Join(pts, " ")
	c.Area = fmt.Sprintf("0,%d %s %d,%d", chartH, c.Points, chartW, chartH)
	c.Max = fmt.Sprintf(format, peak)
	c.Caption = fmt.Sprintf("%d intervals since %s", len(deltas), samples[0].at.UTC().Format("15:04:05"))
	return c
}

func skipBars(samples []sample) chart {
	c := chart{Title: "Skip reasons (total)"}
	if len(samples) == 0 {
		c.Empty, c.Caption = true, "No samples yet."
		return c
	}
	last := samples[len(samples)-1].skips
	reasons := make([]string, 0, len(last))
	peak := 0.0
	for r, n := range last {
		if n > 0 {
			reasons = append(reasons, r)
			peak = max(peak, n)
		}
	}
	sort.Strings(reasons)
	if len(reasons) == 0 {
		c.Empty, c.Caption = true, "No injection has been skipped."
		return c
	}
	for i, r := range reasons {
		c.Bars = append(c.Bars, bar{Label: r, Value: fmt.Sprintf("%.0f", last[r]), Y: i * 26, Width: max(2, int(last[r]/peak*360))})
	}
	c.H = len(reasons) * 26
	c.Caption = "Why injections answered nothing, since the host started."
	return c
}
