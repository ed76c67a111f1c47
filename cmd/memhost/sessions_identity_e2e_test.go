package main

import (
	"fmt"
	"testing"

	"github.com/memhost/memhost/internal/pgtest"
)

// TestSessionsSurviveAnotherIdentitysFlood: with max_per_realm = 60, an
// identity opening more new sessions than the bound in alice's realm
// evicts its own oldest, never alice's: her spent session stays spent and
// her partial one never repeats a record, in either session store.
func TestSessionsSurviveAnotherIdentitysFlood(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		store string // a session_store block
		env   func(t *testing.T) []string
	}{
		{"embedded store", "", func(*testing.T) []string { return nil }},
		{"postgres store", `session_store { kind = "postgres" }`, func(t *testing.T) []string {
			return []string{"MEMHOST_POSTGRES_DSN=" + pgtest.Shared(t).NewDatabase(t)}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The cache in front of the embedded store is smaller than the
			// flood, so alice's sessions come back from its file.
			extra := "sessions {\n  max_per_realm = 60\n}\n" + tt.store
			m := startMemhost(t, fmt.Sprintf(sessionBudgetDeployment, "session_cache_size = 50", extra), tt.env(t)...)
			spent, partial := prepareVictims(t, m)
			for i := range 90 {
				if res := sessionTurn(t, m, "default", "mallory", fmt.Sprint("flood-", i)); res.SkipReason != nil {
					t.Fatalf("flood turn %d injected nothing (%s): it would take no session slot", i, *res.SkipReason)
				}
			}
			checkVictims(t, m, spent, partial)
		})
	}
}
