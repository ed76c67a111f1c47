package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestRefusalsBeforeAnyRouteAreCounted: requests refused before a route
// takes them (an unknown path, a known path's wrong method, an unclean
// path, a cross-origin write, a Host a tokenless host does not answer)
// were in no metric, so a client probing or misbehaving did not show;
// they are counted under one route label, whatever the path they named.
func TestRefusalsBeforeAnyRouteAreCounted(t *testing.T) {
	metrics := NewMetrics(nil, nil)
	_, providers, coord := testCoordinator(t)
	s := New(Options{Metrics: metrics, Provider: providers, Coordinator: coord})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	local := httptest.NewServer(s.LocalHostsOnly(s.Handler(), nil))
	t.Cleanup(local.Close)
	for _, c := range []struct {
		name, method, url string
		header            http.Header
		code              string
	}{
		{"unknown path", "GET", srv.URL + "/zz123", nil, "404"},
		{"another unknown path", "GET", srv.URL + "/v1/nothing/here", nil, "404"},
		{"wrong method", "BREW", srv.URL + "/metrics", nil, "405"},
		{"unclean path", "GET", srv.URL + "/v1//records", nil, "404"},
		{"cross-origin write", "POST", srv.URL + "/v1/records", http.Header{"Sec-Fetch-Site": {"cross-site"}}, "403"},
		{"a Host not answered", "GET", local.URL + "/v1/records", http.Header{"Host": {"attacker.example"}}, "403"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := testutil.ToFloat64(metrics.requests.WithLabelValues(RouteUnmatched, c.code))
			req, _ := http.NewRequest(c.method, c.url, strings.NewReader("{}"))
			for k, v := range c.header {
				if k == "Host" {
					req.Host = v[0]
					continue
				}
				req.Header[k] = v
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := testutil.ToFloat64(metrics.requests.WithLabelValues(RouteUnmatched, c.code)); got != before+1 || resp.Status[:3] != c.code {
				t.Errorf("answered %s; counted under %q %s: %v, want %v", resp.Status, RouteUnmatched, c.code, got, before+1)
			}
		})
	}
	if n := testutil.CollectAndCount(metrics.requests); n > 8 {
		t.Errorf("%d request series after the refusals, want one per route and code", n)
	}
}
