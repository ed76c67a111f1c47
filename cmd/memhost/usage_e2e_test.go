package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/mcpserver"
)

// TestHotRecordUsesCountedInOneCall: through `memhost serve` with the real
// sqlite plugin, a record injected by every one of many concurrent turns
// is counted once per turn, and the telemetry writer sends the sqlite
// plugin (which declares usage_counts) its uses as counts, not one
// MarkUsed round per repeat: a record that every turn injects no longer
// costs a provider call per turn.
func TestHotRecordUsesCountedInOneCall(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`))
	ids := remember(t, m, map[string]any{"scope": "identity:alice", "kind": "fact", "title": "House rules", "body": "Quiet hours start at ten."})
	const turns, workers = 40, 8
	var wg sync.WaitGroup
	errs := make(chan string, turns)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < turns; i += workers {
				var out turnAnswer
				body := map[string]any{"identity": map[string]string{"id": "alice"}, "session": fmt.Sprintf("s%d", i), "content": "what are the house rules?"}
				if code := m.do("POST", "/v1/turns/inject", body, &out); code != 200 || len(out.RecordIDs) != 1 {
					errs <- fmt.Sprintf("turn %d = %d, injected %v", i, code, out.RecordIDs)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
	var rec struct {
		UseCount int64 `json:"use_count"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if code := m.do("GET", "/v1/records/"+ids[0], nil, &rec); code != 200 {
			t.Fatalf("GET record = %d", code)
		}
		if rec.UseCount == turns || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rec.UseCount != turns {
		t.Fatalf("use_count %d after %d turns injected the record, want %d", rec.UseCount, turns, turns)
	}
	text := scrape(t, m)
	calls := func(method string) int {
		re := regexp.MustCompile(`memhost_plugin_call_duration_seconds_count\{code="ok",instance="main",method="` + method + `"\} (\d+)`)
		mm := re.FindStringSubmatch(text)
		if mm == nil {
			return 0
		}
		n, _ := strconv.Atoi(mm[1])
		return n
	}
	counted, marked := calls("count_uses"), calls("mark_used")
	if marked != 0 || counted == 0 || counted > turns/2 {
		t.Fatalf("%d count_uses and %d mark_used calls for %d turns sharing one record, want a few count_uses and no mark_used:\n%s",
			counted, marked, turns, grepLines(text, "memhost_plugin_call_duration_seconds_count"))
	}
}

// Token secrets of the mob deployments below.
const (
	upApp     = "up-app-0123456789abcdef0123456789ab"
	upAlice   = "up-alice-0123456789abcdef012345678"
	upBob     = "up-bob-0123456789abcdef0123456789a"
	upRuntime = "up-runtime-0123456789abcdef0123456"
)

// usageTokens: an application token, agent tokens bound to alice and to
// bob, and an agent runtime's token that acts as any identity.
const usageTokens = `
token "app" {
  secret_env = "UP_APP"
  realms     = ["default"]
  role       = "application"
}
token "alice" {
  secret_env = "UP_ALICE"
  realms     = ["default"]
  identity   = "alice"
}
token "bob" {
  secret_env = "UP_BOB"
  realms     = ["default"]
  identity   = "bob"
}
token "runtime" {
  secret_env = "UP_RUNTIME"
  realms     = ["default"]
}
`

var usageEnv = []string{"UP_APP=" + upApp, "UP_ALICE=" + upAlice, "UP_BOB=" + upBob, "UP_RUNTIME=" + upRuntime}

// TestAgentsSeeNoOtherIdentitysUse: from an outside review. A record's
// use_count and last_used_at count every identity's turns, so an agent
// bound to alice read, on a record of the mob she shares with bob, the
// very millisecond bob's private turn injected it. Through `memhost
// serve` with the real sqlite plugin, after bob's turn injects the mob's
// record, an agent token (bound to alice, or acting for any identity)
// sees it unused on GET, recall and the manifest, and over MCP; the
// application token sees the use, and alice's own record keeps its
// usage for her agent.
func TestAgentsSeeNoOtherIdentitysUse(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, resolverDeployment(`mob_resolver = "teams"`)+usageTokens)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeBindings(t, filepath.Join(dataDir, "bindings.json"), `{"realms": {"default": {"mobs": {"alice": ["team-a"], "bob": ["team-a"]}}}}`)
	m, err := startWithConfig(t, cfgPath, dataDir, usageEnv...)
	if err != nil {
		t.Fatal(err)
	}
	app := m.as(upApp)
	ids := remember(t, app,
		map[string]any{"scope": "mob:team-a", "kind": "fact", "title": "Deploy day", "body": "Team A deploys on Tuesdays with the quince checklist."},
		map[string]any{"scope": "identity:alice", "kind": "preference", "title": "Tea", "body": "Alice drinks rooibos with her quince jam."})
	shared, own := ids[0], ids[1]

	// usage reads a record's usage fields as answered, absent ones as nil.
	type usage struct {
		UseCount   *int64  `json:"use_count"`
		LastUsedAt *string `json:"last_used_at"`
	}
	at := func(s *string) string {
		if s == nil {
			return "absent"
		}
		return *s
	}
	get := func(as *instance, id string) usage {
		t.Helper()
		var u usage
		if code := as.do("GET", "/v1/records/"+id, nil, &u); code != 200 || u.UseCount == nil {
			t.Fatalf("GET %s = %d %+v", id, code, u)
		}
		return u
	}
	if u := get(m.as(upAlice), shared); *u.UseCount != 0 || u.LastUsedAt != nil {
		t.Fatalf("the mob's record before any turn = %+v, want unused", u)
	}
	// Bob's private turn injects the mob's record; alice's injects her own.
	for _, tn := range []struct{ token, id, content string }{{upBob, "bob", "quince checklist deploys"}, {upAlice, "alice", "rooibos"}} {
		var out turnAnswer
		body := map[string]any{"identity": map[string]string{"id": tn.id}, "session": tn.id + "-private", "content": tn.content}
		if code := m.as(tn.token).do("POST", "/v1/turns/inject", body, &out); code != 200 || len(out.RecordIDs) == 0 {
			t.Fatalf("%s's turn = %d %+v", tn.id, code, out)
		}
	}
	// Uses are written behind the turn: wait for the application to see both.
	deadline := time.Now().Add(20 * time.Second)
	for {
		s, o := get(app, shared), get(app, own)
		if *s.UseCount > 0 && s.LastUsedAt != nil && *o.UseCount > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the application never saw the turns' uses: %+v %+v\n%s", s, o, m.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}

	for _, tc := range []struct {
		name  string
		token string
		sees  bool // the mob record's usage
	}{
		{"application", upApp, true},
		{"agent bound to alice", upAlice, false},
		{"agent runtime", upRuntime, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := m.as(tc.token)
			seen := func(where string, u usage) {
				t.Helper()
				if got := *u.UseCount > 0 && u.LastUsedAt != nil; got != tc.sees || (!tc.sees && (*u.UseCount != 0 || u.LastUsedAt != nil)) {
					t.Errorf("%s: the mob's record reads use_count %d, last_used_at %s; want its use shown: %v", where, *u.UseCount, at(u.LastUsedAt), tc.sees)
				}
			}
			seen("GET", get(as, shared))
			if u := get(as, own); *u.UseCount == 0 || u.LastUsedAt == nil {
				t.Errorf("GET alice's own record: use_count %d, last_used_at %s; want her use shown", *u.UseCount, at(u.LastUsedAt))
			}
			var recalled struct {
				Hits []struct {
					Record struct {
						ID string `json:"id"`
						usage
					} `json:"record"`
				} `json:"hits"`
			}
			if code := as.do("POST", "/v1/recall", map[string]any{"identity": map[string]string{"id": "alice"}, "query": "quince checklist"}, &recalled); code != 200 {
				t.Fatalf("recall = %d", code)
			}
			found := false
			for _, h := range recalled.Hits {
				if h.Record.ID == shared {
					found = true
					seen("recall", h.Record.usage)
				}
			}
			if !found {
				t.Fatalf("recall as alice missed the mob's record: %+v", recalled)
			}
			var manifest struct {
				Rows []struct {
					ID   string  `json:"id"`
					Rank float64 `json:"rank"`
				} `json:"rows"`
			}
			if code := as.do("POST", "/v1/manifest", map[string]any{"identity": map[string]string{"id": "alice"}}, &manifest); code != 200 {
				t.Fatalf("manifest = %d", code)
			}
			if len(manifest.Rows) != 2 {
				t.Fatalf("manifest = %+v, want the mob's record and alice's", manifest.Rows)
			}
			for _, r := range manifest.Rows {
				if want := r.ID == own || tc.sees; (r.Rank > 0) != want {
					t.Errorf("manifest row %s: rank %v, want ranked: %v", r.ID, r.Rank, want)
				}
			}
		})
	}

	// MCP callers are agents: no tool answer carries a record's usage.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cs, err := mcpHTTPClient(t, ctx, m.base+"/mcp", http.Header{"Authorization": {"Bearer " + upAlice}})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{mcpserver.ToolRecall, map[string]any{"query": "quince checklist"}},
		{mcpserver.ToolIndex, map[string]any{}},
	} {
		res := callTool(t, ctx, cs, call.tool, call.args, nil)
		answer, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		if res.IsError || !strings.Contains(string(answer), shared) {
			t.Fatalf("%s as alice: %s, want the mob's record", call.tool, answer)
		}
		for _, field := range []string{`"use_count"`, `"last_used_at"`, `"rank"`} {
			if strings.Contains(string(answer), field) {
				t.Errorf("%s as alice answers %s: %s", call.tool, field, answer)
			}
		}
	}
}

// TestBoundAgentsReachNoOtherMobByID: from an outside review. A bound
// agent writes and recalls only the shared scopes its identity reads, yet
// GET by id answered any mob's record whole, and DELETE answered 403
// naming the mob, confirming the id. A mob's record the identity does not
// read now answers as a missing record does, and stays.
func TestBoundAgentsReachNoOtherMobByID(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, resolverDeployment(`mob_resolver = "teams"`)+usageTokens)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeBindings(t, filepath.Join(dataDir, "bindings.json"), `{"realms": {"default": {"mobs": {"alice": ["team-a"], "carol": ["team-b"]}}}}`)
	m, err := startWithConfig(t, cfgPath, dataDir, usageEnv...)
	if err != nil {
		t.Fatal(err)
	}
	ids := remember(t, m.as(upApp),
		map[string]any{"scope": "mob:team-a", "kind": "fact", "title": "Team A plan", "body": "Team A ships the quince release."},
		map[string]any{"scope": "mob:team-b", "kind": "fact", "title": "Team B plan", "body": "Team B merges with zebracorp."})
	hers, other := ids[0], ids[1]
	const absent = "rnosuchrecord1"
	for _, method := range []string{"GET", "DELETE"} {
		var held, none apiError
		heldCode := m.as(upAlice).do(method, "/v1/records/"+other, nil, &held)
		noneCode := m.as(upAlice).do(method, "/v1/records/"+absent, nil, &none)
		if heldCode != noneCode || strings.ReplaceAll(held.Error.Message, other, absent) != none.Error.Message {
			t.Errorf("%s of another mob's record as alice = %d %q; of a missing one %d %q: they must not differ", method, heldCode, held.Error.Message, noneCode, none.Error.Message)
		}
	}
	for _, tc := range []struct {
		token, id string
		want      int
	}{
		{upAlice, hers, 200},
		{upRuntime, other, 200}, // an agent acting for any identity reads every mob
		{upApp, other, 200},     // and the other mob's record is still there
	} {
		if code := m.as(tc.token).do("GET", "/v1/records/"+tc.id, nil, nil); code != tc.want {
			t.Errorf("GET %s as %s = %d, want %d", tc.id, tc.token[:8], code, tc.want)
		}
	}
}
