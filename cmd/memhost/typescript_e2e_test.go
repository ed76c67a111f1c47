package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk/conformance"
)

// needNode skips, as the Python tests do without Python's packages, when
// node 20+ and npm are missing; .ci/run installs them.
func needNode(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Node plugin processes")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed (apt-get install nodejs npm)")
	}
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("npm is not installed (apt-get install nodejs npm)")
	}
	if node, err = filepath.EvalSymlinks(node); err != nil {
		t.Fatal(err)
	}
	return node
}

var tsTree struct {
	once sync.Once
	dir  string
	err  error
}

// builtTypeScriptTree builds the TypeScript SDK and its example once per
// test binary (npm ci when node_modules is missing, then tsc) and lays the
// example out as a script tree with the SDK's memhost-plugin-tree, under
// the SDK's gitignored dist/.
func builtTypeScriptTree(t *testing.T) string {
	t.Helper()
	tsTree.once.Do(func() {
		sdk := filepath.Join(testbin.ModuleRoot(t), "sdk", "typescript")
		run := func(name string, args ...string) {
			if tsTree.err != nil {
				return
			}
			cmd := exec.Command(name, args...)
			cmd.Dir = sdk
			if out, err := cmd.CombinedOutput(); err != nil {
				tsTree.err = fmt.Errorf("%s: %w\n%s", strings.Join(append([]string{name}, args...), " "), err, out)
			}
		}
		if _, err := os.Stat(filepath.Join(sdk, "node_modules")); err != nil {
			run("npm", "ci", "--no-audit", "--no-fund", "--prefer-offline")
		}
		run("npm", "run", "build")
		tsTree.dir = filepath.Join(sdk, "dist", "tree", "jsonlts")
		if tsTree.err == nil {
			tsTree.err = os.RemoveAll(filepath.Dir(tsTree.dir))
		}
		run("node", "scripts/plugin-tree.mjs", tsTree.dir, "dist/examples/jsonl.js", "dist/src", "dist/plugin.proto")
	})
	if tsTree.err != nil {
		t.Fatalf("building the TypeScript example: %v", tsTree.err)
	}
	return tsTree.dir
}

// typescriptPluginTree copies the example's script tree into pluginDir
// (as `make example-typescript` lays it out) and answers the entry
// script's path.
func typescriptPluginTree(t *testing.T, pluginDir string) string {
	t.Helper()
	tree := filepath.Join(pluginDir, "jsonlts")
	if err := os.CopyFS(tree, os.DirFS(builtTypeScriptTree(t))); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(tree, "main.mjs")
}

// TestTypeScriptProviderConformance runs the Go conformance kit against
// the example TypeScript provider's own process, started as the host
// starts a plugin (mutual TLS, its socket directory, SIGKILL once).
func TestTypeScriptProviderConformance(t *testing.T) {
	needNode(t)
	script := typescriptPluginTree(t, testbin.ShortTempDir(t))
	conformance.RunProvider(t, conformance.Target{
		Binary: script,
		Config: func(dir string) json.RawMessage {
			return json.RawMessage(`{"path":"` + filepath.Join(dir, "kit.jsonl") + `"}`)
		},
		BadConfigs: []json.RawMessage{json.RawMessage(`{"path":""}`), json.RawMessage(`{"path":42}`), json.RawMessage(`{"paht":"x"}`)},
	})
}

// installTypeScriptPlugin lays out the example in a fresh plugin
// directory and writes its manifest with `memhost plugins manifest
// --interpreter`, pinning node.
func installTypeScriptPlugin(t *testing.T, node string) (pluginDir, script string) {
	t.Helper()
	pluginDir = testbin.ShortTempDir(t)
	script = typescriptPluginTree(t, pluginDir)
	out, err := exec.Command(testbin.Build(t, "./cmd/memhost"), "plugins", "manifest", "--interpreter", node, script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "jsonlts.plugin.json") {
		t.Fatalf("plugins manifest: %v\n%s", err, out)
	}
	return pluginDir, script
}

const typescriptConfig = `
provider "notes" {
  plugin = "jsonlts"
  config = { path = "notes.jsonl" }
}
`

// TestTypeScriptProviderServe loads the example TypeScript provider into
// a stock `memhost serve` by its manifest: its log lines reach the host's
// log, and no acknowledged write is lost across a restart of memhost, a
// kill -9 of the plugin, or a kill -9 of memhost (after which the plugin
// exits on its own and removes its socket directory).
func TestTypeScriptProviderServe(t *testing.T) {
	node := needNode(t)
	pluginDir, _ := installTypeScriptPlugin(t, node)
	tmp := testbin.ShortTempDir(t)
	cfgPath, dataDir := writeConfigIn(t, pluginDir, typescriptConfig)
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
			t.Fatalf("recall(%q) through the TypeScript plugin = %+v, want %d hits, %s first\n%s", query, got, n, id, m.logs())
		}
	}
	want(m, "staging dns", ids[0], 2)
	if logs := m.logs(); !strings.Contains(logs, "store opened") || !strings.Contains(logs, "notes") {
		t.Errorf("the plugin's log line did not reach the host's log under its instance name:\n%s", logs)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "notes.jsonl")); err != nil {
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
	// Node takes a moment to start, which may be longer than a recall's
	// deadline, so calls during the restart may answer 503.
	for attempt := 0; ; attempt++ {
		var got recallAnswer
		code := m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "dana"}, "query": "pager rota"}, &got)
		if code == 200 {
			if len(got.Hits) != 1 || got.Hits[0].Record.ID != late[0] {
				t.Fatalf("recall after kill -9 = %+v, want the acknowledged write %s", got, late[0])
			}
			break
		}
		if code != 503 || attempt == 100 {
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
			t.Fatalf("the TypeScript plugin (pid %d) outlived its killed host", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "mhsock-*")); len(dirs) > 0 {
		t.Errorf("the TypeScript plugin of a killed host left its socket directory: %v", dirs)
	}
	if m, err = startWithConfig(t, cfgPath, dataDir, "TMPDIR="+tmp); err != nil {
		t.Fatal(err)
	}
	want(m, "backup bucket", last[0], 1)
	want(m, "staging dns", ids[0], 2)
}

// TestTypeScriptProviderTampered: the trust check covers the whole tree,
// node_modules included: a changed dependency is refused by `memhost
// serve` with one line naming the entry script.
func TestTypeScriptProviderTampered(t *testing.T) {
	node := needNode(t)
	pluginDir, script := installTypeScriptPlugin(t, node)
	p := filepath.Join(pluginDir, "jsonlts", "node_modules", "@grpc", "grpc-js", "package.json")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgPath, dataDir := writeConfigIn(t, pluginDir, typescriptConfig)
	const refusal = "sha256 does not match manifest tree_sha256"
	if m, err := startWithConfig(t, cfgPath, dataDir); err == nil {
		m.stop()
		t.Fatalf("memhost serve started with a tampered plugin:\n%s", m.logs())
	} else if !strings.Contains(err.Error(), refusal) || !strings.Contains(err.Error(), "("+script+"): refused") {
		t.Fatalf("memhost serve: %v, want a refusal naming %s and saying %q", err, script, refusal)
	}
}

// TestTypeScriptReattachDebugPlugin: the example started by hand with
// --debug prints the MEMHOST_REATTACH_PLUGINS line, and memhost serve,
// given it, serves through that very process.
func TestTypeScriptReattachDebugPlugin(t *testing.T) {
	node := needNode(t)
	pluginDir, script := installTypeScriptPlugin(t, node)
	cfgPath, dataDir := writeConfigIn(t, pluginDir, `
provider "notes" {
  plugin = "jsonlts"
  config = { path = "`+filepath.Join(t.TempDir(), "debug.jsonl")+`" }
}
`)
	dbg := exec.Command(node, script, "--debug")
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
	ids := remember(t, m, map[string]any{"scope": "identity:dana", "kind": "fact", "title": "Debugged", "body": "Written through a reattached plugin."})
	if got := recall(t, m, "dana", "reattached plugin"); len(got.Hits) != 1 || got.Hits[0].Record.ID != ids[0] {
		t.Fatalf("recall through the reattached plugin = %+v", got)
	}
}
