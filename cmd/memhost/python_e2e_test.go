package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
// plugin (mutual TLS, its socket directory, SIGKILL once).
func TestPythonProviderConformance(t *testing.T) {
	t.Parallel()
	needPython(t)
	script := pythonPluginTree(t, testbin.ShortTempDir(t))
	conformance.RunProvider(t, conformance.Target{
		Binary:       script,
		StartTimeout: sdkhost.DefaultInterpretedStartTimeout,
		Config:       func(string) json.RawMessage { return json.RawMessage(`{}`) },
		BadConfigs:   pythonBadConfigs,
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
