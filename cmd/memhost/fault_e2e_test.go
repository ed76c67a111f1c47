package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/testbin"
)

// pluginState is one row of GET /v1/plugins with the supervision fields.
type pluginState struct {
	Instance      string     `json:"instance"`
	Healthy       bool       `json:"healthy"`
	State         string     `json:"state"`
	Restarts      int        `json:"restarts"`
	StartFailures int        `json:"start_failures"`
	NextAttempt   *time.Time `json:"next_attempt"`
	BackoffMillis int64      `json:"backoff_ms"`
	Pid           int        `json:"pid"`
	LastError     string     `json:"last_error"`
	Warnings      []string   `json:"warnings"`
}

func pluginStates(t *testing.T, m *instance) map[string]pluginState {
	t.Helper()
	var out struct {
		Plugins []pluginState `json:"plugins"`
	}
	if code := m.do("GET", "/v1/plugins", nil, &out); code != 200 {
		t.Fatalf("GET /v1/plugins = %d", code)
	}
	byName := map[string]pluginState{}
	for _, p := range out.Plugins {
		byName[p.Instance] = p
	}
	return byName
}

// waitPlugin polls /v1/plugins until ok holds for the instance, within a
// generous deadline, and answers how long it took.
func waitPlugin(t *testing.T, m *instance, name, what string, within time.Duration, ok func(pluginState) bool) (pluginState, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		st := pluginStates(t, m)[name]
		if ok(st) {
			return st, time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("plugin %s: %s not reached within %s: %+v\n%s", name, what, within, st, m.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// timedAnswer is the status, body and duration of one request timed sends.
type timedAnswer struct {
	code    int
	body    string
	elapsed time.Duration
	err     error
}

// timed sends one JSON request from any goroutine (no t.Fatal) and
// answers its status, body and duration.
func (i *instance) timed(method, path string, body any) timedAnswer {
	data, _ := json.Marshal(body)
	req, err := http.NewRequest(method, i.base+path, bytes.NewReader(data))
	if err != nil {
		return timedAnswer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return timedAnswer{err: err, elapsed: time.Since(start)}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return timedAnswer{code: resp.StatusCode, body: string(b), elapsed: time.Since(start)}
}

const twoRealmsConfig = `
provider "stuck" {
  plugin = "sqlite"
  config = { path = "stuck.db" }
}
provider "other" {
  plugin = "markdown"
  config = { root = "md" }
}
realm "default" { provider = "stuck" }
realm "acme" { provider = "other" }
supervisor {
  call_timeout_ms    = 2000
  health_interval_ms = 200
  health_timeout_ms  = 5000
  kill_grace_ms      = 1000
}
coordinator {
  recall_timeout_ms = 500
}
`

// TestStoppedPluginIsKilledWhileOtherRealmsServe stops (SIGSTOP) the
// provider of one realm: its in-flight calls fail at their own deadlines
// (the request timeout is 30 s), the supervisor kills and restarts it with
// no SIGCONT, and the other realm's provider, killed meanwhile, is
// restarted by its own health check.
func TestStoppedPluginIsKilledWhileOtherRealmsServe(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, twoRealmsConfig)
	before := remember(t, m, map[string]any{"scope": "realm", "kind": "fact", "title": "Stuck realm note", "body": "Written before the plugin hung."})
	var acmeIDs struct {
		IDs []string `json:"ids"`
	}
	if code := m.do("POST", "/v1/records", map[string]any{"realm": "acme", "records": []map[string]any{{"scope": "realm", "kind": "fact", "title": "Acme note", "body": "Acme ships on Fridays."}}}, &acmeIDs); code != 200 {
		t.Fatalf("acme write = %d", code)
	}
	states := pluginStates(t, m)
	stuckPid, otherPid := states["stuck"].Pid, states["other"].Pid
	if stuckPid == 0 || otherPid == 0 {
		t.Fatalf("plugins = %+v", states)
	}
	stopProcess(t, stuckPid)
	stoppedAt := time.Now()
	// In-flight calls on the stopped plugin, in parallel.
	calls := map[string]struct {
		path string
		body any
	}{
		"recall": {"/v1/recall", map[string]any{"identity": map[string]string{"id": "ann"}, "query": "stuck realm"}},
		"write":  {"/v1/records", map[string]any{"records": []map[string]any{{"scope": "realm", "kind": "fact", "title": "During the hang", "body": "never acknowledged"}}}},
		"inject": {"/v1/turns/inject", map[string]any{"identity": map[string]string{"id": "ann"}, "session": "s1", "content": "what about the stuck realm note?"}},
	}
	answers := map[string]timedAnswer{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, c := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := m.timed("POST", c.path, c.body)
			mu.Lock()
			answers[name] = a
			mu.Unlock()
		}()
	}
	// The other realm's plugin dies meanwhile; nobody calls it.
	if err := syscall.Kill(otherPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	// It comes back by its own health check while the stopped plugin's
	// calls are still in flight.
	waitPlugin(t, m, "other", "restart after SIGKILL (no call made)", 30*time.Second, func(st pluginState) bool {
		return st.State == "ready" && st.Healthy && st.Pid != otherPid && st.Restarts == 1
	})
	t.Logf("other realm's plugin restarted %s after its SIGKILL", time.Since(killedAt).Round(time.Millisecond))
	wg.Wait()

	// Each call failed at its own deadline: the recall timeout (500 ms)
	// or the call timeout (2 s), far from the 30 s request timeout.
	for name, a := range answers {
		t.Logf("%s on the stopped plugin: %d in %s", name, a.code, a.elapsed.Round(time.Millisecond))
		if a.err != nil || a.elapsed > 20*time.Second {
			t.Fatalf("%s: err %v after %s: not failed at its own deadline", name, a.err, a.elapsed)
		}
	}
	if a := answers["recall"]; a.code != 504 && a.code != 503 {
		t.Fatalf("recall on the stopped plugin = %d %s", a.code, a.body)
	}
	if a := answers["write"]; a.code != 504 || !strings.Contains(a.body, "deadline_exceeded") {
		t.Fatalf("write on the stopped plugin = %d %s, want 504 deadline_exceeded", a.code, a.body)
	}
	if a := answers["inject"]; a.code != 200 || !strings.Contains(a.body, "recall_failed") {
		t.Fatalf("inject on the stopped plugin = %d %s, want a recall_failed skip", a.code, a.body)
	}

	if got := recallIn(t, m, "acme", "ann", "acme fridays"); len(got.Hits) != 1 || got.Hits[0].Record.ID != acmeIDs.IDs[0] {
		t.Fatalf("acme recall after its restart = %+v", got)
	}

	waitPlugin(t, m, "stuck", "kill and restart without SIGCONT", 60*time.Second, func(st pluginState) bool {
		return st.State == "ready" && st.Healthy && st.Pid != stuckPid && st.Restarts == 1
	})
	t.Logf("stopped plugin killed and serving again %s after SIGSTOP", time.Since(stoppedAt).Round(time.Millisecond))
	if alive(stuckPid) {
		t.Fatalf("the stopped plugin (pid %d) is still alive", stuckPid)
	}
	// The new process took over the store: old records are there and new
	// writes are acknowledged.
	if got := recall(t, m, "ann", "stuck realm note"); len(got.Hits) == 0 || got.Hits[0].Record.ID != before[0] {
		t.Fatalf("recall after recovery = %+v", got)
	}
	remember(t, m, map[string]any{"scope": "realm", "kind": "fact", "title": "After the hang", "body": "acknowledged"})
	if code := m.do("GET", "/readyz", nil, nil); code != 200 {
		t.Fatalf("/readyz after recovery = %d", code)
	}
	if !strings.Contains(m.logs(), "failed its health check") {
		t.Fatalf("no log line for the killed plugin:\n%s", m.logs())
	}
}

func recallIn(t *testing.T, m *instance, realm, id, query string) recallAnswer {
	t.Helper()
	return recallWith(t, m, map[string]any{"identity": map[string]string{"realm": realm, "id": id}, "query": query})
}

// TestCrashLoopingPluginBacksOff: a provider that can no longer start
// (its executable no longer matches the manifest) shows unhealthy in
// /readyz and /v1/plugins with an exponential backoff, never a busy loop,
// and serves again once it can start.
func TestCrashLoopingPluginBacksOff(t *testing.T) {
	t.Parallel()
	pluginDir := testbin.PrivatePluginDir(t, "markdown")
	cfgPath, dataDir := writeConfigIn(t, pluginDir, markdownConfig+"supervisor {\n  health_interval_ms = 100\n  max_backoff_ms = 60000\n}\n")
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(pluginDir, "memhost-plugin-markdown")
	good, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	replace := func(data []byte) {
		t.Helper()
		// Renamed into place: a running executable cannot be written.
		if err := os.WriteFile(exe+".new", data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(exe+".new", exe); err != nil {
			t.Fatal(err)
		}
	}
	replace(append(append([]byte{}, good...), "tampered"...))
	pid := pluginStates(t, m)["notes"].Pid
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// Backing off after four failures: a poll a busy machine delayed can
	// land in the retry that ends a backoff, whose state is restarting.
	st, _ := waitPlugin(t, m, "notes", "a backoff after four failed starts", 60*time.Second, func(st pluginState) bool {
		return st.StartFailures >= 4 && st.State == "backoff"
	})
	// The wait doubles from 100 ms with every failure: a busy loop would
	// show the minimum, and many more failures.
	want := (100 * time.Millisecond << (st.StartFailures - 1)).Milliseconds()
	if st.State != "backoff" || st.Healthy || st.NextAttempt == nil || st.BackoffMillis != want || !strings.Contains(st.LastError, "sha256") {
		t.Fatalf("crash-looping plugin = %+v, want backoff of %d ms, a next attempt and the sha256 refusal", st, want)
	}
	var ready struct {
		Status  string        `json:"status"`
		Plugins []pluginState `json:"plugins"`
	}
	// The backoff may have ended meanwhile: the retry is under way.
	code := m.do("GET", "/readyz", nil, &ready)
	if code != 503 || ready.Status != "not ready" || len(ready.Plugins) != 1 || !unavailable(ready.Plugins[0].State) ||
		(ready.Plugins[0].State == "backoff") != (ready.Plugins[0].NextAttempt != nil) {
		t.Fatalf("/readyz during the crash loop = %d %+v", code, ready)
	}
	if n := strings.Count(m.logs(), "plugin restart failed"); n > st.StartFailures+2 {
		t.Fatalf("%d restart failures logged for %d counted: restarts are not backing off", n, st.StartFailures)
	}
	// A call during the backoff answers 503 provider_unavailable, not a hang.
	var e apiError
	if code := m.do("POST", "/v1/records", map[string]any{"records": []map[string]any{{"scope": "realm", "kind": "fact", "title": "t", "body": "b"}}}, &e); code != 503 || e.Error.Code != "provider_unavailable" {
		t.Fatalf("write during the crash loop = %d %+v", code, e)
	}

	replace(good)
	waitPlugin(t, m, "notes", "recovery once the executable is good", 90*time.Second, func(st pluginState) bool {
		return st.State == "ready" && st.Healthy && st.StartFailures == 0
	})
	if code := m.do("GET", "/readyz", nil, nil); code != 200 {
		t.Fatalf("/readyz after recovery = %d", code)
	}
	remember(t, m, map[string]any{"scope": "realm", "kind": "fact", "title": "back", "body": "serving again"})
}

// TestKilledProviderLosesNoAcknowledgedWrite (each provider): writers
// post records concurrently while the provider plugin is killed with
// SIGKILL, so the kill lands in the middle of calls. A write whose plugin
// died under it is retried on the restarted plugin: every write is
// acknowledged, and every acknowledged record is still there.
func TestKilledProviderLosesNoAcknowledgedWrite(t *testing.T) {
	t.Parallel()
	for _, pc := range providerConfigs {
		t.Run(pc.plugin, func(t *testing.T) {
			t.Parallel()
			m := startMemhost(t, providerDeployment(pc.plugin, pc.config), envFor(t, pc.env)...)
			pid := pluginPids(t, m)[0]
			const writers, perWriter = 3, 20
			type acked struct{ id, title string }
			var (
				mu      sync.Mutex
				ok      []acked
				refused []string
				wg      sync.WaitGroup
				once    sync.Once
				killed  time.Time
			)
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range perWriter {
						if w == 0 && i == perWriter/3 {
							once.Do(func() { syscall.Kill(pid, syscall.SIGKILL); killed = time.Now() })
						}
						title := fmt.Sprintf("durable note %d-%d", w, i)
						a := m.timed("POST", "/v1/records", map[string]any{"records": []map[string]any{{
							"scope": "realm", "kind": "fact", "title": title, "body": fmt.Sprintf("body of note %d-%d", w, i),
						}}})
						var out struct {
							IDs []string `json:"ids"`
						}
						mu.Lock()
						if a.code == 200 && json.Unmarshal([]byte(a.body), &out) == nil && len(out.IDs) == 1 {
							ok = append(ok, acked{out.IDs[0], title})
						} else {
							refused = append(refused, fmt.Sprintf("%s: %d %s %v", title, a.code, a.body, a.err))
						}
						mu.Unlock()
					}
				}()
			}
			wg.Wait()
			if killed.IsZero() {
				t.Fatal("the plugin was never killed")
			}
			if len(refused) > 0 {
				t.Fatalf("%d of %d writes not acknowledged across the kill:\n%s\n%s", len(refused), writers*perWriter, strings.Join(refused, "\n"), m.logs())
			}
			st := pluginStates(t, m)["main"]
			if !st.Healthy || st.Pid == pid || st.Restarts != 1 {
				t.Fatalf("plugin after the kill = %+v, want one restart on a new pid", st)
			}
			for _, a := range ok {
				var rec struct {
					ID    string `json:"id"`
					Title string `json:"title"`
				}
				if code := m.do("GET", "/v1/records/"+a.id, nil, &rec); code != 200 || rec.Title != a.title {
					t.Fatalf("acknowledged record %s (%q) lost after kill -9: status %d %+v", a.id, a.title, code, rec)
				}
			}
		})
	}
}
