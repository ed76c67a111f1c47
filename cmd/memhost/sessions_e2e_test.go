package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/statedb"
)

// Session e2e tests (DESIGN 5.7): budgets and dedup hold against a flood
// of another realm's sessions and across a host restart; nonces are
// derived, so they survive restarts and agree across hosts sharing a key.

// sessionBudgetDeployment is the sqlite provider with small budgets, so a
// session's budget runs out in a few turns.
const sessionBudgetDeployment = `
provider "main" {
  plugin = "sqlite"
  config = { path = "memory.db" }
}
coordinator {
  turn_budget_bytes    = 2048
  session_budget_bytes = 4096
  %s
}
%s
`

// seedEspresso stores n records in realm, each about 700 bytes rendered,
// all matching the query "espresso".
func seedEspresso(t *testing.T, m *instance, realm string, n int) {
	t.Helper()
	var recs []map[string]any
	for i := range n {
		recs = append(recs, map[string]any{
			"scope": "realm", "kind": "fact", "title": fmt.Sprintf("Espresso note %d", i),
			"body": fmt.Sprintf("espresso fact %d: %s", i, strings.Repeat("crema ", 90)),
		})
	}
	var out struct {
		IDs []string `json:"ids"`
	}
	if code := m.do("POST", "/v1/records", map[string]any{"realm": realm, "records": recs}, &out); code != 200 || len(out.IDs) != n {
		t.Fatalf("POST /v1/records in %s = %d %v\n%s", realm, code, out, m.logs())
	}
}

// sessionTurn runs one turn of (realm, identity, session) on "espresso".
func sessionTurn(t *testing.T, m *instance, realm, identity, session string) turnAnswer {
	t.Helper()
	var out turnAnswer
	req := map[string]any{"identity": map[string]string{"realm": realm, "id": identity}, "session": session, "content": "espresso please"}
	if code := m.do("POST", "/v1/turns/inject", req, &out); code != 200 {
		t.Fatalf("turns/inject %s/%s/%s = %d\n%s", realm, identity, session, code, m.logs())
	}
	return out
}

// victim is a session's history as a client saw it.
type victim struct {
	realm, identity, session string
	bytes                    int
	ids                      map[string]bool
	nonce                    string
}

// turn runs a turn and checks the session's promises: never more than the
// session budget in total, never one record twice, always the same nonce.
// It answers the skip reason ("" for an injection).
func (v *victim) turn(t *testing.T, m *instance) string {
	t.Helper()
	res := sessionTurn(t, m, v.realm, v.identity, v.session)
	if res.SkipReason != nil {
		return *res.SkipReason
	}
	v.bytes += res.Bytes
	if v.bytes > 4096 {
		t.Fatalf("session %s received %d bytes against its 4096-byte budget", v.session, v.bytes)
	}
	for _, id := range res.RecordIDs {
		if v.ids[id] {
			t.Fatalf("session %s received record %s twice", v.session, id)
		}
		v.ids[id] = true
	}
	n := nonceRE.FindStringSubmatch(res.InjectedContext[0])
	if n == nil {
		t.Fatalf("injection without a nonce:\n%s", res.InjectedContext[0])
	}
	if v.nonce != "" && n[1] != v.nonce {
		t.Fatalf("session %s's nonce changed from %s to %s", v.session, v.nonce, n[1])
	}
	v.nonce = n[1]
	return ""
}

// spent reports whether a skip says the budget is used up: none left, or
// less than any record needs (each renders to about 700 bytes).
func (v *victim) spent(reason string) bool {
	return reason == "budget_exhausted" || reason == "nothing_renderable" && 4096-v.bytes < 1024
}

// exhaust runs turns until the session's budget is spent.
func (v *victim) exhaust(t *testing.T, m *instance) {
	t.Helper()
	for range 10 {
		if reason := v.turn(t, m); reason != "" {
			if !v.spent(reason) {
				t.Fatalf("session %s stopped with %q before its budget was spent (%d bytes)", v.session, reason, v.bytes)
			}
			return
		}
	}
	t.Fatalf("session %s never exhausted its budget", v.session)
}

func newVictim(session string) *victim {
	return &victim{realm: "default", identity: "alice", session: session, ids: map[string]bool{}}
}

// prepareVictims seeds realm default and leaves two sessions: spent, whose
// budget is used up, and partial, which has injected once.
func prepareVictims(t *testing.T, m *instance) (spent, partial *victim) {
	t.Helper()
	seedEspresso(t, m, "default", 20)
	spent, partial = newVictim("spent"), newVictim("partial")
	spent.exhaust(t, m)
	if reason := partial.turn(t, m); reason != "" {
		t.Fatalf("partial session's first turn skipped: %s", reason)
	}
	return spent, partial
}

// checkVictims runs the sessions' next turns: spent stays spent; partial
// continues without repeating a record, under its budget and nonce.
func checkVictims(t *testing.T, m *instance, spent, partial *victim) {
	t.Helper()
	if reason := spent.turn(t, m); !spent.spent(reason) {
		t.Fatalf("the spent session's next turn = %q, want a skip for its spent budget", reason)
	}
	partial.exhaust(t, m)
}

func TestSessionsSurviveAnotherRealmsFlood(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		coordinator string // extra coordinator settings
		sessions    string // a sessions block
		flood       int
	}{
		// The cache in front of the store is far smaller than the flood.
		{"flood beyond the session cache", "session_cache_size = 50", "", 150},
		// The flooding realm passes its own bound and loses its own oldest.
		{"flood beyond the realm bound", "session_cache_size = 50", "sessions {\n  max_per_realm = 60\n}", 150},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := startMemhost(t, fmt.Sprintf(sessionBudgetDeployment, tt.coordinator, tt.sessions))
			spent, partial := prepareVictims(t, m)
			seedEspresso(t, m, "tenantB", 2)
			for i := range tt.flood {
				if res := sessionTurn(t, m, "tenantB", "mallory", fmt.Sprint("flood-", i)); res.SkipReason != nil {
					t.Fatalf("flood turn %d injected nothing (%s): it would take no session slot", i, *res.SkipReason)
				}
			}
			checkVictims(t, m, spent, partial)
		})
	}
}

func TestSessionsSurviveHostRestart(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		stop func(t *testing.T, m *instance)
	}{
		{"stopped", func(_ *testing.T, m *instance) { m.stop() }},
		{"killed", func(t *testing.T, m *instance) {
			pids := pluginPids(t, m)
			m.cmd.Process.Signal(syscall.SIGKILL)
			m.cmd.Wait()
			// The plugin notices its host is gone and exits, releasing its store.
			deadline := time.Now().Add(20 * time.Second)
			for _, pid := range pids {
				for alive(pid) {
					if time.Now().After(deadline) {
						t.Fatalf("plugin %d outlived its killed host", pid)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgPath, dataDir := writeConfig(t, fmt.Sprintf(sessionBudgetDeployment, "", ""))
			m, err := startWithConfig(t, cfgPath, dataDir)
			if err != nil {
				t.Fatal(err)
			}
			spent, partial := prepareVictims(t, m)
			tt.stop(t, m)
			m, err = startWithConfig(t, cfgPath, dataDir)
			if err != nil {
				t.Fatal(err)
			}
			checkVictims(t, m, spent, partial) // partial's nonce is checked to be unchanged
			fi, err := os.Stat(filepath.Join(dataDir, statedb.FileName))
			if err != nil || fi.Mode().Perm() != 0o600 {
				t.Fatalf("state database: %v, mode %v, want 0600", err, fi.Mode().Perm())
			}
		})
	}
}

// TestNoncesAreDerived: two hosts sharing host_key_env mint the same nonce
// for a session, a host with its own key another; each key part changes
// it; and neither the nonce nor the key appears in the logs.
func TestNoncesAreDerived(t *testing.T) {
	t.Parallel()
	const key = "shared-host-key-0123456789abcdef0123456789abcdef"
	env := "MEMHOST_E2E_HOST_KEY=" + key
	shared := fmt.Sprintf(sessionBudgetDeployment, "", `host_key_env = "MEMHOST_E2E_HOST_KEY"`)
	a := startMemhost(t, shared, env)
	b := startMemhost(t, shared, env)
	own := startMemhost(t, fmt.Sprintf(sessionBudgetDeployment, "", ""))
	nonce := func(m *instance, realm, identity, session string) string {
		t.Helper()
		res := sessionTurn(t, m, realm, identity, session)
		if len(res.InjectedContext) != 1 {
			t.Fatalf("turn %s/%s/%s injected nothing: %+v", realm, identity, session, res)
		}
		n := nonceRE.FindStringSubmatch(res.InjectedContext[0])
		if n == nil {
			t.Fatalf("no nonce in %s", res.InjectedContext[0])
		}
		return n[1]
	}
	for _, m := range []*instance{a, b, own} {
		seedEspresso(t, m, "default", 4)
		seedEspresso(t, m, "other", 4)
	}
	base := nonce(a, "default", "alice", "s1")
	if got := nonce(b, "default", "alice", "s1"); got != base {
		t.Fatalf("two hosts sharing host_key_env minted %s and %s for one session", base, got)
	}
	if got := nonce(own, "default", "alice", "s1"); got == base {
		t.Fatal("a host with its own key minted the shared key's nonce")
	}
	differ := []struct{ name, realm, identity, session string }{
		{"another session", "default", "alice", "s2"},
		{"another identity", "default", "bob", "s1"},
		{"another realm", "other", "alice", "s1"},
	}
	for _, d := range differ {
		if got := nonce(b, d.realm, d.identity, d.session); got == base {
			t.Errorf("%s has the same nonce", d.name)
		}
	}
	for _, m := range []*instance{a, b} {
		resp, err := http.Get(m.base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(metrics) == 0 || strings.Contains(string(metrics), base) || strings.Contains(string(metrics), key) {
			t.Fatalf("metrics are empty or show the nonce or the host key (%d bytes)", len(metrics))
		}
		m.stop()
		if logs := m.logs(); strings.Contains(logs, base) || strings.Contains(logs, key) {
			t.Fatal("the nonce or the host key appeared in the host's logs")
		}
	}
}
