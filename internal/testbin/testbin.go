// Package testbin builds memhost's real binaries for tests, once per test
// process, with the same build tags as the Makefile, so end-to-end tests
// run the real plugin processes and never a stand-in.
package testbin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	hclog "github.com/hashicorp/go-hclog"
	"github.com/memhost/memhost/internal/pluginhost"
)

// Tags must match the Makefile's GOFLAGS: a different tag set recompiles
// SQLite and would build plugins without FTS5.
const Tags = "sqlite_fts5"

var (
	mu     sync.Mutex
	outDir string
	built  = map[string]string{}
)

// processTempDir is the temporary directory as the process started: the
// build cache outlives any test, so it must not land in a TMPDIR a test
// set for itself (t.Setenv), which goes away when that test ends.
var processTempDir = os.TempDir()

// Main runs the tests and removes the built binaries; call it from
// TestMain: os.Exit(testbin.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if outDir != "" {
		os.RemoveAll(outDir)
	}
	return code
}

// ModuleRoot is the directory holding the root go.mod.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && len(data) > 0 && isRootModule(data) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testbin: root go.mod not found")
		}
		dir = parent
	}
}

func isRootModule(gomod []byte) bool {
	const want = "module github.com/memhost/memhost\n"
	return len(gomod) >= len(want) && string(gomod[:len(want)]) == want
}

// Build compiles the main package pkg (relative to the module root, e.g.
// "./cmd/memhost") once per process and answers the binary's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	return BuildIn(t, ".", pkg)
}

// BuildIn compiles pkg inside the module at moduleDir (relative to the
// root module, e.g. "examples/journal" for a nested module).
func BuildIn(t testing.TB, moduleDir, pkg string) string {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	key := filepath.Join(moduleDir, pkg)
	if path, ok := built[key]; ok {
		return path
	}
	if outDir == "" {
		dir, err := os.MkdirTemp(processTempDir, "memhost-testbin-")
		if err != nil {
			t.Fatal(err)
		}
		outDir = dir
	}
	out := filepath.Join(outDir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-tags", Tags, "-o", out, pkg)
	cmd.Dir = filepath.Join(ModuleRoot(t), moduleDir)
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false", "CGO_ENABLED=1")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testbin: go build %s: %v\n%s", key, err, msg)
	}
	built[key] = out
	return out
}

// Command is exec.Command for a process a test starts (memhost serve, a
// plugin, a database): the process is killed when the test process dies,
// so a test binary killed at its timeout leaves nothing running.
func Command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	dieWithParent(cmd, syscall.SIGKILL)
	return cmd
}

// ShortTempDir makes a temporary directory with a short path, removed
// when the test ends: the plugins' Unix sockets go under $TMPDIR, and a
// socket's whole path must fit in about 104 bytes, which a t.TempDir path
// (it holds the test's name) can use up on its own.
func ShortTempDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "mh")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// FirstPartyPlugins are the plugins `make build` ships.
var FirstPartyPlugins = []string{"markdown", "sqlite", "bleve", "postgres", "template", "llm", "lexical", "static", "openai", "wordvec"}

// PluginDir builds the named first-party plugins (all when none are named)
// into a fresh directory with their manifests, as `make build` lays them
// out, and answers the directory.
func PluginDir(t testing.TB, names ...string) string {
	t.Helper()
	if len(names) == 0 {
		names = FirstPartyPlugins
	}
	dir := t.TempDir()
	for _, name := range names {
		bin := Build(t, fmt.Sprintf("./plugins/%s/cmd/memhost-plugin-%s", name, name))
		InstallPlugin(t, dir, bin)
	}
	return dir
}

// InstallPlugin copies a plugin binary into dir and writes its manifest.
func InstallPlugin(t testing.TB, dir, bin string) string {
	t.Helper()
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(bin))
	if err := os.WriteFile(dst, data, 0o755); err != nil {
		t.Fatal(err)
	}
	// Writing the manifest runs the copy. A fork elsewhere in this test
	// process (parallel tests start processes all the time) may hold the
	// copy's write descriptor until its exec, and the kernel refuses to
	// run a file open for writing ("text file busy"): try again shortly.
	for attempt := 1; ; attempt++ {
		path, _, err := pluginhost.WriteManifest(context.Background(), dst, hclog.NewNullLogger())
		if err == nil {
			return path
		}
		if attempt == 50 || !(errors.Is(err, syscall.ETXTBSY) || strings.Contains(err.Error(), syscall.ETXTBSY.Error())) {
			t.Fatalf("testbin: manifest for %s: %v", dst, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
