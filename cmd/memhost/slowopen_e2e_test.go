package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
)

// slowOpenConfig serves the default realm from the slowopen test plugin,
// whose store opens in openMS, under supervisor.configure_timeout_ms limitMS.
func slowOpenConfig(openMS, limitMS int) string {
	return fmt.Sprintf(`
provider "main" {
  plugin = "slowopen"
  config = { open_ms = %d }
}
realm "default" { provider = "main" }
coordinator { compactor = "" }
supervisor { configure_timeout_ms = %d }
`, openMS, limitMS)
}

// TestSlowOpenLimitIsConfigurable: a store that takes minutes to open (a
// large store migrating at an upgrade) met a fixed 2-minute limit: killed
// mid-migration at every start, it never opened, and the log said nothing
// an operator could change. The limit is supervisor.configure_timeout_ms:
// the log names it while the host waits and when the limit is hit, and a
// store that opens within it is served.
func TestSlowOpenLimitIsConfigurable(t *testing.T) {
	t.Parallel()
	dir := testbin.PrivatePluginDir(t, "markdown")
	testbin.InstallPlugin(t, dir, testbin.Build(t, "./cmd/memhost/testdata/slowopen"))

	t.Run("hit", func(t *testing.T) {
		t.Parallel()
		cfg, data := writeConfigIn(t, dir, slowOpenConfig(60000, 2000))
		m, err := startWithConfig(t, cfg, data)
		if err != nil {
			t.Fatal(err)
		}
		waitForLog(t, m, "did not finish configuring (opening its store) within 2s", "supervisor.configure_timeout_ms")
	})
	t.Run("within", func(t *testing.T) {
		t.Parallel()
		cfg, data := writeConfigIn(t, dir, slowOpenConfig(7000, 60000))
		m, err := startWithConfig(t, cfg, data)
		if err != nil {
			t.Fatal(err)
		}
		waitForLog(t, m, "waiting for the plugin to configure (open its store)", "setting=supervisor.configure_timeout_ms", "limit_ms=60000", "migrated")
		recall(t, m, "alice", "anything")
		if logs := m.logs(); strings.Contains(logs, "did not finish configuring") {
			t.Errorf("a store opening within the limit was killed:\n%s", logs)
		}
	})
}
