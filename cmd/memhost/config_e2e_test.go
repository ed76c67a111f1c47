package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/config"
	"github.com/memhost/memhost/internal/pluginhost"
	"github.com/memhost/memhost/internal/testbin"
)

// TestServeRefusesPluginConfigAgainstSchema: every instance's config is
// checked against its plugin's declared schema before any plugin starts;
// every problem is reported at once with the file:line of its key.
func TestServeRefusesPluginConfigAgainstSchema(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, `
provider "main" {
  plugin = "sqlite"
  config = {
    pth = "memory.db"
  }
}

compactor "summary" {
  plugin = "template"
  config = { max_bytes = 10 }
}

coordinator {
  compactor = "summary"
}
`)
	out, err := testbin.Command(testbin.Build(t, "./cmd/memhost"), "serve", "--config", cfgPath, "--log-level", "trace").CombinedOutput()
	if err == nil {
		t.Fatalf("serve started with a misspelled plugin config key:\n%s", out)
	}
	// writeConfig puts three lines before the body.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`memhost\.hcl:8,5-\d+: Invalid plugin config; provider "main" config: pth: unknown key \(the plugin's schema allows ledger_max_rows, ledger_retention_hours, path, posting_budget\)`),
		regexp.MustCompile(`memhost\.hcl:14,14-\d+: Invalid plugin config; compactor "summary" config: max_bytes: minimum: got 10, want 256`),
	} {
		if !want.Match(out) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "plugin started") || strings.Contains(string(out), "starting plugin") {
		t.Errorf("a plugin was started before the config was checked:\n%s", out)
	}
	// The sqlite plugin would have created its database (or its lock).
	if matches, _ := filepath.Glob(filepath.Join(dataDir, "memory.db*")); len(matches) > 0 {
		t.Errorf("the provider ran: %v", matches)
	}
}

// TestServeRefusesCoordinatorValuesAtLoad: values the coordinator refuses
// are refused at load, each at its line, in one pass.
func TestServeRefusesCoordinatorValuesAtLoad(t *testing.T) {
	t.Parallel()
	cfgPath, _ := writeConfig(t, `
coordinator {
  max_entries       = 500
  turn_budget_bytes = 70000
}
`)
	out, err := testbin.Command(testbin.Build(t, "./cmd/memhost"), "serve", "--config", cfgPath).CombinedOutput()
	if err == nil {
		t.Fatalf("serve started with coordinator values it refuses:\n%s", out)
	}
	for _, want := range []string{
		"memhost.hcl:6,23-26: Invalid max_entries; max_entries 500 is outside 1..100.",
		"memhost.hcl:7,23-28: Invalid turn_budget_bytes; turn_budget_bytes 70000 exceeds session_budget_bytes 61440.",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestFirstPartySchemasAreClosed: every first-party plugin's declared
// config schema compiles, refuses an unknown key at the top level, and
// accepts the configs the documentation and examples use.
func TestFirstPartySchemasAreClosed(t *testing.T) {
	t.Parallel()
	entries, refusals, err := pluginhost.Discover(testbin.PluginDir(t))
	if err != nil || len(refusals) > 0 {
		t.Fatalf("discover: %v %v", err, refusals)
	}
	good := map[string]string{
		"sqlite":   `{"path":"memory.db","posting_budget":0,"ledger_retention_hours":720,"ledger_max_rows":10000000}`,
		"bleve":    `{"dir":"bleve"}`,
		"markdown": `{"root":"md"}`,
		"postgres": `{"dsn_env":"MEMHOST_POSTGRES_DSN","schema":"memhost","pool_size":8,"statement_timeout":"10s","replica":{"enabled":true,"poll_interval":"1s","read_wait":"200ms","max_lag":"2s","change_retention":"1h"},"ledger_retention_hours":720,"ledger_max_rows":10000000}`,
		"template": `{"max_bytes":4096,"line_bytes":400,"header":"Summary of earlier conversation"}`,
		"llm":      `{"base_url":"http://127.0.0.1:1/v1","model":"m","api_key_env":"","timeout_ms":25000,"max_tokens":1024,"temperature":0,"max_bytes":8192,"max_rows":400}`,
		"lexical":  `{"min_score":0.5,"recency_half_life_days":30,"recency_weight":0.2}`,
		"static":   `{"file":"bindings.json"}`,
		"wordvec":  `{"table":"wordvec/sg100d-50k.wvt"}`,
		"openai":   `{"base_url":"http://127.0.0.1:1/v1","model":"m","dimensions":4,"send_dimensions":false,"model_id":"m/4","api_key_env":"","query_prefix":"query: ","document_prefix":"passage: ","request_batch":64,"parallel":4,"max_input_bytes":8192,"timeout_ms":30000,"max_retries":4,"retry_base_ms":250,"deterministic":false}`,
	}
	seen := 0
	for _, e := range entries {
		name := e.Manifest.Name
		if len(e.Manifest.ConfigSchema) == 0 {
			t.Errorf("%s declares no config_schema", name)
			continue
		}
		plugins := map[string]config.Plugin{name: {Kinds: e.Manifest.Kinds, Schema: e.Manifest.ConfigSchema}}
		check := func(raw string) error {
			c := config.Default()
			c.Instances = []config.Instance{{Kind: e.Manifest.Kinds[0], Name: "x", Plugin: name, Config: json.RawMessage(raw)}}
			return c.CheckPlugins(plugins)
		}
		if err := check(`{"no_such_key":1}`); err == nil || !strings.Contains(err.Error(), "no_such_key: unknown key") {
			t.Errorf("%s: an unknown key is not refused: %v", name, err)
		}
		if raw, ok := good[name]; !ok {
			t.Errorf("%s: no known-good config in this test", name)
		} else if err := check(raw); err != nil {
			t.Errorf("%s: a good config is refused: %v", name, err)
		}
		seen++
	}
	if seen != len(testbin.FirstPartyPlugins) {
		t.Errorf("checked %d plugins, want %d", seen, len(testbin.FirstPartyPlugins))
	}
}
