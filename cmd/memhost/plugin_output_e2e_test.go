package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
)

// hostileDir installs the hostile test plugin (cmd/memhost/testdata/hostile)
// beside the markdown provider.
func hostileDir(t *testing.T) string {
	t.Helper()
	dir := testbin.PrivatePluginDir(t, "markdown")
	testbin.InstallPlugin(t, dir, testbin.Build(t, "./cmd/memhost/testdata/hostile"))
	return dir
}

const hostileConfig = `
provider "bad" { plugin = "hostile" }
realm "default" { provider = "bad" }
`

// TestHostilePluginOutputCannotStopHost: a plugin's stderr, before the
// handshake and after it, carries JSON lines of every wrong shape (a
// number for @message, the line that made go-plugin panic), forged host
// lines, a 300 KiB line, 500 attributes and invalid UTF-8. The host keeps
// serving, logs each line once, at the plugin's level when it gave a valid
// one whatever its RFC 3339 timestamp, and lets no line forge another.
func TestHostilePluginOutputCannotStopHost(t *testing.T) {
	t.Parallel()
	dir := hostileDir(t)
	t.Run("json", func(t *testing.T) {
		cfg, data := writeConfigIn(t, dir, "log_format = \"json\"\n"+hostileConfig)
		m, err := startWithConfig(t, cfg, data)
		if err != nil {
			t.Fatal(err)
		}
		recall(t, m, "alice", "anything") // the plugin writes it all again in the call
		waitForLog(t, m, "pre survivor", "post survivor", "call survivor")
		if code := m.do("GET", "/v1/plugins", nil, nil); code != 200 {
			t.Fatalf("GET /v1/plugins = %d after the plugin's output", code)
		}
		m.stop()
		seen := map[string][]string{} // message -> levels
		for _, line := range strings.Split(m.logs(), "\n") {
			var entry map[string]any
			if json.Unmarshal([]byte(line), &entry) != nil {
				continue
			}
			msg, _ := entry["@message"].(string)
			level, _ := entry["@level"].(string)
			seen[msg] = append(seen[msg], level)
			if strings.HasSuffix(msg, "many keys") && len(entry) > 40 {
				t.Errorf("a line of 500 attributes kept %d fields", len(entry))
			}
		}
		for _, when := range []string{"pre", "post", "call"} {
			for msg, level := range map[string]string{
				" node millis":       "warn",
				" no fraction":       "error",
				" survivor":          "info",
				" level is a number": "info",
				" level off":         "info",
				" invalid utf-8":     "",
				" many keys":         "info",
			} {
				var levels []string
				for m, l := range seen {
					if strings.HasSuffix(m, when+msg) {
						levels = append(levels, l...)
					}
				}
				if len(levels) != 1 {
					t.Errorf("%q logged %d times (%v), want once", when+msg, len(levels), levels)
					continue
				}
				if level != "" && levels[0] != level {
					t.Errorf("%q logged at %s, want %s", when+msg, levels[0], level)
				}
			}
		}
		if len(seen["42"]) != 3 {
			t.Errorf("the line whose @message is 42 logged %d times, want 3 (pre, post, call)", len(seen["42"]))
		}
	})
	t.Run("text", func(t *testing.T) {
		cfg, data := writeConfigIn(t, dir, "log_format = \"text\"\nlog_level = \"debug\"\n"+hostileConfig)
		m, err := startWithConfig(t, cfg, data)
		if err != nil {
			t.Fatal(err)
		}
		waitForLog(t, m, "pre survivor", "post survivor")
		m.stop()
		if !strings.Contains(m.logs(), "plugin process exited") {
			t.Fatalf("no exit line to check:\n%.2000s", m.logs())
		}
		for _, line := range strings.Split(m.logs(), "\n") {
			if strings.Contains(line, "FORGED") && !strings.Contains(line, "plugin.bad:") {
				t.Errorf("a plugin forged a host log line: %q", line)
			}
			if len(line) > 80<<10 {
				t.Errorf("a log line of %d bytes: a plugin line is bounded", len(line))
			}
			// The plugin is named by its path, not the descriptor the
			// host execs; the host stamps a line once; a plugin the host
			// stopped did not fail.
			if strings.Contains(line, "/proc/self/fd/") || strings.Contains(line, " timestamp=") {
				t.Errorf("log line %.200q", line)
			}
			if strings.Contains(line, "plugin process exited") && !strings.Contains(line, "[DEBUG]") {
				t.Errorf("a plugin the host stopped is logged as %.200q", line)
			}
		}
	})
}

// TestPluginStartFailureSaysWhy: a plugin that dies before the handshake
// is reported with how it ended and its own last lines, by serve
// --require-all (without it the log says the same, see
// TestDamagedStoreStaysLocal), by
// plugins verify and by plugins manifest; one that writes to stdout
// instead of the handshake is told apart from it.
func TestPluginStartFailureSaysWhy(t *testing.T) {
	t.Parallel()
	dir := hostileDir(t)
	bin := testbin.Build(t, "./cmd/memhost")
	cfg, _ := writeConfigIn(t, dir, hostileConfig)
	crash := append(os.Environ(), "MEMHOST_TEST_HOSTILE=crash")
	run := func(env []string, args ...string) string {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("memhost %v succeeded with a plugin that cannot start:\n%s", args, out)
		}
		return string(out)
	}
	exe := filepath.Join(dir, "hostile") // as testbin installed it
	for name, out := range map[string]string{
		"serve":            run(crash, "serve", "--require-all", "--config", cfg),
		"plugins verify":   run(crash, "plugins", "verify", "--config", cfg),
		"plugins manifest": run(crash, "plugins", "manifest", exe),
	} {
		for _, want := range []string{"exited before the handshake", "exit status 1", `ModuleNotFoundError: No module named 'grpc'`} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: output lacks %q:\n%s", name, want, out)
			}
		}
		if strings.Contains(out, "stdout") {
			t.Errorf("%s: a crash is blamed on stdout:\n%s", name, out)
		}
	}
	out := run(append(os.Environ(), "MEMHOST_TEST_HOSTILE=stdout"), "serve", "--require-all", "--config", cfg)
	if !strings.Contains(out, `wrote "hello from a plugin that prints" to stdout`) {
		t.Errorf("serve does not say what the plugin wrote to stdout:\n%s", out)
	}
}

// TestClientCertificateIsP256: a plugin on gRPC over BoringSSL (Python's
// grpcio, among others) refuses a P-521 client certificate under TLS 1.3;
// the host's certificate is P-256, so such a plugin starts and serves.
func TestClientCertificateIsP256(t *testing.T) {
	cfg, data := writeConfigIn(t, hostileDir(t), hostileConfig)
	m, err := startWithConfig(t, cfg, data, "MEMHOST_TEST_HOSTILE=boringssl")
	if err != nil {
		t.Fatal(err)
	}
	recall(t, m, "alice", "anything")
}
