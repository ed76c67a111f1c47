package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A real plugin error naming a file of the host's machine reaches the
// client without the path or any pid; the log keeps the path.
func TestPluginErrorBodiesHoldNoPath(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, markdownConfig+`
token "app" {
  secret_env = "MEMHOST_TEST_TOKEN"
  realms     = ["default"]
}
`, "MEMHOST_TEST_TOKEN=leak-token-0123456789abcdef")
	m.token = "leak-token-0123456789abcdef"
	// A plain file where the markdown provider wants mallory's directory:
	// the plugin refuses the write with an error naming the absolute path.
	scopes := filepath.Join(m.dataDir, "md", "default", "identity")
	if err := os.MkdirAll(scopes, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scopes, "mallory"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var e apiError
	code := m.do("POST", "/v1/records", map[string]any{"records": []map[string]any{
		{"scope": "identity:mallory", "kind": "fact", "title": "t", "body": "b"}}}, &e)
	if code < 400 || e.Error.Message == "" {
		t.Fatalf("write through a planted file = %d %+v", code, e)
	}
	if strings.Contains(e.Error.Message, m.dataDir) || strings.Contains(e.Error.Message, "/md/") {
		t.Fatalf("error body leaks a path: %s", e.Error.Message)
	}
	for _, pid := range pluginPids(t, m) {
		if strings.Contains(e.Error.Message, strconv.Itoa(pid)) {
			t.Fatalf("error body leaks plugin pid %d: %s", pid, e.Error.Message)
		}
	}
	if !strings.Contains(e.Error.Message, "…/mallory") {
		t.Fatalf("the sanitised message lost what it is about: %s", e.Error.Message)
	}
	// The log keeps the full path; the host writes its line after the
	// answer has gone out.
	waitForLog(t, m, filepath.Join(scopes, "mallory"))

	// Readiness without a token says ready and nothing about plugins.
	resp, err := http.Get(m.base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != `{"status":"ready"}` {
		t.Fatalf("/readyz = %d %s", resp.StatusCode, body)
	}
}

// The host's own secrets (its tokens', its host key, the client token
// MEMHOST_TOKEN) never reach a plugin's process: a plugin, possibly a third
// party's, that held an application token could act on every realm.
// What plugins read (here an unrelated variable) still reaches them.
func TestPluginsGetNoHostSecrets(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{
		"MEMHOST_TEST_APP_TOKEN": "app-secret-0123456789abcdef",
		"MEMHOST_TEST_HOST_KEY":  "host-key-0123456789abcdef0123456789abcdef",
		"MEMHOST_TOKEN":          "client-secret-0123456789abcdef",
	}
	env := []string{"MEMHOST_TEST_PLAIN=kept"}
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	m := startMemhost(t, markdownConfig+`
host_key_env = "MEMHOST_TEST_HOST_KEY"
token "app" {
  secret_env = "MEMHOST_TEST_APP_TOKEN"
  realms     = ["default"]
  role       = "application"
}
`, env...)
	m.token = secrets["MEMHOST_TEST_APP_TOKEN"]
	for _, pid := range pluginPids(t, m) {
		raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err != nil {
			t.Skipf("cannot read a plugin's environment: %v", err)
		}
		vars := strings.Split(string(raw), "\x00")
		for name, secret := range secrets {
			if strings.Contains(string(raw), secret) {
				t.Errorf("plugin pid %d was given %s", pid, name)
			}
		}
		if !slices.Contains(vars, "MEMHOST_TEST_PLAIN=kept") {
			t.Errorf("plugin pid %d lost the host's other variables", pid)
		}
	}
}
