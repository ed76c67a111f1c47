package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
	"github.com/memhost/memhost/sdk/conformance"
)

// python is the interpreter script plugins are tested with: Debian's,
// where python3-grpcio and python3-protobuf are installed.
const python = "/usr/bin/python3"

// needPython skips when the Python SDK cannot run here (no grpcio).
func needPython(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Python plugin processes")
	}
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s: %v", python, err)
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
