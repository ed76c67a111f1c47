package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/testbin"
)

// notesConfig configures provider instance "notes" of plugin, storing at
// path (relative to the data directory).
func notesConfig(plugin, path string) string {
	return fmt.Sprintf("provider \"notes\" {\n  plugin = %q\n  config = { path = %q }\n}\n", plugin, path)
}

// writeScriptManifest writes the manifest of the script plugin name (its
// entry script inside its tree) with `memhost plugins manifest
// --interpreter`, pinning interpreter and its arguments.
func writeScriptManifest(t *testing.T, name, script, interpreter string, args ...string) {
	t.Helper()
	cmd := []string{"plugins", "manifest", "--interpreter", interpreter}
	for _, a := range args {
		cmd = append(cmd, "--interpreter-arg="+a)
	}
	out, err := exec.Command(testbin.Build(t, "./cmd/memhost"), append(cmd, script)...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), name+".plugin.json") {
		t.Fatalf("plugins manifest: %v\n%s", err, out)
	}
}

// checkScriptProviderServe loads an example script provider (Python,
// TypeScript) into a stock `memhost serve` by its manifest, with cfg
// naming it as instance "notes" that writes dataFile under the data
// directory: its log lines reach the host's log, and no acknowledged write
// is lost across a restart of memhost, a kill -9 of the plugin, or a kill
// -9 of memhost (after which the plugin exits on its own and removes its
// socket directory).
func checkScriptProviderServe(t *testing.T, lang, pluginDir, cfg, dataFile string) {
	t.Helper()
	tmp := t.TempDir()
	cfgPath, dataDir := writeConfigIn(t, pluginDir, cfg)
	m, err := startWithConfig(t, cfgPath, dataDir, "TMPDIR="+tmp)
	if err != nil {
		t.Fatal(err)
	}
	ids := remember(t, m,
		map[string]any{"scope": "identity:dana", "kind": "gotcha", "title": "Flaky staging DNS", "body": "Staging DNS flaps on Mondays; retry once."},
		map[string]any{"scope": "identity:dana", "kind": "fact", "title": "Deploy window", "body": "Deploys to staging run at noon."},
	)
	want := func(m *instance, query, id string, n int) {
		t.Helper()
		got := recall(t, m, "dana", query)
		if len(got.Hits) != n || got.Hits[0].Record.ID != id {
			t.Fatalf("recall(%q) through the %s plugin = %+v, want %d hits, %s first\n%s", query, lang, got, n, id, m.logs())
		}
	}
	want(m, "staging dns", ids[0], 2)
	// The plugin's line crosses its stderr stream on its own goroutine,
	// not before Configure answers: wait for it.
	waitForLog(t, m, "store opened")
	if logs := m.logs(); !strings.Contains(logLine(logs, "store opened"), "notes") {
		t.Errorf("the plugin's log line did not reach the host's log under its instance name:\n%s", logs)
	}
	if _, err := os.Stat(filepath.Join(dataDir, dataFile)); err != nil {
		t.Fatalf("the plugin did not write under the data directory: %v", err)
	}

	m.stop()
	if m, err = startWithConfig(t, cfgPath, dataDir, "TMPDIR="+tmp); err != nil {
		t.Fatal(err)
	}
	want(m, "staging dns", ids[0], 2)

	// kill -9 the plugin right after an acknowledged write.
	late := remember(t, m, map[string]any{"scope": "identity:dana", "kind": "fact", "title": "Pager rota", "body": "The pager moves to Ines on Fridays."})
	pid := pluginPids(t, m)[0]
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// An interpreter takes a second or two to start, longer than a
	// recall's deadline, so calls during the restart may answer 503, and on
	// a loaded machine the first call to the new process may run past the
	// deadline (504).
	for attempt := 0; ; attempt++ {
		var got recallAnswer
		code := m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "dana"}, "query": "pager rota"}, &got)
		if code == 200 {
			if len(got.Hits) != 1 || got.Hits[0].Record.ID != late[0] {
				t.Fatalf("recall after kill -9 = %+v, want the acknowledged write %s", got, late[0])
			}
			break
		}
		if (code != 503 && code != 504) || attempt == 100 {
			t.Fatalf("recall after kill -9 = %d (attempt %d)\n%s", code, attempt, m.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if newPid := pluginPids(t, m)[0]; newPid == pid {
		t.Fatalf("the plugin was not restarted after kill -9 (pid %d)", pid)
	}

	// kill -9 memhost right after an acknowledged write: the plugin
	// notices, closes its store and goes, leaving no socket behind.
	last := remember(t, m, map[string]any{"scope": "identity:dana", "kind": "fact", "title": "Backup bucket", "body": "Backups land in the cold bucket."})
	pid = pluginPids(t, m)[0]
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m.cmd.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the %s plugin (pid %d) outlived its killed host", lang, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "mhsock-*")); len(dirs) > 0 {
		t.Errorf("the %s plugin of a killed host left its socket directory: %v", lang, dirs)
	}
	if m, err = startWithConfig(t, cfgPath, dataDir, "TMPDIR="+tmp); err != nil {
		t.Fatal(err)
	}
	want(m, "backup bucket", last[0], 1)
	want(m, "staging dns", ids[0], 2)
}

// checkReattach starts cmd (a plugin with --debug, as under a debugger),
// reads the MEMHOST_REATTACH_PLUGINS line it prints, and checks that
// memhost serve, given it, attaches to that very process instead of
// starting one, and serves through it. dbPath is the instance's store.
func checkReattach(t *testing.T, pluginDir, plugin, dbPath string, cmd []string) {
	t.Helper()
	cfgPath, dataDir := writeConfigIn(t, pluginDir, notesConfig(plugin, dbPath))
	dbg := exec.Command(cmd[0], cmd[1:]...)
	dbg.Dir = t.TempDir()
	stdout, err := dbg.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := dbg.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dbg.Process.Kill(); dbg.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the debug plugin's reattach line: %v", err)
	}
	value, ok := strings.CutPrefix(strings.TrimSpace(line), "MEMHOST_REATTACH_PLUGINS='")
	if !ok || !strings.HasSuffix(value, "'") {
		t.Fatalf("the debug plugin printed %q, want MEMHOST_REATTACH_PLUGINS='…'", line)
	}
	m, err := startWithConfig(t, cfgPath, dataDir, "MEMHOST_REATTACH_PLUGINS="+strings.TrimSuffix(value, "'"))
	if err != nil {
		t.Fatal(err)
	}
	if pids := pluginPids(t, m); len(pids) != 1 || pids[0] != dbg.Process.Pid {
		t.Fatalf("memhost serves plugin pids %v, want the debug process %d\n%s", pids, dbg.Process.Pid, m.logs())
	}
	if !strings.Contains(m.logs(), "the host did not start") {
		t.Errorf("memhost did not warn that it attached to a process it did not start:\n%s", m.logs())
	}
	ids := remember(t, m, map[string]any{"scope": "identity:dana", "kind": "fact", "title": "Debugged", "body": "Written through a reattached plugin."})
	if got := recall(t, m, "dana", "reattached plugin"); len(got.Hits) != 1 || got.Hits[0].Record.ID != ids[0] {
		t.Fatalf("recall through the reattached plugin = %+v", got)
	}
}
