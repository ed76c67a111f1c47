package testbin

import (
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
