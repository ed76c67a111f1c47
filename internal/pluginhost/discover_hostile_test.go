package pluginhost_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/pluginhost"
)

// A *.plugin.json that is a FIFO, a device (a symlink to /dev/zero) or a
// huge file is refused on its own, quickly: discovery neither blocks on
// it nor reads it without end, and the good manifests are still found.
func TestDiscoverRefusesHostileManifestFiles(t *testing.T) {
	dir, _ := echoDir(t)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.plugin.json"), 0o644); err != nil {
		t.Skip(err)
	}
	if _, err := os.Stat("/dev/zero"); err == nil {
		if err := os.Symlink("/dev/zero", filepath.Join(dir, "zero.plugin.json")); err != nil {
			t.Fatal(err)
		}
	}
	big, err := os.Create(filepath.Join(dir, "big.plugin.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(1 << 30); err != nil { // sparse: no disk used
		t.Fatal(err)
	}
	big.Close()
	type result struct {
		entries  []pluginhost.Entry
		refusals []error
		err      error
	}
	done := make(chan result, 1)
	go func() {
		e, r, err := pluginhost.Discover(dir)
		done <- result{e, r, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(10 * time.Second):
		// Unblock a reader waiting on the FIFO.
		if f, err := os.OpenFile(filepath.Join(dir, "fifo.plugin.json"), os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("Discover did not return within 10s")
	}
	if res.err != nil || len(res.entries) != 1 || res.entries[0].Manifest.Name != "echo" {
		t.Fatalf("Discover = %v, %v; want the echo plugin", res.entries, res.err)
	}
	want := map[string]string{"fifo": "not a regular file", "zero": "not a regular file", "big": "larger than"}
	if len(res.refusals) != len(want)-boolInt(!exists("/dev/zero")) {
		t.Fatalf("refusals %v", res.refusals)
	}
	for _, r := range res.refusals {
		msg := r.Error()
		if !errors.Is(r, pluginhost.ErrRefused) || strings.Contains(msg, "\n") {
			t.Errorf("refusal %q: want one line wrapping ErrRefused", msg)
		}
		for name, w := range want {
			if strings.Contains(msg, name+".plugin.json") && !strings.Contains(msg, w) {
				t.Errorf("refusal %q: want %q", msg, w)
			}
		}
	}
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
