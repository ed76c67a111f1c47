package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
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
	t.Parallel()
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
	// The provider's process, its index in memory: a megabyte or more.
	if m := regexp.MustCompile(`memhost_plugin_resident_memory_bytes\{instance="main",kind="provider",plugin="sqlite"\} ([0-9.e+]+)`).FindStringSubmatch(text); m == nil {
		t.Errorf("/metrics has no plugin memory:\n%s", grepLines(text, "memhost_plugin_resident"))
	} else if rss, err := strconv.ParseFloat(m[1], 64); err != nil || rss < 1<<20 {
		t.Errorf("plugin memory %s, want a megabyte or more", m[1])
	}
	if !regexp.MustCompile(`memhost_plugin_cpu_seconds_total\{instance="main",kind="provider",plugin="sqlite"\} [0-9.e+-]+\n`).MatchString(text) {
		t.Errorf("/metrics has no plugin CPU time:\n%s", grepLines(text, "memhost_plugin_cpu"))
	}
	if !strings.Contains(text, "\nmemhost_trace_dropped_total 0\n") {
		t.Errorf("/metrics has no count of dropped turn traces:\n%s", grepLines(text, "memhost_trace"))
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

// TestMetricsForEveryPluginKind: calls to a selector, a compactor and
// both resolvers show on /metrics as plugin call latency by instance and
// method, as provider calls do.
func TestMetricsForEveryPluginKind(t *testing.T) {
	t.Parallel()
	cfg := resolverDeployment("operator_scope = \"provisional\"\noperator_resolver = \"ops\"\nmob_resolver = \"teams\"\nselector = \"rerank\"\ncompactor = \"summary\"") + `
selector "rerank" { plugin = "lexical" }
compactor "summary" { plugin = "template" }
`
	cfgPath, dataDir := writeConfig(t, cfg)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeBindings(t, filepath.Join(dataDir, "bindings.json"), aliceBindings)
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	remember(t, m, map[string]any{"scope": "identity:alice", "kind": "procedure", "title": "Deploy checklist", "body": "Run the migrations first."})
	if res := turn(t, m, "s1", "where is the deploy checklist?"); len(res.RecordIDs) != 1 {
		t.Fatalf("turn injected %v, want the checklist", res.RecordIDs)
	}
	if code, _, e := compact(t, m, "c1", "s1", history(6)); code != 200 {
		t.Fatalf("compact = %d %+v", code, e)
	}
	text := scrape(t, m)
	for _, c := range []struct{ instance, method string }{
		{"main", "manifest"}, {"rerank", "select"}, {"summary", "compact"}, {"teams", "resolve_mobs"}, {"ops", "resolve_operator"},
	} {
		re := regexp.MustCompile(`memhost_plugin_call_duration_seconds_count\{code="ok",instance="` + c.instance + `",method="` + c.method + `"\} [1-9]`)
		if !re.MatchString(text) {
			t.Errorf("/metrics has no %s latency for instance %s:\n%s", c.method, c.instance, grepLines(text, "memhost_plugin_call_duration_seconds_count"))
		}
	}
}

// TestRequestIDInCoordinatorLog: through `memhost serve`, the line the
// coordinator logs for a skipped injection carries the request id the
// answer's X-Request-Id header names.
func TestRequestIDInCoordinatorLog(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	req, _ := http.NewRequest("POST", m.base+"/v1/turns/inject", strings.NewReader(`{"identity":{"id":"nobody"},"session":"s1","content":"anything about zucchini"}`))
	req.Header.Set("X-Request-Id", "e2e-turn-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") != "e2e-turn-1" {
		t.Fatalf("inject = %d, X-Request-Id %q", resp.StatusCode, resp.Header.Get("X-Request-Id"))
	}
	// The log is read from the server's stderr as it comes.
	var skipLine string
	for deadline := time.Now().Add(10 * time.Second); skipLine == "" && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, l := range strings.Split(m.logs(), "\n") {
			if strings.Contains(l, "coordinator: injected nothing") {
				skipLine = l
			}
		}
	}
	if !strings.Contains(skipLine, "request_id=e2e-turn-1") {
		t.Fatalf("the coordinator's skip line %q lacks request_id=e2e-turn-1:\n%s", skipLine, m.logs())
	}
}

// TestCoordinatorLinesNameTheirLoggerOnce: from an outside review. The
// coordinator names its own logger, and serve named the one it handed
// it too: every coordinator line said "memhost.coordinator.coordinator",
// which no operator's filter on "memhost.coordinator" expects.
func TestCoordinatorLinesNameTheirLoggerOnce(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	var turn turnAnswer
	if code := m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]string{"id": "nobody"}, "session": "s1", "content": "anything about zucchini"}, &turn); code != 200 || turn.SkipReason == nil {
		t.Fatalf("inject = %d %+v; want a skip", code, turn)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(m.logs(), "injected nothing") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	line := grepLines(m.logs(), "")
	if !regexp.MustCompile(`\[INFO\] +memhost\.coordinator: injected nothing`).MatchString(line) {
		t.Errorf("no skip line under memhost.coordinator:\n%s", line)
	}
}
