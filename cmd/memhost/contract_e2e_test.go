package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/testbin"
)

// chattyDir installs the chatty test plugin (cmd/memhost/testdata/chatty).
func chattyDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	testbin.InstallPlugin(t, dir, testbin.Build(t, "./cmd/memhost/testdata/chatty"))
	return dir
}

func startChatty(t *testing.T, pluginDir, head, config string, args ...string) (*instance, error) {
	t.Helper()
	cfgPath, dataDir := writeConfigIn(t, pluginDir, head+`
provider "talker" {
  plugin = "chatty"
  config = `+config+`
}
realm "default" { provider = "talker" }
`)
	return startWithArgs(t, cfgPath, dataDir, args...)
}

// waitForLog waits (bounded) until every want is in the host log; plugin
// lines logged from a goroutine arrive when they arrive.
func waitForLog(t *testing.T, m *instance, want ...string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		logs, missing := m.logs(), ""
		for _, w := range want {
			if !strings.Contains(logs, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("host log lacks %q:\n%s", missing, logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// logLine answers the first line of logs that contains msg.
func logLine(logs, msg string) string {
	for line := range strings.Lines(logs) {
		if strings.Contains(line, msg) {
			return line
		}
	}
	return ""
}

// TestPluginLogsReachHost: what a plugin logs in Configure, in a call, in a
// goroutine and raw on stderr is in the host's log under the instance name
// (not the plugin's), in the host's format and at the host's level.
func TestPluginLogsReachHost(t *testing.T) {
	t.Parallel()
	dir := chattyDir(t)
	t.Run("text at info", func(t *testing.T) {
		m, err := startChatty(t, dir, "log_format = \"text\"\nlog_level = \"info\"\n", `{ greeting = "hi" }`)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", m.base+"/v1/recall", strings.NewReader(`{"identity":{"id":"alice"},"query":"coffee"}`))
		req.Header.Set("X-Request-Id", "e2e-chatty-1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		waitForLog(t, m,
			"plugin.talker: chatty configured:",
			"plugin.talker: chatty recall:",
			"plugin.talker: chatty background goroutine",
			"plugin.talker: chatty raw stderr line")
		m.stop()
		logs := m.logs()
		// The host re-emits a plugin line's attributes in no fixed order.
		// The plugin logged its recall line with the call's context, so it
		// carries the id of the HTTP request the call served.
		for msg, attr := range map[string]string{"chatty configured:": "greeting=hi", "chatty recall:": "query=coffee", "chatty recall": "request_id=e2e-chatty-1"} {
			if line := logLine(logs, msg); !strings.Contains(line, attr) {
				t.Fatalf("the line %q lacks %s:\n%s", msg, attr, logs)
			}
		}
		if strings.Contains(logs, "chatty configure detail") {
			t.Fatalf("a debug line reached a host logging at info:\n%s", logs)
		}
		// Configure told the plugin the host's version.
		if !strings.Contains(logs, "host_version=") || strings.Contains(logs, `host_version=""`) {
			t.Fatalf("the plugin did not learn the host's version in Configure:\n%s", logs)
		}
	})
	t.Run("json at debug", func(t *testing.T) {
		m, err := startChatty(t, dir, "log_format = \"json\"\nlog_level = \"debug\"\n", `{ greeting = "hi" }`)
		if err != nil {
			t.Fatal(err)
		}
		m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "alice"}, "query": "coffee"}, nil)
		want := []string{"chatty configured", "chatty configure detail", "chatty recall", "chatty background goroutine", "chatty raw stderr line"}
		waitForLog(t, m, want...)
		m.stop()
		found := map[string]bool{}
		for _, line := range strings.Split(m.logs(), "\n") {
			var entry map[string]any
			if json.Unmarshal([]byte(line), &entry) != nil {
				continue
			}
			msg, _ := entry["@message"].(string)
			if strings.HasPrefix(msg, "chatty ") {
				if entry["@module"] != "memhost.plugin.talker" {
					t.Errorf("plugin line %q has @module %v, want the instance name talker", msg, entry["@module"])
				}
				found[msg] = true
			}
		}
		for _, w := range want {
			if !found[w] {
				t.Errorf("no JSON log line with @message %q:\n%s", w, m.logs())
			}
		}
	})
}

// TestPluginFieldRefusals: a field a plugin refuses is named to the
// operator (a config key, at start) and to the API caller (a record
// field, as an HTTP 400 with the field).
func TestPluginFieldRefusals(t *testing.T) {
	t.Parallel()
	dir := chattyDir(t)
	// Without --require-all the host starts and the realm answers 503
	// with the same reason (TestDamagedStoreStaysLocal).
	t.Run("config key at start", func(t *testing.T) {
		_, err := startChatty(t, dir, "", `{ greeting = "" }`, "--require-all")
		if err == nil || !strings.Contains(err.Error(), "config.greeting") {
			t.Fatalf("start with a refused config key: err = %v, want it to name config.greeting", err)
		}
		_, err = startChatty(t, dir, "", `{ greting = "hi" }`, "--require-all")
		if err == nil || !strings.Contains(err.Error(), "config.greting") {
			t.Fatalf("start with an unknown config key: err = %v, want it to name config.greting", err)
		}
	})
	t.Run("record field on write", func(t *testing.T) {
		m, err := startChatty(t, dir, "", `{ greeting = "hi" }`)
		if err != nil {
			t.Fatal(err)
		}
		var e apiError
		code := m.do("POST", "/v1/records", map[string]any{"records": []map[string]any{
			{"scope": "identity:alice", "kind": "fact", "title": "ok", "body": "fine"},
			{"scope": "identity:alice", "kind": "fact", "title": "no", "body": "a forbidden word"},
		}}, &e)
		if code != 400 || e.Error.Field != "records[1].body" || !strings.Contains(e.Error.Message, "records[1].body") {
			t.Fatalf("POST /v1/records = %d %+v, want 400 naming records[1].body", code, e)
		}
	})
}

// TestBrokenMarkdownFileIsLogged: a hand-edited record file that no longer
// parses drops out of recall, and the host log names the file.
func TestBrokenMarkdownFileIsLogged(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, markdownConfig)
	broken := filepath.Join(dataDir, "md", "default", "identity", "alice", "r0000000000001.md")
	if err := os.MkdirAll(filepath.Dir(broken), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(broken, []byte("---\ntitle: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	m.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "alice"}, "query": "anything"}, nil)
	waitForLog(t, m, fmt.Sprintf("file=%s", broken))
	// The operator sees it without the log: /v1/plugins lists it.
	if w := strings.Join(pluginStates(t, m)["notes"].Warnings, "\n"); !strings.Contains(w, "not a valid record") || !strings.Contains(w, broken) {
		t.Fatalf("/v1/plugins does not show the broken file; warnings: %q", w)
	}
}
