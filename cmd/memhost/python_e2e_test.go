package main

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk/conformance"
	sdkhost "github.com/memhost/memhost/sdk/host"
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
// plugin (mutual TLS, its socket directory, SIGKILL once): by the
// manifest `memhost plugins manifest --interpreter` wrote, through the
// pinned interpreter, the manifest checked as the host checks it (the
// kit's Manifest check refused every script's manifest).
func TestPythonProviderConformance(t *testing.T) {
	t.Parallel()
	needPython(t)
	pluginDir, script := installPythonPlugin(t)
	conformance.RunProvider(t, conformance.Target{
		Binary:     script,
		Manifest:   filepath.Join(pluginDir, "sqlitepy"+sdkhost.ManifestSuffix),
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
	writeScriptManifest(t, "sqlitepy", script, python, "-B", "-E", "-s")
	return pluginDir, script
}

var pythonConfig = notesConfig("sqlitepy", "notes.sqlite")

// TestPythonProviderServe loads the example Python provider into a stock
// `memhost serve` by its manifest and checks its log lines and that no
// acknowledged write is lost across restarts and kill -9s of the plugin
// and of memhost (checkScriptProviderServe).
func TestPythonProviderServe(t *testing.T) {
	t.Parallel()
	needPython(t)
	pluginDir, _ := installPythonPlugin(t)
	checkScriptProviderServe(t, "Python", pluginDir, pythonConfig, "notes.sqlite")
}

// TestPythonProviderTampered: a changed file anywhere in the script tree,
// or another interpreter, is refused by `memhost plugins verify` and
// `memhost serve` with one line naming the plugin and the file.
func TestPythonProviderTampered(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
			checkReattach(t, pluginDir, tc.plugin, filepath.Join(t.TempDir(), "debug.db"), tc.cmd)
		})
	}
}

// TestServeAnswersWhilePluginsStart: while a plugin takes its time to
// configure (this one never returns), memhost answers on its port:
// /healthz that it is alive, /readyz and every API request 503 with a
// Retry-After. Before, the port was bound first and connections were
// accepted but never answered until the slowest plugin's start timeout
// (two minutes) passed (from an outside review).
func TestServeAnswersWhilePluginsStart(t *testing.T) {
	t.Parallel()
	needPython(t)
	pluginDir := testbin.ShortTempDir(t)
	installHangingPlugin(t, pluginDir)
	addr := freeAddr(t)
	cfgPath, _ := writeConfigIn(t, pluginDir, "provider \"notes\" {\n  plugin = \"hangpy\"\n}\n")
	cfg, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, []byte(strings.Replace(string(cfg), "127.0.0.1:0", addr, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := testbin.Command(testbin.Build(t, "./cmd/memhost"), "serve", "--config", cfgPath)
	var stderr strings.Builder // written by exec's copier, read after it when the test fails
	var mu sync.Mutex
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return stderr.Write(p) })
	logged := func() string { mu.Lock(); defer mu.Unlock(); return stderr.String() }
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	client := &http.Client{Timeout: 10 * time.Second}
	var health *http.Response
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if r, err := client.Get("http://" + addr + "/healthz"); err == nil {
			health = r
			r.Body.Close()
			break
		}
	}
	if health == nil || health.StatusCode != http.StatusOK {
		t.Fatalf("/healthz while the plugin starts = %v, want 200\n%s", health, logged())
	}
	for _, c := range []struct{ method, path, body, want string }{
		{"GET", "/readyz", "", `"starting"`},
		{"POST", "/v1/recall", `{"identity":{"id":"alice"},"query":"x"}`, `"unavailable"`},
	} {
		req, _ := http.NewRequest(c.method, "http://"+addr+c.path, strings.NewReader(c.body))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s while the plugin starts: %v", c.method, c.path, err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(data), c.want) || (c.method == "POST" && resp.Header.Get("Retry-After") == "") {
			t.Errorf("%s %s while the plugin starts = %d %s (Retry-After %q), want 503 holding %s", c.method, c.path, resp.StatusCode, data, resp.Header.Get("Retry-After"), c.want)
		}
	}
	if strings.Contains(logged(), "memhost listening") {
		t.Fatal("the plugin was configured: the test saw no start in progress")
	}
}

// installHangingPlugin installs in pluginDir a Python provider, hangpy,
// whose store never opens.
func installHangingPlugin(t *testing.T, pluginDir string) {
	t.Helper()
	tree := pythonPluginTree(t, pluginDir)
	script := filepath.Join(filepath.Dir(tree), "hang.py")
	hang := "import time\nfrom memhost_plugin import KVProvider, serve\n\n\ndef open_store(config):\n    time.sleep(3600)\n\n\nif __name__ == \"__main__\":\n    serve(KVProvider(\"hangpy\", \"0.1.0\", open_store))\n"
	if err := os.WriteFile(script, []byte(hang), 0o755); err != nil {
		t.Fatal(err)
	}
	writeScriptManifest(t, "hangpy", script, python, "-B", "-E", "-s")
}

// TestServeWithoutASlowPlugin: a plugin whose store never opens holds
// only its own realm. Past supervisor.boot_wait_ms memhost serves the
// others, the slow realm's calls answer 503 at once, and /v1/plugins
// says the instance is still starting. It held every realm until its
// configure timeout (two minutes) ran out (from an outside review).
func TestServeWithoutASlowPlugin(t *testing.T) {
	t.Parallel()
	needPython(t)
	pluginDir := testbin.PrivatePluginDir(t, "sqlite")
	installHangingPlugin(t, pluginDir)
	cfgPath, dataDir := writeConfigIn(t, pluginDir, `provider "main" { plugin = "sqlite" }
provider "notes" { plugin = "hangpy" }
realm "default" { provider = "main" }
realm "slow" { provider = "notes" }
supervisor {
  boot_wait_ms = 2000
}
`)
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(realm string) map[string]any {
		return map[string]any{"realm": realm, "records": []map[string]any{{"scope": "realm", "kind": "fact", "title": "kumquat", "body": "served"}}}
	}
	// The default realm's plugin may itself outlast the boot wait on a
	// busy machine: it serves once up, the slow one never holding it.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		code := m.do("POST", "/v1/records", rec("default"), nil)
		if code == 200 {
			break
		}
		if code != 503 || time.Now().After(deadline) {
			t.Fatalf("a write to the default realm = %d, want 200\n%s", code, m.logs())
		}
	}
	began := time.Now()
	var e apiError
	if code := m.do("POST", "/v1/records", rec("slow"), &e); code != 503 || e.Error.Code != "provider_unavailable" || !strings.Contains(e.Error.Message, "still starting") {
		t.Fatalf("a write to the slow realm = %d %+v, want 503 provider_unavailable, still starting", code, e)
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Fatalf("the slow realm's write took %v to be refused", took)
	}
	var plugins struct {
		Plugins []struct {
			Instance, State string
			Warnings        []string
		}
	}
	m.do("GET", "/v1/plugins", nil, &plugins)
	for _, p := range plugins.Plugins {
		if p.Instance == "notes" && (p.State != "starting" || !slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, "still starting") })) {
			t.Fatalf("notes in /v1/plugins = %+v, want starting with the host's warning", p)
		}
	}
}

// writerFunc is an io.Writer of a func.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
