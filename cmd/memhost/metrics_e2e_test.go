package main

import (
	"io"
	"net/http"
	"regexp"
	"testing"
)

func scrape(t *testing.T, m *instance) string {
	t.Helper()
	resp, err := http.Get(m.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics = %d, %v", resp.StatusCode, err)
	}
	return string(data)
}

// TestMetricsAfterASkippedInjection: a turn that injects nothing shows on
// /metrics as a skip reason, and provider calls as latency by instance and
// method.
func TestMetricsAfterASkippedInjection(t *testing.T) {
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	var turn turnAnswer
	if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]string{"id": "nobody"}, "session": "s1", "content": "anything remembered about zucchini"}, &turn); code != 200 || turn.SkipReason == nil {
		t.Fatalf("inject = %d %+v; want a skip", code, turn)
	}
	text := scrape(t, m)
	skip := regexp.MustCompile(`memhost_injection_skips_total\{provider="main",reason="` + regexp.QuoteMeta(*turn.SkipReason) + `",surface="[a-z_]+"\} 1`)
	if !skip.MatchString(text) {
		t.Errorf("/metrics has no skip counter for %q:\n%s", *turn.SkipReason, grepLines(text, "memhost_injection_skips"))
	}
	calls := regexp.MustCompile(`memhost_plugin_call_duration_seconds_count\{code="ok",instance="main",method="recall"\} [1-9]`)
	if !calls.MatchString(text) {
		t.Errorf("/metrics has no recall latency for instance main:\n%s", grepLines(text, "memhost_plugin_call"))
	}
	if !regexp.MustCompile(`memhost_plugin_restarts_total\{instance="main",kind="provider",plugin="sqlite"\} 0`).MatchString(text) {
		t.Errorf("/metrics has no restart counter:\n%s", grepLines(text, "memhost_plugin_restarts"))
	}
}

func grepLines(text, prefix string) string {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(prefix) + `.*$`)
	out := ""
	for _, l := range re.FindAllString(text, -1) {
		out += l + "\n"
	}
	return out
}
