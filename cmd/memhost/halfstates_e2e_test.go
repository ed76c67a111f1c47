package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/memhost/memhost/internal/mcpserver"
	"github.com/memhost/memhost/internal/pgtest"
)

// Many hosts, no silent half-states (issue #29): two `memhost serve`
// processes on one PostgreSQL (postgres provider, postgres session store,
// one host key), as a limited role, attacked as an operator and a client
// would. Each subtest fails on a host that answers success for half a
// compaction, 500 for a refused connection or a NUL in a filter, serves
// with another host key or a broken schema, or lets a token act as any
// identity.

// Token secrets of halfStatesDeployment.
const (
	hsApp     = "hs-app-0123456789abcdef0123456789"
	hsAlice   = "hs-alice-0123456789abcdef01234567"
	hsRuntime = "hs-runtime-0123456789abcdef012345"
	hsKey     = "6d756c7469686f73742d6b65792d303132333435363738396162636465663031"
)

const halfStatesDeployment = `
host_key_env = "MEMHOST_HOST_KEY"
session_store { kind = "postgres" }
provider "main" {
  plugin = "postgres"
  config = { pool_size = 4, statement_timeout = "5s" }
}
realm "default" { provider = "main" }
compactor "summary" {
  plugin = "template"
  config = { max_bytes = 700 }
}
coordinator {
  compactor            = "summary"
  turn_budget_bytes    = 2048
  session_budget_bytes = 4096
}
token "app" {
  secret_env = "HS_TOKEN_APP"
  realms     = ["default"]
  role       = "application"
}
token "alice" {
  secret_env = "HS_TOKEN_ALICE"
  realms     = ["default"]
  identity   = "alice"
}
token "runtime" {
  secret_env = "HS_TOKEN_RUNTIME"
  realms     = ["default"]
}
`

// halfStates is the deployment under test: the cluster, the database, the
// limited role the hosts connect as, and the hosts.
type halfStates struct {
	c     *pgtest.Cluster
	db    string
	role  string
	env   []string
	hosts []*instance
}

// startHalfStates creates a database owned by a role of its own (a
// superuser ignores connection limits) and starts two hosts on it.
func startHalfStates(t *testing.T) *halfStates {
	t.Helper()
	ctx := context.Background()
	c := pgtest.Shared(t)
	dsn := c.NewDatabase(t)
	db := dsn[strings.Index(dsn, "dbname=")+len("dbname=") : strings.Index(dsn, " sslmode")]
	role := "memhost_" + db
	for _, sql := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"ALTER DATABASE " + db + " OWNER TO " + role,
	} {
		if err := c.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
		_ = c.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
	})
	hs := &halfStates{c: c, db: db, role: role, env: []string{
		"MEMHOST_POSTGRES_DSN=" + strings.Replace(dsn, "user=postgres", "user="+role, 1),
		"MEMHOST_HOST_KEY=" + hsKey,
		"HS_TOKEN_APP=" + hsApp, "HS_TOKEN_ALICE=" + hsAlice, "HS_TOKEN_RUNTIME=" + hsRuntime,
	}}
	for range 2 {
		h := startMemhost(t, halfStatesDeployment, hs.env...)
		h.token = hsApp
		hs.hosts = append(hs.hosts, h)
	}
	return hs
}

// sql runs statements as the superuser on the deployment's database.
func (hs *halfStates) sql(t *testing.T, stmts ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, hs.c.DSN(hs.db))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// as answers a view of host h calling with token secret.
func as(h *instance, secret string) *instance {
	return &instance{t: h.t, cmd: h.cmd, base: h.base, dataDir: h.dataDir, drained: h.drained, token: secret}
}

func TestManyHostsNoSilentHalfStates(t *testing.T) {
	t.Parallel()
	hs := startHalfStates(t)
	a, b := hs.hosts[0], hs.hosts[1]
	seedEspresso(t, a, "default", 20)

	t.Run("a compaction resets its session or answers an error", func(t *testing.T) {
		v := newVictim("compact-me")
		v.exhaust(t, a)
		evicted := history(6)

		// Another client holds the session's row past the store's
		// statement timeout: the reset cannot be made.
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, hs.c.DSN(hs.db))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var locked int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM memhost_state.sessions WHERE session = 'compact-me' FOR UPDATE) l`).Scan(&locked); err != nil || locked != 1 {
			t.Fatalf("lock the session row: %d rows, %v", locked, err)
		}
		code, res, e := compact(t, b, "conv-1", "compact-me", evicted)
		tx.Rollback(ctx)
		if code == http.StatusOK {
			t.Fatalf("compaction with its session reset impossible answered 200 %+v: a success without the reset", res)
		}
		if code != http.StatusGatewayTimeout && code != http.StatusServiceUnavailable {
			t.Errorf("compaction with the reset impossible = %d %+v, want 504 or 503", code, e)
		}

		// The retry, on the other host, compacts and resets as one.
		code, res, e = compact(t, a, "conv-1", "compact-me", evicted)
		if code != http.StatusOK || res.Compacted != len(evicted) {
			t.Fatalf("retry = %d %+v %+v, want every message compacted (nothing was saved before)", code, res, e)
		}
		// The session's budget and dedup were reset: it injects again.
		if got := sessionTurn(t, b, "default", "alice", "compact-me"); got.SkipReason != nil || got.Bytes == 0 {
			t.Errorf("the turn after the compaction skipped (%v): the session was not reset", *got.SkipReason)
		}
	})

	t.Run("a NUL or invalid text in a recall filter is a 400 naming the field", func(t *testing.T) {
		for _, h := range hs.hosts {
			for _, tc := range []struct {
				path  string
				body  map[string]any
				field string
			}{
				{"/v1/recall", map[string]any{"identity": map[string]string{"id": "alice"}, "query": "espresso", "tags": []string{"crema", "x\x00y"}}, "tags[1]"},
				{"/v1/recall", map[string]any{"identity": map[string]string{"id": "alice"}, "query": "espresso", "exclude_tags": []string{"\x00"}}, "exclude_tags[0]"},
				{"/v1/guide/session-start", map[string]any{"identity": map[string]string{"id": "alice"}, "session": "g", "task": "espresso", "required_tags": []string{"a\x00"}}, "required_tags[0]"},
			} {
				var e apiError
				if code := h.do("POST", tc.path, tc.body, &e); code != http.StatusBadRequest || e.Error.Field != tc.field {
					t.Errorf("%s with a NUL in %s = %d %+v, want 400 naming %s", tc.path, tc.field, code, e, tc.field)
				}
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cs, err := mcpHTTPClient(t, ctx, b.base+"/mcp", http.Header{"Authorization": {"Bearer " + hsApp}, "X-Memhost-Identity": {"alice"}})
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res := callTool(t, ctx, cs, mcpserver.ToolRecall, map[string]any{"query": "espresso", "tags": []string{"x\x00"}}, nil)
		if !res.IsError || !strings.Contains(toolText(res), "tags[0]") || strings.Contains(toolText(res), "SQLSTATE") {
			t.Errorf("MCP recall with a NUL tag = error %v %q, want a refusal naming tags[0]", res.IsError, toolText(res))
		}
	})

	t.Run("a token bound to an identity acts only as it", func(t *testing.T) {
		alice, runtime := as(a, hsAlice), as(b, hsRuntime)
		bobsID := remember(t, a, map[string]any{"scope": "identity:bob", "kind": "fact", "title": "Bob's note", "body": "Bob keeps his espresso beans in the freezer."})[0]
		turn := func(m *instance, id string) int {
			return m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]string{"id": id}, "session": "bound", "content": "espresso"}, nil)
		}
		for _, tc := range []struct {
			what string
			code int
			want int
		}{
			{"alice's token: a turn as alice", turn(alice, "alice"), 200},
			{"alice's token: a turn as bob", turn(alice, "bob"), 403},
			{"alice's token: a recall as bob", alice.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "bob"}, "query": "espresso"}, nil), 403},
			{"alice's token: a compaction as bob", alice.do("POST", "/v1/conversations/c-bob/compact", map[string]any{"identity": map[string]string{"id": "bob"}, "evicted": history(2)}, nil), 403},
			{"alice's token: a write to bob's scope", alice.do("POST", "/v1/records", map[string]any{"records": []map[string]any{{"scope": "identity:bob", "kind": "fact", "title": "Planted", "body": "planted"}}}, nil), 403},
			{"alice's token: a write to her own scope", alice.do("POST", "/v1/records", map[string]any{"records": []map[string]any{{"scope": "identity:alice", "kind": "fact", "title": "Mine", "body": "alice's own"}}}, nil), 200},
			// Another identity's record answers as a missing one does.
			{"alice's token: get bob's record", alice.do("GET", "/v1/records/"+bobsID, nil, nil), 404},
			{"alice's token: forget bob's record", alice.do("DELETE", "/v1/records/"+bobsID, nil, nil), 204},
			{"an unbound token: a turn as bob (today's runtime use)", turn(runtime, "bob"), 200},
		} {
			if tc.code != tc.want {
				t.Errorf("%s = %d, want %d", tc.what, tc.code, tc.want)
			}
		}
		if got := a.do("GET", "/v1/records/"+bobsID, nil, nil); got != 200 {
			t.Errorf("bob's record after alice's token tried to forget it: GET = %d", got)
		}

		// MCP: the token's one identity is the default, ?identity= is
		// accepted when the token allows it, another identity is refused.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		bearer := http.Header{"Authorization": {"Bearer " + hsAlice}}
		for _, endpoint := range []string{a.base + "/mcp", a.base + "/mcp?identity=alice"} {
			cs, err := mcpHTTPClient(t, ctx, endpoint, bearer)
			if err != nil {
				t.Fatalf("%s with alice's token: %v", endpoint, err)
			}
			if res := callTool(t, ctx, cs, mcpserver.ToolRecall, map[string]any{"query": "espresso"}, nil); res.IsError {
				t.Errorf("%s: recall failed: %s", endpoint, toolText(res))
			}
			cs.Close()
		}
		// A token without identities picks any through ?identity=.
		cs, err := mcpHTTPClient(t, ctx, b.base+"/mcp?identity=carol", http.Header{"Authorization": {"Bearer " + hsRuntime}})
		if err != nil {
			t.Fatalf("/mcp?identity=carol with the runtime's token: %v", err)
		}
		var stored struct {
			ID string `json:"id"`
		}
		if res := callTool(t, ctx, cs, mcpserver.ToolRemember, map[string]any{"title": "Carol's cup", "body": "Carol drinks a cortado."}, &stored); res.IsError {
			t.Fatalf("remember through /mcp?identity=carol: %s", toolText(res))
		}
		cs.Close()
		var rec struct {
			Scope string `json:"scope"`
		}
		if code := a.do("GET", "/v1/records/"+stored.ID, nil, &rec); code != 200 || rec.Scope != "identity:carol" {
			t.Errorf("the record remembered through /mcp?identity=carol = %d in scope %q, want identity:carol", code, rec.Scope)
		}
		for _, endpoint := range []string{a.base + "/mcp?identity=bob", b.base + "/mcp"} {
			h := bearer
			if strings.HasPrefix(endpoint, b.base) {
				h = http.Header{"Authorization": {"Bearer " + hsAlice}, "X-Memhost-Identity": {"bob"}}
			}
			if cs, err := mcpHTTPClient(t, ctx, endpoint, h); err == nil {
				cs.Close()
				t.Errorf("%s acting as bob with alice's token: connected", endpoint)
			}
		}

		// The CLI carries the token; the server holds it to its identity.
		env := []string{"MEMHOST_TOKEN=" + hsAlice}
		if _, err := runCLI(t, env, append([]string{"recall", "--identity", "bob", "espresso"}, cliAddr(b)...)...); err == nil || !strings.Contains(err.Error(), `may act only as identity "alice"`) {
			t.Errorf("CLI recall as bob with alice's token: %v, want the refusal", err)
		}
		if _, err := runCLI(t, env, append([]string{"recall", "--identity", "alice", "espresso"}, cliAddr(b)...)...); err != nil {
			t.Errorf("CLI recall as alice with alice's token: %v", err)
		}
	})

	t.Run("a refused connection is a 503 with Retry-After and no connection details", func(t *testing.T) {
		hs.sql(t, "ALTER ROLE "+hs.role+" CONNECTION LIMIT 2",
			"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '"+hs.role+"'")
		defer hs.sql(t, "ALTER ROLE "+hs.role+" CONNECTION LIMIT -1")
		type answer struct {
			path, id   string
			code       int
			retryAfter string
			body       string
		}
		var mu sync.Mutex
		var answers []answer
		var wg sync.WaitGroup
		for i := range 40 {
			h := hs.hosts[i%2]
			wg.Add(1)
			go func() {
				defer wg.Done()
				var body string
				var req *http.Request
				switch i % 3 {
				case 0:
					body = `{"identity":{"id":"alice"},"query":"espresso"}`
					req, _ = http.NewRequest("POST", h.base+"/v1/recall", strings.NewReader(body))
				case 1:
					body = fmt.Sprintf(`{"identity":{"id":"alice"},"session":"limit-%d","content":"espresso"}`, i)
					req, _ = http.NewRequest("POST", h.base+"/v1/turns/inject", strings.NewReader(body))
				default:
					body = fmt.Sprintf(`{"records":[{"scope":"realm","kind":"fact","title":"During the limit %d","body":"written at the connection limit"}]}`, i)
					req, _ = http.NewRequest("POST", h.base+"/v1/records", strings.NewReader(body))
				}
				req.Header.Set("Authorization", "Bearer "+hsApp)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				var e json.RawMessage
				json.NewDecoder(resp.Body).Decode(&e)
				mu.Lock()
				answers = append(answers, answer{req.URL.Path, resp.Header.Get("X-Request-Id"), resp.StatusCode, resp.Header.Get("Retry-After"), string(e)})
				mu.Unlock()
			}()
		}
		wg.Wait()
		refused := 0
		for _, ans := range answers {
			if ans.code != http.StatusOK {
				for _, leak := range []string{hs.role, hs.db, "user=", "database=", ".s.PGSQL", "/tmp/"} {
					if strings.Contains(ans.body, leak) {
						t.Errorf("%s answered %d naming %q: %s", ans.path, ans.code, leak, ans.body)
					}
				}
			}
			switch ans.code {
			case http.StatusOK:
			case http.StatusServiceUnavailable:
				refused++
				if ans.retryAfter == "" {
					t.Errorf("503 without Retry-After: %s", ans.body)
				}
			case http.StatusGatewayTimeout:
				// A recall path (500 ms) that spent its deadline on a
				// connection attempt the server then refused.
			default:
				t.Errorf("at the connection limit %s answered %d: %s", ans.path, ans.code, ans.body)
				for _, h := range hs.hosts {
					for _, line := range strings.Split(h.logs(), "\n") {
						if ans.id != "" && strings.Contains(line, ans.id) {
							t.Log(line)
						}
					}
				}
			}
		}
		if refused == 0 {
			t.Errorf("no call of %d was refused at a connection limit of 2 for two hosts", len(answers))
		}
	})

	t.Run("a host with another host key refuses to start", func(t *testing.T) {
		env := append([]string{}, hs.env...)
		env = append(env, "MEMHOST_HOST_KEY=6f746865722d6b65792d6f746865722d6b65792d6f746865722d6b65792d3031")
		h, err := tryStartMemhost(t, halfStatesDeployment, env...)
		if err == nil {
			h.stop()
			t.Fatal("a host with another host key started beside the others")
		}
		for _, want := range []string{"host_key_env", "Rotating the host key"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal does not say %q:\n%v", want, err)
			}
		}
	})

	t.Run("a schema renamed under the hosts is not ready, and refuses a start", func(t *testing.T) {
		hs.sql(t, "ALTER TABLE memhost.records RENAME TO records_old", "ALTER TABLE memhost_state.sessions RENAME TO sessions_old")
		for _, h := range hs.hosts {
			var body struct {
				Status string `json:"status"`
				Checks []struct {
					Name, Error string
				} `json:"checks"`
			}
			code := h.do("GET", "/readyz", nil, &body)
			if code != http.StatusServiceUnavailable || len(body.Checks) == 0 || !strings.Contains(body.Checks[0].Error, "table sessions") {
				t.Errorf("/readyz with the sessions table renamed = %d %+v, want 503 naming it", code, body)
			}
		}
		hs.sql(t, "ALTER TABLE memhost_state.sessions_old RENAME TO sessions")
		// The provider's watch notices within its interval; the restarted
		// plugin then fails its start on the same check.
		deadline := time.Now().Add(60 * time.Second)
		for {
			var body pluginsAnswer
			code := a.do("GET", "/readyz", nil, &body)
			if code == http.StatusServiceUnavailable {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz with the provider's records table renamed still answers %d after 60 s", code)
			}
			time.Sleep(500 * time.Millisecond)
		}
		cfgPath, dataDir := writeConfig(t, halfStatesDeployment)
		_, err := startServe(t, dataDir, []string{"--config", cfgPath, "--require-all"}, hs.env)
		if err == nil || !strings.Contains(err.Error(), "table records") || !strings.Contains(err.Error(), "rename it back") {
			t.Errorf("a host started on the renamed schema: %v, want a refusal naming table records and the fix", err)
		}
	})
}
