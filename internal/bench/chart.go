package bench

import (
	"fmt"
	"slices"

	"github.com/go-analyze/charts"
)

// LatencyChart renders the single-client p50 of each path per provider and
// size as an SVG bar chart (milliseconds).
func LatencyChart(rows []Latency) ([]byte, error) {
	type key struct {
		provider string
		records  int
	}
	var groups []key
	series := []struct {
		name string
		op   string
		path Path
	}{
		{"recall in-process", "recall", PathInProcess},
		{"recall via plugin", "recall", PathPlugin},
		{"recall via HTTP", "recall", PathHTTP},
		{"inject via HTTP", "inject", PathHTTP},
	}
	values := make([][]float64, len(series))
	for _, r := range rows {
		k := key{r.Provider, r.Records}
		if !slices.Contains(groups, k) {
			groups = append(groups, k)
		}
	}
	var names []string
	for si, s := range series {
		values[si] = make([]float64, len(groups))
		for gi, g := range groups {
			for _, r := range rows {
				if r.Provider == g.provider && r.Records == g.records && r.Op == s.op && r.Path == s.path && r.Clients == 1 {
					values[si][gi] = float64(r.P50.Microseconds()) / 1000
				}
			}
		}
		names = append(names, s.name)
	}
	labels := make([]string, len(groups))
	for i, g := range groups {
		labels[i] = fmt.Sprintf("%s %dk", g.provider, g.records/1000)
	}
	p, err := charts.BarRender(values,
		charts.SVGOutputOptionFunc(),
		charts.DimensionsOptionFunc(900, 420),
		charts.TitleTextOptionFunc("p50 latency, 1 client (ms)"),
		charts.XAxisLabelsOptionFunc(labels),
		charts.LegendOptionFunc(charts.LegendOption{SeriesNames: names, Offset: charts.OffsetRight}),
	)
	if err != nil {
		return nil, fmt.Errorf("latency chart: %w", err)
	}
	return p.Bytes()
}
