package main

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk/conformance"
	sdkhost "github.com/memhost/memhost/sdk/host"
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

// typescriptTreeEnv names a tree of the example already built.
const typescriptTreeEnv = "MEMHOST_TEST_TYPESCRIPT_TREE"

var tsTree struct {
	once sync.Once
	dir  string
	err  error
}

// builtTypeScriptTree builds the TypeScript SDK and its example once per
// test binary (npm ci when node_modules is missing, then tsc) and lays the
// example out as a script tree with the SDK's memhost-plugin-tree, under
// the SDK's gitignored dist/. `make test` builds the tree before its
// suites run side by side (the SDK's own tests rebuild dist meanwhile)
// and names it in typescriptTreeEnv.
func builtTypeScriptTree(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv(typescriptTreeEnv); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "main.mjs")); err != nil {
			t.Fatalf("%s names no built tree: %v", typescriptTreeEnv, err)
		}
		return dir
	}
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
	// CopyFS makes files 0666 and directories 0777 less the umask: under a
	// umask of 000 the host would refuse a tree every user may write.
	if err := filepath.WalkDir(tree, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.Chmod(p, info.Mode().Perm()&^0o022)
	}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(tree, "main.mjs")
}

// TestTypeScriptProviderConformance runs the Go conformance kit against
// the example TypeScript provider's own process, started as the host
// starts a plugin (mutual TLS, its socket directory, SIGKILL once), by its
// manifest: through the pinned node, the manifest checked as the host does.
func TestTypeScriptProviderConformance(t *testing.T) {
	t.Parallel()
	pluginDir, script := installTypeScriptPlugin(t, needNode(t))
	conformance.RunProvider(t, conformance.Target{
		Binary:   script,
		Manifest: filepath.Join(pluginDir, "jsonlts"+sdkhost.ManifestSuffix),
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
	writeScriptManifest(t, "jsonlts", script, node)
	return pluginDir, script
}

var typescriptConfig = notesConfig("jsonlts", "notes.jsonl")

// TestTypeScriptProviderServe loads the example TypeScript provider into
// a stock `memhost serve` by its manifest and checks its log lines and
// that no acknowledged write is lost across restarts and kill -9s of the
// plugin and of memhost (checkScriptProviderServe).
func TestTypeScriptProviderServe(t *testing.T) {
	t.Parallel()
	pluginDir, _ := installTypeScriptPlugin(t, needNode(t))
	checkScriptProviderServe(t, "TypeScript", pluginDir, typescriptConfig, "notes.jsonl")
}

// TestTypeScriptProviderTampered: the trust check covers the whole tree,
// node_modules included: a changed dependency is refused by `memhost
// serve --require-all` with one line naming the entry script.
func TestTypeScriptProviderTampered(t *testing.T) {
	t.Parallel()
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
	// --require-all: without it serve starts and answers the realm 503.
	if m, err := startWithArgs(t, cfgPath, dataDir, "--require-all"); err == nil {
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
	t.Parallel()
	node := needNode(t)
	pluginDir, script := installTypeScriptPlugin(t, node)
	checkReattach(t, pluginDir, "jsonlts", filepath.Join(t.TempDir(), "debug.jsonl"), []string{node, script, "--debug"})
}
