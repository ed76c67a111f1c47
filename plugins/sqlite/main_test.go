package sqlite

import (
	"context"
	"crypto/sha256"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/memhost/memhost/sdk/conformance"
	"github.com/memhost/memhost/sdk/host"
)

// tempDirs are removed after every test and benchmark has run: the built
// plugin binary and the benchmark databases are shared across them.
var (
	tempMu   sync.Mutex
	tempDirs []string
)

func sharedTempDir(tb testing.TB, pattern string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		tb.Fatal(err)
	}
	tempMu.Lock()
	tempDirs = append(tempDirs, dir)
	tempMu.Unlock()
	return dir
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, dir := range tempDirs {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

var built struct {
	once sync.Once
	path string
	sum  []byte
	err  error
	out  []byte
}

// pluginBinary builds memhost-plugin-sqlite once per test process, with
// the tags every memhost build uses (another tag set recompiles SQLite).
func pluginBinary(tb testing.TB) (path string, sum []byte) {
	tb.Helper()
	built.once.Do(func() {
		dir := sharedTempDir(tb, "memhost-sqlite-bin-")
		built.path = filepath.Join(dir, "memhost-plugin-sqlite")
		cmd := exec.Command("go", "build", "-o", built.path, ".")
		cmd.Dir = "cmd/memhost-plugin-sqlite"
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false -trimpath -tags=sqlite_fts5 -ldflags=-w", "CGO_ENABLED=1")
		if built.out, built.err = cmd.CombinedOutput(); built.err != nil {
			return
		}
		data, err := os.ReadFile(built.path)
		if err != nil {
			built.err = err
			return
		}
		h := sha256.Sum256(data)
		built.sum = h[:]
	})
	if built.err != nil {
		tb.Fatalf("build plugin: %v\n%s", built.err, built.out)
	}
	return built.path, built.sum
}

// launchPlugin starts the built plugin in dir, as the host does, and
// configures it with cfg. The plugin is stopped when the test ends.
func launchPlugin(tb testing.TB, dir string, cfg []byte) (*host.Conn, *conformance.Client, error) {
	tb.Helper()
	path, sum := pluginBinary(tb)
	ctx := context.Background()
	conn, err := host.Launch(ctx, host.LaunchOptions{Name: "sqlite", Path: path, SHA256: sum, Dir: dir})
	if err != nil {
		tb.Fatalf("launch plugin: %v", err)
	}
	tb.Cleanup(conn.Close)
	if err := conn.Configure(ctx, cfg); err != nil {
		return conn, nil, err
	}
	p, err := conformance.ClientOf(conn)
	if err != nil {
		tb.Fatal(err)
	}
	return conn, p, nil
}
