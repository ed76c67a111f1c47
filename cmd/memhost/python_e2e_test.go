package main

import (
	"bufio"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk/conformance"
)

// python is the interpreter script plugins are tested with: Debian's,
// where python3-grpcio and python3-protobuf are installed.
const python = "/usr/bin/python3"

// needPython skips, as the postgres tests do without PostgreSQL, when the
// Python SDK cannot run here; .ci/run installs what it needs.
func needPython(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Python plugin processes")
	}
	if out, err := exec.Command(python, "-c", "import grpc, google.protobuf, cryptography").CombinedOutput(); err != nil {
		t.Skipf("%s cannot run the Python SDK (apt-get install python3-grpcio python3-protobuf python3-cryptography): %v %s", python, err, out)
	}
}

// pythonPluginTree lays out the example Python provider as `make build`
// does: a script tree in pluginDir holding the entry script and the SDK
// package, without bytecode caches. It answers the script's path.
func pythonPluginTree(t *testing.T, pluginDir string) string {
	t.Helper()
	root := testbin.ModuleRoot(t)
	tree := filepath.Join(pluginDir, "sqlitepy")
	copyFile(t, filepath.Join(root, "examples/python-sqlite/main.py"), filepath.Join(tree, "main.py"), 0o755)
	sdkDir := filepath.Join(root, "sdk/python/memhost_plugin")
	err := filepath.WalkDir(sdkDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".py") {
			return err
		}
		rel, _ := filepath.Rel(sdkDir, p)
		copyFile(t, p, filepath.Join(tree, "memhost_plugin", rel), 0o644)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(tree, "main.py")
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		t.Fatal(err)
	}
}

var pythonBadConfigs = []json.RawMessage{
	json.RawMessage(`{"path":""}`),
	json.RawMessage(`{"path":42}`),
}

// TestPythonProviderConformance runs the Go conformance kit against the
// example Python provider's own process, started as the host starts a
// plugin (mutual TLS, its socket directory, SIGKILL once).
func TestPythonProviderConformance(t *testing.T) {
	needPython(t)
	script := pythonPluginTree(t, testbin.ShortTempDir(t))
	conformance.RunProvider(t, conformance.Target{
		Binary:     script,
		Config:     func(string) json.RawMessage { return json.RawMessage(`{}`) },
		BadConfigs: pythonBadConfigs,
	})
}

// installPythonPlugin lays out the example in a fresh plugin directory
// and writes its manifest with `memhost plugins manifest --interpreter`.
func installPythonPlugin(t *testing.T) (pluginDir, script string) {
	t.Helper()
	pluginDir = testbin.ShortTempDir(t)
	script = pythonPluginTree(t, pluginDir)
	out, err := exec.Command(testbin.Build(t, "./cmd/memhost"), "plugins", "manifest", "--interpreter", python,
		"--interpreter-arg=-B", "--interpreter-arg=-E", "--interpreter-arg=-s", script).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sqlitepy.plugin.json") {
		t.Fatalf("plugins manifest: %v\n%s", err, out)
	}
	return pluginDir, script
}

const pythonConfig = `
provider "notes" {
  plugin = "sqlitepy"
  config = { path = "notes.sqlite" }
}
`

// TestPythonProviderServe loads the example Python provider into a stock
// `memhost serve` by its manifest: its log lines reach the host's log,
// and no acknowledged write is lost across a restart of memhost, a kill -9
// of the plugin, or a kill -9 of memhost (after which the plugin exits on
// its own and removes its socket directory).
func TestPythonProviderServe(t *testing.T) {
	needPython(t)
	pluginDir, _ := installPythonPlugin(t)
	tmp := testbin.ShortTempDir(t)
	cfgPath, dataDir := writeConfigIn(t, pluginDir, pythonConfig)
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
			t.Fatalf("recall(%q) through the Python plugin = %+v, want %d hits, %s first\n%s", query, got, n, id, m.logs())
		}
	}
	want(m, "staging dns", ids[0], 2)
	if logs := m.logs(); !strings.Contains(logs, "store opened") || !strings.Contains(logs, "notes") {
		t.Errorf("the plugin's log line did not reach the host's log under its instance name:\n%s", logs)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "notes.sqlite")); err != nil {
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
	// A Python process takes a second or two to start, longer than a
	// recall's deadline, so calls during the restart may answer 503.
	for attempt := 0; ; attempt++ {
		var got recallAnswer
		code := m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "dana"}, "query": "pager rota"}, &got)
		if code == 200 {
			if len(got.Hits) != 1 || got.Hits[0].Record.ID != late[0] {
				t.Fatalf("recall after kill -9 = %+v, want the acknowledged write %s", got, late[0])
			}
			break
		}
		if code != 503 || attempt == 50 {
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
			t.Fatalf("the Python plugin (pid %d) outlived its killed host", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if dirs, _ := filepath.Glob(filepath.Join(tmp, "mhsock-*")); len(dirs) > 0 {
		t.Errorf("the Python plugin of a killed host left its socket directory: %v", dirs)
	}
	if m, err = startWithConfig(t, cfgPath, dataDir, "TMPDIR="+tmp); err != nil {
		t.Fatal(err)
	}
	want(m, "backup bucket", last[0], 1)
	want(m, "staging dns", ids[0], 2)
}

// TestPythonProviderTampered: a changed file anywhere in the script tree,
// or another interpreter, is refused by `memhost plugins verify` and
// `memhost serve` with one line naming the plugin and the file.
func TestPythonProviderTampered(t *testing.T) {
	needPython(t)
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, pluginDir, script string)
		want   string
	}{
		{"a module changed", func(t *testing.T, pluginDir, _ string) {
			p := filepath.Join(pluginDir, "sqlitepy", "memhost_plugin", "text.py")
			data, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, append(data, "\n# changed\n"...), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "sha256 does not match manifest tree_sha256"},
		{"a module added", func(t *testing.T, pluginDir, _ string) {
			copyFile(t, filepath.Join(pluginDir, "sqlitepy", "main.py"), filepath.Join(pluginDir, "sqlitepy", "sitecustomize.py"), 0o644)
		}, "sha256 does not match manifest tree_sha256"},
		{"another interpreter", func(t *testing.T, pluginDir, _ string) {
			sum, err := pluginhost.FileSHA256(python)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(pluginDir, "sqlitepy.plugin.json")
			data, err := os.ReadFile(path)
			if err != nil || !strings.Contains(string(data), sum) {
				t.Fatalf("manifest %s does not pin %s's sha256 %s (%v)", path, python, sum, err)
			}
			if err := os.WriteFile(path, []byte(strings.Replace(string(data), sum, strings.Repeat("0", 64), 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "interpreter " + python + ": refused: sha256 does not match manifest interpreter.sha256"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pluginDir, script := installPythonPlugin(t)
			tc.tamper(t, pluginDir, script)
			cfgPath, dataDir := writeConfigIn(t, pluginDir, pythonConfig)
			out, err := exec.Command(testbin.Build(t, "./cmd/memhost"), "plugins", "verify", "--config", cfgPath).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "plugin sqlitepy ("+script+")") || !strings.Contains(string(out), tc.want) {
				t.Fatalf("plugins verify: %v, want a refusal naming %s and saying %q:\n%s", err, script, tc.want, out)
			}
			if m, err := startServe(t, dataDir, []string{"--config", cfgPath, "--require-all"}, nil); err == nil {
				m.stop()
				t.Fatalf("memhost serve started with a tampered plugin:\n%s", m.logs())
			} else if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("memhost serve: %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// TestReattachDebugPlugin: a plugin a developer started with --debug (as
// under a debugger) prints the MEMHOST_REATTACH_PLUGINS line; memhost
// serve, given it, attaches to that very process instead of starting one,
// and serves through it. Both SDKs: the Go sqlite plugin and the Python
// example.
func TestReattachDebugPlugin(t *testing.T) {
	needPython(t)
	pluginDir, script := installPythonPlugin(t)
	testbin.InstallPlugin(t, pluginDir, testbin.Build(t, "./plugins/sqlite/cmd/memhost-plugin-sqlite"))
	for _, tc := range []struct {
		name, plugin string
		cmd          []string
	}{
		{"python", "sqlitepy", []string{script, "--debug"}},
		{"go", "sqlite", []string{filepath.Join(pluginDir, "memhost-plugin-sqlite"), "--debug"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfgPath, dataDir := writeConfigIn(t, pluginDir, `
provider "notes" {
  plugin = "`+tc.plugin+`"
  config = { path = "`+filepath.Join(t.TempDir(), "debug.db")+`" }
}
`)
			dbg := exec.Command(tc.cmd[0], tc.cmd[1:]...)
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
		})
	}
}
