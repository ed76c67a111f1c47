package testbin

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSharedPluginDir: tests asking for the same plugins share one
// directory, a private one is apart, and a change to the shared one is
// caught (Main fails the run on it).
func TestSharedPluginDir(t *testing.T) {
	shared := PluginDir(t, "static")
	if again := PluginDir(t, "static"); again != shared {
		t.Fatalf("PluginDir answered %s, then %s: the same plugins must share one directory", shared, again)
	}
	private := PrivatePluginDir(t, "static")
	if private == shared {
		t.Fatal("PrivatePluginDir answered the shared directory")
	}
	for _, dir := range []string{shared, private} {
		if _, err := os.Stat(filepath.Join(dir, "static.plugin.json")); err != nil {
			t.Fatalf("no manifest in %s: %v", dir, err)
		}
	}
	if err := checkSharedPluginDirs(); err != nil {
		t.Fatalf("untouched shared directories: %v", err)
	}

	exe := filepath.Join(shared, "memhost-plugin-static")
	good, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	// Put back before Main checks again.
	defer func() {
		if err := os.WriteFile(exe, good, 0o755); err != nil {
			t.Fatal(err)
		}
	}()
	if err := os.WriteFile(exe, append(good, "tampered"...), 0o755); err != nil {
		t.Fatal(err)
	}
	err = checkSharedPluginDirs()
	if err == nil || !strings.Contains(err.Error(), "memhost-plugin-static") || !strings.Contains(err.Error(), "PrivatePluginDir") {
		t.Fatalf("a tampered shared plugin: %v, want it named with the fix", err)
	}
}

// TestPrebuilt: with PrebuiltEnv set, memhost and the first-party plugins
// come from that directory when they are there, and everything else (a
// missing binary, a test plugin, a nested module) is built.
func TestPrebuilt(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"memhost", "plugins/memhost-plugin-sqlite"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(PrebuiltEnv, dir)
	cases := []struct {
		moduleDir, pkg, want string
	}{
		{".", "./cmd/memhost", filepath.Join(dir, "memhost")},
		{".", "./plugins/sqlite/cmd/memhost-plugin-sqlite", filepath.Join(dir, "plugins", "memhost-plugin-sqlite")},
		{".", "./plugins/bleve/cmd/memhost-plugin-bleve", ""},
		{".", "./cmd/memhost/testdata/hostile", ""},
		{"examples/kv", "./cmd/memhost-plugin-kv", ""},
	}
	for _, c := range cases {
		got, ok := prebuilt(c.moduleDir, c.pkg)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("prebuilt(%q, %q) = %q, %v; want %q", c.moduleDir, c.pkg, got, ok, c.want)
		}
	}
	t.Setenv(PrebuiltEnv, "")
	if got, ok := prebuilt(".", "./cmd/memhost"); ok {
		t.Errorf("without %s: prebuilt answered %s", PrebuiltEnv, got)
	}
}

// TestPluginSums: Plugin answers the prebuilt binary with its sha256, and
// a run whose tests changed that file fails at the end.
func TestPluginSums(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "plugins"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "plugins", "memhost-plugin-sumcheck")
	content := []byte("#!/bin/sh\n")
	if err := os.WriteFile(exe, content, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(PrebuiltEnv, dir)
	t.Cleanup(func() {
		mu.Lock()
		delete(sums, exe)
		delete(built, filepath.Join(".", "./plugins/sumcheck/cmd/memhost-plugin-sumcheck"))
		mu.Unlock()
	})
	path, sum := Plugin(t, "sumcheck")
	want := sha256.Sum256(content)
	if path != exe || !bytes.Equal(sum, want[:]) {
		t.Fatalf("Plugin = %s %x, want %s %x", path, sum, exe, want)
	}
	mu.Lock()
	err := checkPluginSums()
	mu.Unlock()
	if err != nil {
		t.Fatalf("unchanged binary reported: %v", err)
	}
	if err := os.WriteFile(exe, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	err = checkPluginSums()
	mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), exe) {
		t.Fatalf("changed binary: %v, want an error naming %s", err, exe)
	}
}
