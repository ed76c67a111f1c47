package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/pgtest"
)

// Many hosts, one PostgreSQL (issue #14): two `memhost serve` processes
// share the postgres provider, the session store and the host key. Turns
// of one session may land on either host, in turn or at once, and the
// session's budget, dedup and nonce hold; a host killed with SIGKILL
// takes nothing with it; a PostgreSQL restart answers 503 meanwhile and
// loses no acknowledged write.

// multiHostDeployment: both realms on one postgres provider, sessions in
// the same database (schema memhost_state), the budgets of
// sessionBudgetDeployment so a session runs out in a few turns.
const multiHostDeployment = `
host_key_env = "MEMHOST_HOST_KEY"
provider "main" {
  plugin = "postgres"
  config = { pool_size = 4, statement_timeout = "5s" }
}
realm "default" { provider = "main" }
realm "team"    { provider = "main" }
coordinator {
  turn_budget_bytes    = 2048
  session_budget_bytes = 4096
}
session_store {
  kind = "postgres"
}
`

// startHosts starts n hosts on the database dsn, each with its own data_dir.
func startHosts(t *testing.T, dsn string, n int) []*instance {
	t.Helper()
	env := []string{"MEMHOST_POSTGRES_DSN=" + dsn, "MEMHOST_HOST_KEY=" + "6d756c7469686f73742d6b65792d303132333435363738396162636465663031"}
	hosts := make([]*instance, n)
	for i := range hosts {
		hosts[i] = startMemhost(t, multiHostDeployment, env...)
	}
	return hosts
}

// rawTurn is one turn outside the test goroutine: it answers errors
// instead of failing the test, so concurrent callers can report them.
func rawTurn(base, realm, identity, session string) (turnAnswer, int, error) {
	body, _ := json.Marshal(map[string]any{"identity": map[string]string{"realm": realm, "id": identity}, "session": session, "content": "espresso please"})
	resp, err := http.Post(base+"/v1/turns/inject", "application/json", bytes.NewReader(body))
	if err != nil {
		return turnAnswer{}, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return turnAnswer{}, resp.StatusCode, err
	}
	var out turnAnswer
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, &out); err != nil {
			return out, resp.StatusCode, err
		}
	}
	return out, resp.StatusCode, nil
}

// ledger collects what concurrent turns of one session received.
type ledger struct {
	mu     sync.Mutex
	bytes  int
	ids    map[string]int
	nonces map[string]bool
	turns  int
	errs   []error
}

func newLedger() *ledger { return &ledger{ids: map[string]int{}, nonces: map[string]bool{}} }

func (l *ledger) add(res turnAnswer, code int, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.turns++
	if err == nil && code != http.StatusOK {
		err = fmt.Errorf("turn answered %d", code)
	}
	if err != nil {
		l.errs = append(l.errs, err)
		return
	}
	if res.SkipReason != nil {
		return
	}
	l.bytes += res.Bytes
	for _, id := range res.RecordIDs {
		l.ids[id]++
	}
	for _, c := range res.InjectedContext {
		if n := nonceRE.FindStringSubmatch(c); n != nil {
			l.nonces[n[1]] = true
		}
	}
}

// check holds the session's promises over everything l saw.
func (l *ledger) check(t *testing.T, what string) {
	t.Helper()
	for _, err := range l.errs {
		t.Errorf("%s: %v", what, err)
	}
	if l.bytes > 4096 {
		t.Errorf("%s: the session received %d bytes against its 4096-byte budget", what, l.bytes)
	}
	if l.bytes == 0 {
		t.Errorf("%s: no turn injected anything", what)
	}
	for id, n := range l.ids {
		if n > 1 {
			t.Errorf("%s: record %s injected %d times in one session", what, id, n)
		}
	}
	if len(l.nonces) > 1 {
		t.Errorf("%s: one session got %d nonces: %v", what, len(l.nonces), l.nonces)
	}
}

// concurrentTurns runs perHost goroutines on each host, turns turns each,
// all of one session, and answers what they received.
func concurrentTurns(hosts []*instance, realm, session string, perHost, turns int) *ledger {
	l := newLedger()
	var wg sync.WaitGroup
	for _, h := range hosts {
		for range perHost {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range turns {
					l.add(rawTurn(h.base, realm, "alice", session))
				}
			}()
		}
	}
	wg.Wait()
	return l
}

func TestTwoHostsShareOnePostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.Shared(t).NewDatabase(t)
	hosts := startHosts(t, dsn, 2)
	a, b := hosts[0], hosts[1]

	// A record written through A is recalled through B.
	seedEspresso(t, a, "default", 20)
	seedEspresso(t, a, "team", 12)
	if got := recall(t, b, "alice", "espresso fact 7"); len(got.Hits) == 0 || got.Hits[0].Record.Title != "Espresso note 7" {
		t.Fatalf("host B recalled %+v, want the note written through host A first", got)
	}

	t.Run("alternating", func(t *testing.T) {
		v := newVictim("alternating")
		for i := range 12 {
			if reason := v.turn(t, hosts[i%2]); reason != "" {
				if !v.spent(reason) {
					t.Fatalf("turn %d stopped with %q before the budget was spent (%d bytes)", i, reason, v.bytes)
				}
				return
			}
		}
		t.Fatal("the session never exhausted its budget across two hosts")
	})

	t.Run("concurrent", func(t *testing.T) {
		for round := range 3 {
			l := concurrentTurns(hosts, "default", fmt.Sprint("both-", round), 4, 3)
			l.check(t, fmt.Sprintf("round %d", round))
		}
	})

	t.Run("host killed mid-run", func(t *testing.T) {
		// Sessions in both realms, started on A, continue on B after A dies.
		team := &victim{realm: "team", identity: "bob", session: "before-kill", ids: map[string]bool{}}
		if reason := team.turn(t, a); reason != "" {
			t.Fatalf("first turn on A skipped: %s", reason)
		}
		running := newLedger()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for _, h := range hosts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					res, code, err := rawTurn(h.base, "default", "carol", "mid-run")
					if h == a && (err != nil || code != http.StatusOK) {
						continue // A is going down: its failures are expected
					}
					running.add(res, code, err)
				}
			}()
		}
		// Let both hosts serve the session a little, then kill A.
		deadline := time.Now().Add(20 * time.Second)
		for running.count() < 6 && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if err := a.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = a.cmd.Wait()
		for n := running.count(); running.count() < n+6 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		close(stop)
		wg.Wait()
		running.check(t, "turns across the kill")

		// B serves every realm: recall in both, and A's session goes on.
		for _, realm := range []string{"default", "team"} {
			var hits recallAnswer
			if code := b.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"realm": realm, "id": "dave"}, "query": "espresso fact 3"}, &hits); code != 200 || len(hits.Hits) == 0 {
				t.Errorf("after A's death, recall in realm %s through B = %d %+v", realm, code, hits)
			}
		}
		team.exhaust(t, b)
	})
}

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.turns
}

// TestPostgresRestartUnderTwoHosts stops the server under two hosts:
// every call answers 503 unavailable meanwhile; once it is back, both
// hosts serve again and every write acknowledged before is there.
func TestPostgresRestartUnderTwoHosts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := pgtest.Start(ctx, pgtest.Options{})
	if err != nil {
		if err == pgtest.ErrNoPostgres {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	name, err := c.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	hosts := startHosts(t, c.DSN(name), 2)
	a, b := hosts[0], hosts[1]
	acked := remember(t, a, map[string]any{"scope": "realm", "kind": "fact", "title": "Before the outage", "body": "The boiler room key hangs by the door."})
	seedEspresso(t, a, "default", 8)
	before := newVictim("outage")
	if reason := before.turn(t, b); reason != "" {
		t.Fatalf("turn before the outage skipped: %s", reason)
	}

	c.StopServer()
	for _, h := range hosts {
		for _, call := range []struct {
			method, path string
			body         any
		}{
			{"POST", "/v1/records", map[string]any{"records": []map[string]any{{"scope": "realm", "kind": "fact", "title": "During", "body": "written while the database is down"}}}},
			{"POST", "/v1/recall", map[string]any{"identity": map[string]string{"realm": "default", "id": "alice"}, "query": "boiler room key"}},
			{"POST", "/v1/turns/inject", map[string]any{"identity": map[string]string{"realm": "default", "id": "alice"}, "session": "outage", "content": "boiler room key"}},
		} {
			var e apiError
			if code := h.do(call.method, call.path, call.body, &e); code != http.StatusServiceUnavailable || e.Error.Code != "unavailable" {
				t.Errorf("%s %s during the outage = %d %+v, want 503 unavailable\n%s", call.method, call.path, code, e, h.logs())
			}
		}
	}

	if err := c.StartServer(ctx); err != nil {
		t.Fatal(err)
	}
	// Each host's pools reconnect on its own next calls; allow a few.
	for _, h := range hosts {
		var got recallAnswer
		deadline := time.Now().Add(30 * time.Second)
		for {
			got = recallAnswer{}
			code := h.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"realm": "default", "id": "alice"}, "query": "boiler room key"}, &got)
			if code == 200 || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if len(got.Hits) == 0 || got.Hits[0].Record.ID != acked[0] {
			t.Fatalf("after the restart, %s recalled %+v, want the record acknowledged before (%s)\n%s", h.base, got, acked[0], h.logs())
		}
	}
	remember(t, a, map[string]any{"scope": "realm", "kind": "fact", "title": "After the outage", "body": "The boiler was serviced in spring."})
	l := newLedger()
	for i := range 4 {
		l.add(rawTurn(hosts[i%2].base, "default", "alice", "after-outage"))
	}
	l.check(t, "turns after the restart")
	// The session served before the outage kept its accounting.
	before.exhaust(t, a)
}
