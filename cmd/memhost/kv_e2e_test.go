package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
)

// TestKVExamplePlugin proves the under-100-line example end to end: built
// in its own module on sdk/kvprovider, given a manifest by `memhost plugins
// manifest`, it serves a stock memhost's remember and recall, and what it
// acknowledged is recalled again after memhost and the plugin restart.
func TestKVExamplePlugin(t *testing.T) {
	t.Parallel()
	pluginDir := t.TempDir()
	bin := testbin.BuildIn(t, "examples/kv", "./cmd/memhost-plugin-kv")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(pluginDir, "memhost-plugin-kv")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := testbin.Command(testbin.Build(t, "./cmd/memhost"), "plugins", "manifest", exe).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "kv.plugin.json") {
		t.Fatalf("plugins manifest: %v\n%s", err, out)
	}
	cfgPath, dataDir := writeConfigIn(t, pluginDir, `
provider "notes" {
  plugin = "kv"
  config = { file = "notes.log" }
}
`)
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	ids := remember(t, m,
		map[string]any{"scope": "identity:dana", "kind": "gotcha", "title": "Flaky staging DNS", "body": "Staging DNS flaps on Mondays; retry once."},
		map[string]any{"scope": "identity:dana", "kind": "fact", "title": "Deploy window", "body": "Deploys to staging run at noon."},
	)
	got := recall(t, m, "dana", "staging dns")
	if len(got.Hits) != 2 || got.Hits[0].Record.ID != ids[0] {
		t.Fatalf("recall through the kv plugin = %+v, want %s first", got, ids[0])
	}
	if _, err := os.Stat(filepath.Join(dataDir, "notes.log")); err != nil {
		t.Fatalf("the plugin did not write under the data directory: %v", err)
	}
	m.stop()
	m, err = startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	if again := recall(t, m, "dana", "staging dns"); len(again.Hits) != 2 || again.Hits[0].Record.ID != ids[0] {
		t.Fatalf("recall after a restart = %+v, want %s first", again, ids[0])
	}
}
