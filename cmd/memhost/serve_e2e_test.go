package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/testbin"
)

// TestServeBusyPortFailsAtOnce: the listen address is bound before any
// plugin starts, so a busy port is reported without starting one.
func TestServeBusyPortFailsAtOnce(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cfgPath, _ := writeConfig(t, markdownConfig)
	out, err := testbin.Command(testbin.Build(t, "./cmd/memhost"), "serve", "--config", cfgPath, "--listen", ln.Addr().String()).CombinedOutput()
	if err == nil {
		t.Fatalf("serve started on a busy port:\n%s", out)
	}
	if !strings.Contains(string(out), "listen on "+ln.Addr().String()+": address already in use") {
		t.Fatalf("no listen error:\n%s", out)
	}
	// Said once, in plain words: not Go's "listen tcp ADDR: bind: ...".
	if n := strings.Count(string(out), ln.Addr().String()); n != 1 || strings.Contains(string(out), "listen tcp") {
		t.Fatalf("the listen error names the address %d times or the dialler:\n%s", n, out)
	}
	if strings.Contains(string(out), "plugins started") || strings.Contains(string(out), "plugin started") {
		t.Fatalf("plugins were started before the port was bound:\n%s", out)
	}
}

// TestServeFlagsWinOverConfig: --data-dir and --log-level replace the
// file's values; the start line names the version and the realm map.
func TestServeFlagsWinOverConfig(t *testing.T) {
	t.Parallel()
	cfgPath, fileDataDir := writeConfig(t, markdownConfig)
	flagDataDir := filepath.Join(t.TempDir(), "flagdata")
	inst, err := startWithArgs(t, cfgPath, flagDataDir, "--data-dir", flagDataDir, "--log-level", "debug")
	if err != nil {
		t.Fatal(err)
	}
	remember(t, inst, map[string]any{"scope": "identity:alice", "kind": "fact", "title": "flag data dir", "body": "lands in the flag's directory"})
	if _, err := os.Stat(fileDataDir); err == nil {
		t.Fatalf("the config file's data_dir %s was used despite --data-dir", fileDataDir)
	}
	if _, err := os.Stat(filepath.Join(flagDataDir, "md")); err != nil {
		t.Fatalf("--data-dir was not used: %v", err)
	}
	logs := inst.logs()
	if !strings.Contains(logs, "[DEBUG]") {
		t.Fatalf("--log-level debug logged no debug line:\n%s", logs)
	}
	if !strings.Contains(logs, "version=") || !strings.Contains(logs, `realms="default→notes"`) {
		t.Fatalf("the start line lacks the version or the realm map:\n%s", logs)
	}
}

// TestGracefulShutdownDrainsInFlight: a request in flight when SIGTERM
// arrives is answered before memhost exits.
func TestGracefulShutdownDrainsInFlight(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, markdownConfig)
	pids := pluginPids(t, m)
	pid := pids[0]
	// Hold the request inside the plugin, so it is surely in flight. A
	// write, not a recall: recall paths fail at the 500 ms recall timeout.
	proc := stopProcess(t, pid)
	done := make(chan int, 1)
	go func() {
		resp, err := http.Post(m.base+"/v1/records", "application/json", strings.NewReader(`{"records":[{"scope":"realm","kind":"fact","title":"in flight","body":"during shutdown"}]}`))
		if err != nil {
			done <- -1
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	// SIGTERM only once memhost is serving the request: a request whose
	// header is read after shutdown began is dropped, so a written (or
	// even accepted) request is not yet in flight. A sleep here was not
	// enough on a loaded machine.
	const serving = `memhost_http_requests_in_flight{route="POST /v1/records"} 1`
	eventually(t, "memhost serving the held request", func() bool {
		select {
		case code := <-done:
			t.Fatalf("the in-flight request ended (%d) before the stopped plugin could answer it", code)
		default:
		}
		return strings.Contains(scrape(t, m), serving)
	})
	if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != http.StatusOK {
			t.Fatalf("in-flight request answered %d during shutdown\n%s", code, m.logs())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("in-flight request never answered")
	}
	exited := make(chan error, 1)
	go func() { exited <- m.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("memhost did not exit after draining")
	}
	// It took its plugins with it: the host ends each one it started.
	for _, p := range pids {
		if err := syscall.Kill(p, 0); err == nil {
			t.Errorf("plugin process %d outlived memhost", p)
		}
	}
	// New connections are refused once it has gone.
	if _, err := http.Get(m.base + "/healthz"); err == nil {
		t.Fatal("memhost still answers after shutdown")
	}
}

// TestRequestsPastTheDrainAreAnswered: a request still waiting on a
// plugin when the drain's bound (server.shutdown_timeout_ms) runs out is
// answered with a status (503, the plugin stopped under it) before memhost
// exits, not left to lose its connection without one when the process
// ends, as a write and a reindex held by a stopped plugin were.
func TestRequestsPastTheDrainAreAnswered(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ route, path, body string }{
		{"POST /v1/records", "/v1/records", `{"records":[{"scope":"realm","kind":"fact","title":"in flight","body":"past the drain"}]}`},
		{"POST /v1/admin/reindex", "/v1/admin/reindex", `{"realm":"default"}`},
	} {
		t.Run(c.path, func(t *testing.T) {
			t.Parallel()
			// Neither the call's deadline nor a health check ends the
			// held request: only the host's stop does.
			m := startMemhost(t, markdownConfig+`
server { shutdown_timeout_ms = 1 }
supervisor {
  call_timeout_ms   = 600000
  health_timeout_ms = 600000
}
`)
			// The provider, held stopped past the drain and never
			// continued.
			pids, done := holdOnAStoppedPlugin(t, m, c.route, c.path, c.body)
			if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			var a heldAnswer
			select {
			case a = <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("the held request was never answered\n%s", m.logs())
			}
			if a.err != nil || a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "shut down") && !strings.Contains(a.body, "lost") {
				t.Fatalf("the request held past the drain ended with %d %q (%v), want a 503 saying the plugin stopped\n%s", a.code, a.body, a.err, m.logs())
			}
			m.stop()
			if code := m.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("memhost exited with status %d after a drain that ran out, want 0\n%s", code, m.logs())
			}
			if !strings.Contains(m.logs(), "requests still running at the end of the drain") {
				t.Errorf("the log does not say the drain ran out:\n%s", m.logs())
			}
			waitGone(t, pids)
		})
	}
}

// TestSecondSignalCutsTheDrainShort: a second stop signal during the
// drain stops at once, as servers do: the plugins are stopped under the
// request still running, which is answered 503, and memhost exits cleanly,
// saying once why. It used to be ignored, the host waiting out the whole
// drain (server.shutdown_timeout_ms) on a hung plugin.
func TestSecondSignalCutsTheDrainShort(t *testing.T) {
	t.Parallel()
	for _, second := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(second.String(), func(t *testing.T) {
			t.Parallel()
			// A drain far longer than the test waits: only the second
			// signal ends it.
			m := startMemhost(t, markdownConfig+`
server { shutdown_timeout_ms = 600000 }
supervisor {
  call_timeout_ms   = 600000
  health_timeout_ms = 600000
}
`)
			pids, done := holdOnAStoppedPlugin(t, m, "POST /v1/records", "/v1/records", `{"records":[{"scope":"realm","kind":"fact","title":"in flight","body":"at the second signal"}]}`)
			if err := m.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			eventually(t, "memhost draining", func() bool { return strings.Contains(m.logs(), "shutting down") })
			if err := m.cmd.Process.Signal(second); err != nil {
				t.Fatal(err)
			}
			var a heldAnswer
			select {
			case a = <-done:
			case <-time.After(60 * time.Second):
				t.Fatalf("the held request was not answered after a second signal\n%s", m.logs())
			}
			if a.err != nil || a.code != http.StatusServiceUnavailable {
				t.Fatalf("the request held at the second signal ended with %d %q (%v), want a 503\n%s", a.code, a.body, a.err, m.logs())
			}
			select {
			case <-m.drained:
			case <-time.After(60 * time.Second):
				t.Fatalf("memhost did not exit after a second signal\n%s", m.logs())
			}
			m.cmd.Wait()
			if code := m.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("memhost exited with status %d after a second signal, want 0\n%s", code, m.logs())
			}
			logs := m.logs()
			if n := strings.Count(logs, "second stop signal"); n != 1 || strings.Contains(logs, "end of the drain") {
				t.Errorf("the log says %d times that a second signal cut the drain short, want once and no drain run out:\n%s", n, logs)
			}
			waitGone(t, pids)
		})
	}
}

// TestUncleanPathsAreNoEndpoint: a path with an empty, . or .. segment is
// no endpoint, answered in the error envelope, with the console on (the
// default) as without it. The console's mux, in front of the API, used
// to redirect such a path before the API's check ran: a POST to
// /v1/records/x/../../recall was sent on to /v1/recall, ahead of
// authentication.
func TestUncleanPathsAreNoEndpoint(t *testing.T) {
	t.Parallel()
	for _, cfg := range []string{markdownConfig, markdownConfig + "\nui = false\n"} {
		m := startMemhost(t, cfg)
		noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/v1//records", ""},
			{"POST", "/v1/records/x/../../recall", `{"identity":{"id":"alice"},"query":"q"}`},
			{"GET", "/./metrics", ""},
			{"GET", "/ui/./", ""},
		} {
			req, _ := http.NewRequest(c.method, m.base, strings.NewReader(c.body))
			req.URL.Opaque = c.path // sent as written
			req.Header.Set("Content-Type", "application/json")
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 404 || !strings.Contains(string(data), "clean form") {
				t.Errorf("%s %s = %d (Location %q) %.120s, want 404 in the envelope", c.method, c.path, resp.StatusCode, resp.Header.Get("Location"), data)
			}
		}
	}
}

// TestStopWhileStartingExitsCleanly: SIGTERM while a plugin is still
// configuring (before memhost listens) stops memhost as it does once it
// serves: exit status 0, the plugin gone, and no start reported failed
// for the start the host itself gave up.
func TestStopWhileStartingExitsCleanly(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfigIn(t, chattyDir(t), `
provider "talker" {
  plugin = "chatty"
  config = { hang = true }
}
realm "default" { provider = "talker" }
coordinator { compactor = "" }
`)
	cmd := testbin.Command(testbin.Build(t, "./cmd/memhost"), "serve", "--config", cfgPath, "--data-dir", dataDir)
	var out bytes.Buffer
	var mu sync.Mutex
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			mu.Lock()
			out.WriteString(sc.Text() + "\n")
			mu.Unlock()
		}
	}()
	logs := func() string { mu.Lock(); defer mu.Unlock(); return out.String() }
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(logs(), "chatty configured") {
		if time.Now().After(deadline) {
			t.Fatalf("the plugin never began configuring:\n%s", logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	children := childPids(cmd.Process.Pid)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { <-copied; done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("memhost did not stop within 15s of SIGTERM while starting:\n%s", logs())
	}
	if err != nil {
		t.Errorf("memhost stopped while starting exited with %v, want status 0:\n%s", err, logs())
	}
	if strings.Contains(logs(), "failed to start") || strings.Contains(logs(), "context canceled") {
		t.Errorf("a start given up by the host's own stop was reported as a failure:\n%s", logs())
	}
	waitGone(t, children)
}

// stopProcess stops pid (SIGSTOP) and waits until it has stopped: the
// signal takes effect asynchronously. A process gone or a zombie (its pid
// still signals without an error) fails the test. The answer signals the
// process itself (a pidfd), never a later one given the same pid, as the
// cleanup's SIGCONT does: a test's late signal to a pid reused by another
// test's plugin would continue or kill that one.
func stopProcess(t *testing.T, pid int) *os.Process {
	t.Helper()
	proc, err := os.FindProcess(pid)
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("stop pid %d: %v", pid, err)
	}
	t.Cleanup(func() { _ = proc.Signal(syscall.SIGCONT); _ = proc.Release() })
	for deadline := time.Now().Add(10 * time.Second); ; {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		state := byte('?')
		if i := bytes.LastIndexByte(data, ')'); err == nil && i >= 0 && i+2 < len(data) {
			state = data[i+2]
		}
		switch {
		case state == 'T':
			return proc
		case err != nil || state == 'Z' || time.Now().After(deadline):
			t.Fatalf("pid %d did not stop: state %c (%v)", pid, state, err)
		}
		time.Sleep(time.Millisecond)
	}
}

// childPids answers the processes whose parent is pid.
func childPids(pid int) []int {
	var kids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		data, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		// The fields after the command's closing parenthesis: state, ppid.
		rest := string(data[bytes.LastIndexByte(data, ')')+1:])
		f := strings.Fields(rest)
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			if p, err := strconv.Atoi(filepath.Base(filepath.Dir(d))); err == nil {
				kids = append(kids, p)
			}
		}
	}
	return kids
}

// TestOversizedHeaderIsRefused: a request's header is bounded far below
// Go's 1 MiB default, so connections trickling large headers cannot make
// the host hold a megabyte each before any token is read.
func TestOversizedHeaderIsRefused(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, markdownConfig)
	req, _ := http.NewRequest("GET", m.base+"/healthz", nil)
	req.Header.Set("X-Padding", strings.Repeat("a", 128<<10))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("a 128 KiB header = %d, want 431", resp.StatusCode)
	}
	// An ordinary request still passes.
	if code := m.do("GET", "/healthz", nil, nil); code != 200 {
		t.Fatalf("healthz = %d", code)
	}
}

// heldAnswer is what a request held on a stopped plugin was answered.
type heldAnswer struct {
	code int
	body string
	err  error
}

// holdOnAStoppedPlugin stops m's provider plugin (SIGSTOP) and sends a POST
// of body to path, answering the plugins' pids and the request's answer
// once memhost is serving it (its route in flight).
func holdOnAStoppedPlugin(t *testing.T, m *instance, route, path, body string) ([]int, <-chan heldAnswer) {
	t.Helper()
	pids := pluginPids(t, m)
	stopProcess(t, pids[0])
	done := make(chan heldAnswer, 1)
	go func() {
		resp, err := http.Post(m.base+path, "application/json", strings.NewReader(body))
		if err != nil {
			done <- heldAnswer{err: err}
			return
		}
		data, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- heldAnswer{code: resp.StatusCode, body: string(data), err: err}
	}()
	serving := `memhost_http_requests_in_flight{route="` + route + `"} 1`
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(scrape(t, m), serving) {
		select {
		case a := <-done:
			// Answered although its plugin is stopped: say with what,
			// and what the process is now.
			status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pids[0]))
			var now pluginsAnswer
			m.do("GET", "/v1/plugins", nil, &now)
			t.Fatalf("the request to stopped plugin %d was answered %d %q (%v) before it was seen in flight; the process now:\n%s\nplugins now: %+v\n%s", pids[0], a.code, a.body, a.err, status, now, m.logs())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("memhost serving the held request: not within 60 s\n%s", m.logs())
		}
	}
	return pids, done
}
