// Package testbin builds memhost's real binaries for tests, once per test
// process, with the same build tags as the Makefile, so end-to-end tests
// run the real plugin processes and never a stand-in.
package testbin

import (
	"context"
	"encoding/hex"
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

// Tags and -trimpath match the Makefile's GOFLAGS: other build flags
// recompile SQLite, and another tag set builds plugins without FTS5.
// -ldflags=-w (no DWARF) makes the link cheaper, as there.
const Tags = "sqlite_fts5"

var (
	mu     sync.Mutex
	outDir string
	built  = map[string]string{}
	sums   = map[string][]byte{} // by built path
	// manifests holds each installed binary's manifest, by manifestKey.
	manifests = map[string]manifestFile{}
)

// processTempDir is the temporary directory as the process started: the
// build cache outlives any test, so it must not land in a TMPDIR a test
// set for itself (t.Setenv), which goes away when that test ends.
var processTempDir = os.TempDir()

// Main runs the tests and removes the built binaries; call it from
// TestMain: os.Exit(testbin.Main(m)). A run whose tests changed a shared
// plugin directory (PluginDir) fails, naming the file.
func Main(m *testing.M) int {
	code := m.Run()
	if err := checkSharedPluginDirs(); err != nil {
		fmt.Fprintln(os.Stderr, "testbin:", err)
		code = 1
	}
	mu.Lock()
	defer mu.Unlock()
	if err := checkPluginSums(); err != nil {
		fmt.Fprintln(os.Stderr, "testbin:", err)
		code = 1
	}
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
	if path, ok := prebuilt(moduleDir, pkg); ok {
		built[key] = path
		return path
	}
	dir, err := outputDir()
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-tags", Tags, "-o", out, pkg)
	cmd.Dir = filepath.Join(ModuleRoot(t), moduleDir)
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false -trimpath -ldflags=-w", "CGO_ENABLED=1")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testbin: go build %s: %v\n%s", key, err, msg)
	}
	built[key] = out
	return out
}

// Plugin answers the executable of the first-party plugin name (Build of
// ./plugins/<name>/cmd/memhost-plugin-<name>) and its sha256, for a test
// that launches it as the host does. The file may be the one `make build`
// made, shared by every test: a test must not change it.
func Plugin(t testing.TB, name string) (path string, sum []byte) {
	t.Helper()
	path = Build(t, "./plugins/"+name+"/cmd/memhost-plugin-"+name)
	mu.Lock()
	defer mu.Unlock()
	if sum, ok := sums[path]; ok {
		return path, sum
	}
	digest, err := pluginhost.FileSHA256(path)
	if err == nil {
		sum, err = hex.DecodeString(digest)
	}
	if err != nil {
		t.Fatal(err)
	}
	sums[path] = sum
	return path, sum
}

// checkPluginSums reports a binary Plugin answered whose bytes changed
// since: other tests, and other packages' runs, execute the same file. The
// caller holds mu.
func checkPluginSums() error {
	for path, sum := range sums {
		digest, err := pluginhost.FileSHA256(path)
		if err != nil || digest != hex.EncodeToString(sum) {
			return fmt.Errorf("a test changed the plugin binary %s, which other tests run (copy it first)", path)
		}
	}
	return nil
}

// PrebuiltEnv names the directory where `make build` put memhost and its
// plugins (bin/), which `make test` sets after building them with the same
// flags: the tests run those binaries instead of linking each again. Run
// alone, go test builds them itself, so they always match the source.
const PrebuiltEnv = "MEMHOST_TEST_BIN_DIR"

// prebuilt answers the binary `make build` made for pkg of the root
// module, when PrebuiltEnv names its directory and the binary is there.
func prebuilt(moduleDir, pkg string) (string, bool) {
	dir := os.Getenv(PrebuiltEnv)
	if dir == "" || moduleDir != "." {
		return "", false
	}
	var path string
	switch rel := filepath.ToSlash(filepath.Clean(pkg)); {
	case rel == "cmd/memhost":
		path = filepath.Join(dir, "memhost")
	case strings.HasPrefix(rel, "plugins/") && strings.Contains(rel, "/cmd/memhost-plugin-"):
		path = filepath.Join(dir, "plugins", filepath.Base(rel))
	default:
		return "", false
	}
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	return path, true
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

// outputDir is the process's directory for built binaries and shared
// plugin directories, made on first use; the caller holds mu.
func outputDir() (string, error) {
	if outDir == "" {
		dir, err := os.MkdirTemp(processTempDir, "memhost-testbin-")
		if err != nil {
			return "", err
		}
		outDir = dir
	}
	return outDir, nil
}

// PluginDir answers a plugin directory holding the named first-party
// plugins (all when none are named) with their manifests, as `make build`
// lays it out. It is shared by every test in the process that asks for the
// same plugins, and made once: laying out a fresh copy for each test wrote
// gigabytes and ran every plugin once more a run. A test must not change
// it (Main fails the run if one does); one that replaces, tampers with or
// adds a plugin uses PrivatePluginDir.
func PluginDir(t testing.TB, names ...string) string {
	t.Helper()
	if len(names) == 0 {
		names = FirstPartyPlugins
	}
	key := strings.Join(names, ",")
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if dir, ok := sharedDirs[key]; ok {
		return dir
	}
	mu.Lock()
	parent, err := outputDir()
	mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(parent, "plugins-")
	if err != nil {
		t.Fatal(err)
	}
	installFirstParty(t, dir, names)
	sharedDirs[key] = dir
	return dir
}

// PrivatePluginDir is PluginDir in a directory of the test's own, which
// it may change.
func PrivatePluginDir(t testing.TB, names ...string) string {
	t.Helper()
	if len(names) == 0 {
		names = FirstPartyPlugins
	}
	dir := t.TempDir()
	installFirstParty(t, dir, names)
	return dir
}

func installFirstParty(t testing.TB, dir string, names []string) {
	t.Helper()
	for _, name := range names {
		bin := Build(t, fmt.Sprintf("./plugins/%s/cmd/memhost-plugin-%s", name, name))
		InstallPlugin(t, dir, bin)
	}
}

var (
	sharedMu   sync.Mutex
	sharedDirs = map[string]string{} // by the plugin names, comma-joined
)

// checkSharedPluginDirs reports a shared plugin directory whose contents
// no longer match their manifests: a test changed what others run.
func checkSharedPluginDirs() error {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	for _, dir := range sharedDirs {
		entries, refusals, err := pluginhost.Discover(dir)
		if err != nil {
			return fmt.Errorf("shared plugin directory %s: %w", dir, err)
		}
		if len(refusals) > 0 {
			return fmt.Errorf("a test changed the shared plugin directory %s (use PrivatePluginDir): %w", dir, errors.Join(refusals...))
		}
		for _, e := range entries {
			sum, err := pluginhost.FileSHA256(e.Executable)
			if err != nil || sum != e.Manifest.SHA256 {
				return fmt.Errorf("a test changed %s in the shared plugin directory %s (use PrivatePluginDir)", e.Executable, dir)
			}
		}
	}
	return nil
}

// InstallPlugin copies a plugin binary into dir and writes its manifest.
// The manifest is made once a binary: it names its executable relative to
// its own directory, so every copy of the same binary gets the same bytes,
// and the binary need not run again to describe itself.
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
	key, err := manifestKey(bin)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	cached, ok := manifests[key]
	mu.Unlock()
	if ok {
		path := filepath.Join(dir, cached.name)
		if err := os.WriteFile(path, cached.data, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	path := writeManifest(t, dst)
	manifest, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	manifests[key] = manifestFile{name: filepath.Base(path), data: manifest}
	mu.Unlock()
	return path
}

// manifestFile is a manifest as written: its file name and bytes.
type manifestFile struct {
	name string
	data []byte
}

// manifestKey tells binaries apart by path, size and modification time,
// so a binary rebuilt at the same path is described afresh.
func manifestKey(bin string) (string, error) {
	st, err := os.Stat(bin)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s\x00%d\x00%d", bin, st.Size(), st.ModTime().UnixNano()), nil
}

// writeManifest runs the installed copy for its manifest. A fork elsewhere
// in this test process (parallel tests start processes all the time) may
// hold the copy's write descriptor until its exec, and the kernel refuses
// to run a file open for writing ("text file busy"): try again shortly.
func writeManifest(t testing.TB, exe string) string {
	t.Helper()
	for attempt := 1; ; attempt++ {
		// Forced: the copy is the test's own, rewritten on every build.
		w, err := pluginhost.WriteManifest(context.Background(), exe, hclog.NewNullLogger(), true)
		if err == nil {
			return w.Path
		}
		if attempt == 50 || !(errors.Is(err, syscall.ETXTBSY) || strings.Contains(err.Error(), syscall.ETXTBSY.Error())) {
			t.Fatalf("testbin: manifest for %s: %v", exe, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
