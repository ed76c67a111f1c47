package main

import (
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/pgtest"
)

// TestRealmConfiguredDifferentlyIsReported starts hosts on one PostgreSQL
// in turn: a host whose realm lives elsewhere, or whose sessions are kept
// by other budgets, than the host started before it says so at start,
// naming the realms; a host configured as the one before says nothing.
// It is not refused: a configuration change rolls out host by host.
func TestRealmConfiguredDifferentlyIsReported(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Shared(t).NewDatabase(t)
	env := []string{"MEMHOST_POSTGRES_DSN=" + dsn, "MEMHOST_HOST_KEY=" + hsKey}
	const warning = "another host sharing the session store started with other settings"
	teamElsewhere := strings.Replace(multiHostDeployment, `realm "team"    { provider = "main" }`, `provider "other" {
  plugin = "postgres"
  config = { pool_size = 2, schema = "other" }
}
realm "team" { provider = "other" }`, 1)
	for _, step := range []struct {
		name   string
		config string
		want   string // the realms warned about; "" none
	}{
		{"the first host", multiHostDeployment, ""},
		{"a host configured alike", strings.Replace(multiHostDeployment, "pool_size = 4", "pool_size = 6", 1), ""},
		{"a host with team in another provider", teamElsewhere, "realms=team"},
		{"a host as the first, while that one runs", multiHostDeployment, "realms=team"},
		{"a host with another session budget", strings.Replace(multiHostDeployment, "session_budget_bytes = 4096", "session_budget_bytes = 8192", 1), `realms="default,team"`},
	} {
		h := startMemhost(t, step.config, env...)
		logs := h.logs()
		h.stop()
		switch {
		case step.want == "" && strings.Contains(logs, warning):
			t.Errorf("%s: warned of other settings:\n%s", step.name, logs)
		case step.want != "" && !strings.Contains(logs, warning):
			t.Errorf("%s: no warning of other settings:\n%s", step.name, logs)
		case step.want != "" && !strings.Contains(logs, step.want):
			t.Errorf("%s: the warning does not name %s:\n%s", step.name, step.want, logs)
		}
	}
}
