package sqlite

import (
	"context"
	"os"
	"sync"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
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
	code := testbin.Main(m)
	for _, dir := range tempDirs {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// launchPlugin starts the built plugin in dir, as the host does, and
// configures it with cfg. The plugin is stopped when the test ends.
func launchPlugin(tb testing.TB, dir string, cfg []byte) (*host.Conn, *conformance.Client, error) {
	tb.Helper()
	path, sum := testbin.Plugin(tb, "sqlite")
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
