//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package markdown

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memhost/memhost/sdk"
)

// TestOneInstancePerRoot: a second instance on a root is refused at
// Configure, naming the lock file, until the first closes or dies; the
// refused one leaves the first's batches alone (a start finishes every
// batch intent and removes every temp file it finds).
func TestOneInstancePerRoot(t *testing.T) {
	root := t.TempDir()
	cfg := json.RawMessage(fmt.Sprintf(`{"root": %q}`, root))
	open := func() (*Provider, error) {
		p := New()
		p.opts.background, p.logger = false, slog.New(slog.DiscardHandler)
		return p, p.Configure(ctx, cfg)
	}
	first, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := open()
	lock := filepath.Join(root, lockName)
	if !errors.Is(err, sdk.ErrConflict) || !strings.Contains(err.Error(), lock) || !strings.Contains(err.Error(), "another instance") ||
		!strings.Contains(err.Error(), "the plugin of a host just killed") {
		// A killed host's plugin, still closing, meets a restarted host
		// so: the message names that too, not only a misconfiguration.
		t.Fatalf("second instance on one root: err = %v, want a conflict naming %s and who may hold it", err, lock)
	}
	if _, err := second.Recall(ctx, sdk.RecallQuery{Realm: "default", Query: "x"}); !errors.Is(err, sdk.ErrUnavailable) {
		t.Fatalf("a refused instance answers: %v", err)
	}
	second.Close()
	// Configuring the first again on its own root is no second instance.
	if err := first.Configure(ctx, cfg); err != nil {
		t.Fatalf("reconfigure on the same root: %v", err)
	}
	if _, err := first.Remember(ctx, "default", []sdk.Record{rec(alice, "still", "works")}); err != nil {
		t.Fatal(err)
	}
	first.Close()
	third, err := open()
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	third.Close()

	// kill -9 of the holder frees the root too: the kernel drops its lock.
	if testing.Short() {
		return
	}
	conn := launchPlugin(t)
	defer conn.Close()
	configureConn(t, conn, root)
	if p, err := open(); !errors.Is(err, sdk.ErrConflict) {
		p.Close()
		t.Fatalf("beside the plugin process: err = %v, want a conflict", err)
	}
	if err := syscall.Kill(conn.Pid(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	conn.Close()
	p, err := open()
	if err != nil {
		t.Fatalf("after the holder was killed: %v", err)
	}
	p.Close()
}
