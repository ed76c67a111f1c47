package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
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
