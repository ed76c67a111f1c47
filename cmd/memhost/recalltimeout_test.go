package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/memhost/memhost/internal/config"
)

// TestTestConfigsGetARecallTimeout: every shape of test config parses
// with the test recall deadline, and one that sets its own keeps it.
func TestTestConfigsGetARecallTimeout(t *testing.T) {
	for _, tc := range []struct{ name, body, want string }{
		{"no block", "", "20s"},
		{"multi-line block", "coordinator {\n  max_entries = 5\n}\n", "20s"},
		{"one-line block", "coordinator { max_entries = 5 }\n", "20s"},
		{"its own", "coordinator {\n  recall_timeout_ms = 700\n}\n", "700ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memhost.hcl")
			if err := os.WriteFile(path, []byte(withTestRecallTimeout(tc.body)), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatalf("%v\n%s", err, withTestRecallTimeout(tc.body))
			}
			if got := cfg.Coordinator.RecallTimeout.String(); got != tc.want {
				t.Errorf("recall timeout %s, want %s", got, tc.want)
			}
		})
	}
}
