package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/mcpserver"
)

// Token secrets of the authorization matrix beyond matrixTokens'.
const (
	azAcme    = "az-acme-app-0123456789abcdef0123456"
	azUnknown = "az-unknown-0123456789abcdef01234567"
)

// azTokens adds an application token of another realm to matrixTokens.
const azTokens = matrixTokens + `
token "acme" {
  secret_env = "AZ_ACME"
  realms     = ["acme"]
  role       = "application"
}
`

// azCell is one cell of the matrix: one request by one token. A cell
// with fresh acts on a record made for it alone (an application's write
// of that scope, or with "proposal:" an unbound agent's proposal), named
// by {id} in its path; kept says whether that record must still be
// there, as it was, after the request.
type azCell struct {
	token, method, path string
	body                any
	fresh               string
	want                int
	kept                *bool
}

// TestAuthorizationMatrix pins docs/api.md's role rules against a real
// `memhost serve`, every /v1 route by every token shape: no token, an
// unknown one, an application token of another realm, an application
// token, an application token bound to alice, an agent token bound to
// alice and an unbound agent runtime's token; then the MCP tools by the
// same tokens. Alice reads mob team-a and operator acme; bob reads
// team-b and umbrella. A refused request changes nothing, and a bound
// token reaches no other identity's (or group's) records however it
// spells the name.
func TestAuthorizationMatrix(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, resolverDeployment("mob_resolver = \"teams\"\n  operator_resolver = \"ops\"\n  operator_scope = \"provisional\"")+azTokens)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeBindings(t, filepath.Join(dataDir, "bindings.json"), `{"realms": {"default": {"mobs": {"alice": ["team-a"], "bob": ["team-b"]}, "operators": {"alice": "acme", "bob": "umbrella"}}}}`)
	m, err := startWithConfig(t, cfgPath, dataDir, append(matrixEnv, "AZ_ACME="+azAcme)...)
	if err != nil {
		t.Fatal(err)
	}
	app := m.as(mxApp)
	started := time.Now()
	var notes atomic.Int64
	note := func(scope string) map[string]any {
		n := notes.Add(1)
		return map[string]any{"scope": scope, "kind": "fact", "title": fmt.Sprintf("Note %d quince", n), "body": fmt.Sprintf("Matrix note %d of %s grows quince.", n, scope)}
	}
	scopes := []string{"identity:alice", "identity:bob", "realm", "mob:team-a", "mob:team-b", "operator:acme", "operator:umbrella"}
	seed := map[string]string{}
	for _, sc := range scopes {
		seed[sc] = remember(t, app, note(sc))[0]
	}
	propose := func(token, scope string) string {
		var out struct{ IDs []string }
		if code := m.as(token).do("POST", "/v1/records", map[string]any{"records": []any{note(scope)}}, &out); code != 202 || len(out.IDs) != 1 {
			t.Fatalf("proposal into %s = %d %v", scope, code, out.IDs)
		}
		return out.IDs[0]
	}
	propRuntime, propAlice := propose(mxRuntime, "realm"), propose(mxAlice, "realm")
	// Turns of both identities, so traces and sessions exist.
	for _, who := range []string{"alice", "bob"} {
		if code := app.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]string{"id": who}, "session": "s1", "content": "quince"}, nil); code != 200 {
			t.Fatalf("%s's turn = %d", who, code)
		}
	}

	yes, no := true, false
	id := func(who string) map[string]string { return map[string]string{"id": who} }
	const (
		ok, accepted, gone, bad, unauth, deny, missing = 200, 202, 204, 400, 401, 403, 404
	)
	// by answers one want per token: app, alice-app, alice, runtime.
	type by [4]int
	tokens := [4]string{mxApp, mxAliceApp, mxAlice, mxRuntime}
	var cells []azCell
	add := func(method, path string, body any, fresh string, want by, kept [4]*bool) {
		for i, tok := range tokens {
			cells = append(cells, azCell{token: tok, method: method, path: path, body: body, fresh: fresh, want: want[i], kept: kept[i]})
		}
	}
	none := [4]*bool{}
	now := time.Now().UTC().Format(time.RFC3339)

	// Writes, scope by scope.
	for _, w := range []struct {
		scope string
		want  by
	}{
		{"identity:alice", by{ok, ok, ok, ok}},
		{"identity:bob", by{ok, deny, deny, ok}},
		{"realm", by{ok, ok, accepted, accepted}},
		{"mob:team-a", by{ok, ok, accepted, accepted}},
		{"mob:team-b", by{ok, deny, deny, accepted}},
		{"operator:acme", by{ok, ok, accepted, accepted}},
		{"operator:umbrella", by{ok, deny, deny, accepted}},
		{"Identity:bob", by{bad, bad, bad, bad}},
		{"identity:Bob", by{ok, deny, deny, ok}},
		{"identity:bob ", by{bad, bad, bad, bad}},
		{"identity:b%6Fb", by{bad, bad, bad, bad}},
		{"identity:bоb", by{bad, bad, bad, bad}}, // Cyrillic o
	} {
		for i, tok := range tokens {
			cells = append(cells, azCell{token: tok, method: "POST", path: "/v1/records", body: map[string]any{"records": []any{note(w.scope)}}, want: w.want[i]})
		}
	}
	// Reads by id.
	for _, g := range []struct {
		id   string
		want by
	}{
		{seed["identity:alice"], by{ok, ok, ok, ok}},
		{seed["identity:bob"], by{ok, missing, missing, ok}},
		{seed["realm"], by{ok, ok, ok, ok}},
		{seed["mob:team-a"], by{ok, ok, ok, ok}},
		{seed["mob:team-b"], by{ok, missing, missing, ok}},
		{seed["operator:acme"], by{ok, ok, ok, ok}},
		{seed["operator:umbrella"], by{ok, missing, missing, ok}},
		{propRuntime, by{ok, ok, missing, ok}},
		{propAlice, by{ok, ok, ok, missing}},
	} {
		add("GET", "/v1/records/"+g.id, nil, "", g.want, none)
		add("GET", "/v1/records/"+g.id+"?realm=acme", nil, "", by{deny, deny, deny, deny}, none)
		add("GET", "/v1/records/"+g.id+"?realm=Default", nil, "", by{deny, deny, deny, deny}, none)
		add("GET", "/v1/records/"+g.id+"?realm=default&realm=acme", nil, "", by{bad, bad, bad, bad}, none)
	}
	// Forgets, each of a record of its own.
	k := [4]*bool{&yes, &yes, &yes, &yes}
	add("DELETE", "/v1/records/{id}", nil, "identity:alice", by{gone, gone, gone, gone}, [4]*bool{&no, &no, &no, &no})
	add("DELETE", "/v1/records/{id}", nil, "identity:bob", by{gone, gone, gone, gone}, [4]*bool{&no, &yes, &yes, &no})
	add("DELETE", "/v1/records/{id}", nil, "realm", by{gone, gone, deny, deny}, [4]*bool{&no, &no, &yes, &yes})
	add("DELETE", "/v1/records/{id}", nil, "mob:team-a", by{gone, gone, deny, deny}, [4]*bool{&no, &no, &yes, &yes})
	add("DELETE", "/v1/records/{id}", nil, "mob:team-b", by{gone, gone, gone, deny}, [4]*bool{&no, &yes, &yes, &yes})
	add("DELETE", "/v1/records/{id}", nil, "operator:umbrella", by{gone, gone, gone, deny}, [4]*bool{&no, &yes, &yes, &yes})
	add("DELETE", "/v1/records/{id}", nil, "proposal:realm", by{gone, gone, gone, deny}, [4]*bool{&no, &no, &yes, &yes})
	add("DELETE", "/v1/records/{id}?realm=acme", nil, "identity:alice", by{deny, deny, deny, deny}, k)
	// Review.
	for _, verb := range []string{"approve", "reject"} {
		add("POST", "/v1/records/{id}/"+verb, nil, "proposal:realm", by{ok, ok, deny, deny}, [4]*bool{&no, &no, &yes, &yes})
		add("POST", "/v1/records/{id}/"+verb, nil, "proposal:mob:team-b", by{ok, missing, deny, deny}, [4]*bool{&no, &yes, &yes, &yes})
		add("POST", "/v1/records/{id}/"+verb, nil, "proposal:operator:umbrella", by{ok, missing, deny, deny}, [4]*bool{&no, &yes, &yes, &yes})
		add("POST", "/v1/records/{id}/"+verb+"?realm=acme", nil, "proposal:realm", by{deny, deny, deny, deny}, k)
	}
	// Listings and traces.
	for _, p := range []string{"/v1/proposals", "/v1/records", "/v1/records?q=quince", "/v1/scopes", "/v1/traces", "/v1/sessions/s1/trace", "/v1/records/" + seed["realm"] + "/trace"} {
		add("GET", p, nil, "", by{ok, ok, deny, deny}, none)
		sep := "?"
		if strings.Contains(p, "?") {
			sep = "&"
		}
		add("GET", p+sep+"realm=acme", nil, "", by{deny, deny, deny, deny}, none)
	}
	for _, sc := range []string{"identity:bob", "mob:team-b", "operator:umbrella", "identity:Bob"} {
		add("GET", "/v1/records?scope="+sc, nil, "", by{ok, deny, deny, deny}, none)
	}
	add("GET", "/v1/records?scope=identity:alice", nil, "", by{ok, ok, deny, deny}, none)
	add("GET", "/v1/sessions/s1/trace?identity=bob", nil, "", by{ok, deny, deny, deny}, none)
	add("GET", "/v1/sessions/s1/trace?identity=alice", nil, "", by{ok, ok, deny, deny}, none)
	add("GET", "/v1/plugins", nil, "", by{ok, ok, ok, ok}, none)
	// Acting as an identity: alice, bob, bob spelled otherwise.
	evicted := history(3)
	acting := []struct {
		method, path string
		body         func(who map[string]string) map[string]any
	}{
		{"POST", "/v1/recall", func(w map[string]string) map[string]any { return map[string]any{"identity": w, "query": "quince"} }},
		{"POST", "/v1/manifest", func(w map[string]string) map[string]any { return map[string]any{"identity": w} }},
		{"POST", "/v1/manifest", func(w map[string]string) map[string]any { return map[string]any{"identity": w, "tier": "full"} }},
		{"POST", "/v1/turns/inject", func(w map[string]string) map[string]any {
			return map[string]any{"identity": w, "session": "s2", "content": "quince"}
		}},
		{"POST", "/v1/builds/inject", func(w map[string]string) map[string]any { return map[string]any{"identity": w, "query_text": "quince"} }},
		{"POST", "/v1/defang", func(w map[string]string) map[string]any {
			return map[string]any{"identity": w, "session": "s1", "content": "hello"}
		}},
		{"POST", "/v1/sessions/s1/compacted", func(w map[string]string) map[string]any { return map[string]any{"identity": w} }},
		{"POST", "/v1/guide/session-start", func(w map[string]string) map[string]any {
			return map[string]any{"identity": w, "session": "g1", "task": "quince"}
		}},
		{"POST", "/v1/guide/before-iteration", func(w map[string]string) map[string]any {
			return map[string]any{"identity": w, "session": "g1", "last_user_message": "quince"}
		}},
		{"POST", "/v1/conversations/c{n}/compact", func(w map[string]string) map[string]any {
			return map[string]any{"identity": w, "evicted": evicted}
		}},
	}
	for _, a := range acting {
		want := ok
		if strings.HasSuffix(a.path, "/compacted") {
			want = gone
		}
		add(a.method, a.path, a.body(id("alice")), "", by{want, want, want, want}, none)
		add(a.method, a.path, a.body(id("bob")), "", by{want, deny, deny, want}, none)
		add(a.method, a.path, a.body(id("Alice")), "", by{want, deny, deny, want}, none)
		add(a.method, a.path, a.body(map[string]string{"id": "alice", "realm": "acme"}), "", by{deny, deny, deny, deny}, none)
		add(a.method, a.path, a.body(map[string]string{"id": "alice", "realm": "DEFAULT"}), "", by{deny, deny, deny, deny}, none)
		for _, odd := range []string{"alice ", "al\u0456ce", "alice\u200b", "%61lice", ""} {
			add(a.method, a.path, a.body(id(odd)), "", by{bad, bad, bad, bad}, none)
		}
	}
	add("POST", "/v1/recall", map[string]any{"identity": id("alice"), "query": "quince", "scopes": []string{"identity:bob"}}, "", by{deny, deny, deny, deny}, none)
	add("POST", "/v1/recall", map[string]any{"identity": id("alice"), "query": "quince", "scopes": []string{"mob:team-b"}}, "", by{deny, deny, deny, deny}, none)
	add("POST", "/v1/recall", map[string]any{"identity": id("alice"), "query": "quince", "scopes": []string{"mob:team-a"}}, "", by{ok, ok, ok, ok}, none)
	add("DELETE", "/v1/conversations/c1", nil, "", by{gone, gone, gone, bad}, none)
	add("DELETE", "/v1/conversations/c1?identity=alice", nil, "", by{gone, gone, gone, gone}, none)
	add("DELETE", "/v1/conversations/c1?identity=bob", nil, "", by{gone, deny, deny, gone}, none)
	add("DELETE", "/v1/conversations/c1?identity=Alice", nil, "", by{gone, deny, deny, gone}, none)
	add("DELETE", "/v1/conversations/c1?identity=alice&realm=acme", nil, "", by{deny, deny, deny, deny}, none)
	// Realm-wide verbs.
	add("POST", "/v1/export", map[string]any{}, "", by{ok, deny, deny, deny}, none)
	add("POST", "/v1/export", map[string]any{"realm": "acme"}, "", by{deny, deny, deny, deny}, none)
	add("POST", "/v1/import", map[string]any{"records": []any{}}, "", by{ok, deny, deny, deny}, none)
	add("POST", "/v1/import", map[string]any{"realm": "acme", "records": []any{map[string]any{"id": "razimport1", "scope": "identity:bob", "kind": "fact",
		"title": "Imported", "body": "Imported body.", "status": "active", "trust": "application", "created_at": now, "updated_at": now}}}, "", by{deny, deny, deny, deny}, none)
	add("POST", "/v1/admin/reindex", map[string]any{}, "", by{ok, deny, deny, deny}, none)
	add("POST", "/v1/admin/reindex", map[string]any{"realm": "acme"}, "", by{deny, deny, deny, deny}, none)

	// Every route refuses no token and an unknown one (401), and another
	// realm's token (403) wherever a realm is named (by default or not).
	routes := map[string]struct {
		path string
		body any
	}{}
	for _, c := range cells {
		if _, seen := routes[c.method+" "+strings.SplitN(c.path, "?", 2)[0]]; c.fresh == "" && !seen {
			routes[c.method+" "+strings.SplitN(c.path, "?", 2)[0]] = struct {
				path string
				body any
			}{strings.SplitN(c.path, "?", 2)[0], c.body}
		}
	}
	routes["DELETE /v1/records/x"] = struct {
		path string
		body any
	}{"/v1/records/" + seed["identity:alice"], nil}
	routes["POST approve"] = struct {
		path string
		body any
	}{"/v1/records/" + propRuntime + "/approve", nil}
	routes["POST reject"] = struct {
		path string
		body any
	}{"/v1/records/" + propRuntime + "/reject", nil}
	for key, r := range routes {
		method, _, _ := strings.Cut(key, " ")
		cells = append(cells, azCell{token: "", method: method, path: r.path, body: r.body, want: unauth},
			azCell{token: azUnknown, method: method, path: r.path, body: r.body, want: unauth})
		if r.path != "/v1/plugins" {
			cells = append(cells, azCell{token: azAcme, method: method, path: r.path, body: r.body, want: deny})
		}
	}

	names := map[string]string{"": "none", azUnknown: "unknown", azAcme: "acme-app", mxApp: "app", mxAliceApp: "alice-app", mxAlice: "alice", mxRuntime: "runtime"}
	// The cells touch no record but their own, so they run side by side.
	work := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				c := cells[i]
				path, freshID := strings.ReplaceAll(c.path, "{n}", strconv.Itoa(i)), ""
				if c.fresh != "" {
					if sc, ok := strings.CutPrefix(c.fresh, "proposal:"); ok {
						freshID = propose(mxRuntime, sc)
					} else {
						freshID = remember(t, app, note(c.fresh))[0]
					}
					path = strings.ReplaceAll(path, "{id}", freshID)
				}
				var before storedRecord
				if freshID != "" {
					_, before = getRecord(t, m, freshID)
				}
				code, answer := azDo(t, m.base, c.token, c.method, path, c.body)
				if code != c.want {
					t.Errorf("%s %s %v as %s = %d %s, want %d", c.method, path, c.body, names[c.token], code, answer, c.want)
				}
				if c.kept == nil || freshID == "" {
					continue
				}
				code, after := getRecord(t, m, freshID)
				switch {
				case *c.kept && (code != 200 || after.Status != before.Status || after.Title != before.Title):
					t.Errorf("%s %s as %s: its %s record = %d %+v, want it as it was (%+v)", c.method, path, names[c.token], c.fresh, code, after, before)
				case !*c.kept && code == 200 && after.Status == before.Status && hasProposalTag(after.Tags) == hasProposalTag(before.Tags):
					t.Errorf("%s %s as %s: its %s record is unchanged (%+v), want it acted on", c.method, path, names[c.token], c.fresh, after)
				}
			}
		}()
	}
	for i := range cells {
		work <- i
	}
	close(work)
	wg.Wait()
	// The refusals left every seeded record as it was.
	for sc, rid := range seed {
		if code, rec := getRecord(t, m, rid); code != 200 || rec.Status != "active" || rec.Scope != sc {
			t.Errorf("the %s record after the matrix = %d %+v", sc, code, rec)
		}
	}
	t.Logf("%d cells in %s", len(cells), time.Since(started))
	azMCP(t, m, seed)
}

// azDo sends one request as token ("" for none) and answers its status
// and body. The matrix is about who may do what: the exchanges are not
// held to docs/openapi.yaml here, as do holds them.
func azDo(t *testing.T, base, token, method, path string, body any) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// azMCP is the MCP half of the matrix: who may open /mcp as whom, and
// what each tool does with records of other identities and groups.
func azMCP(t *testing.T, m *instance, seed map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	names := map[string]string{"": "none", azUnknown: "unknown", azAcme: "acme-app", mxApp: "app", mxAliceApp: "alice-app", mxAlice: "alice", mxRuntime: "runtime"}
	// Who may open the endpoint as whom.
	for _, c := range []struct {
		token, identity, query string
		ok                     bool
	}{
		{"", "alice", "", false},
		{azUnknown, "alice", "", false},
		{azAcme, "alice", "", false},
		{mxApp, "alice", "", true},
		{mxApp, "", "", false},
		{mxAlice, "", "", true},
		{mxAlice, "bob", "", false},
		{mxAlice, "Alice", "", false},
		{mxAlice, "", "?identity=bob", false},
		{mxAlice, "", "?identity=%62ob", false},
		{mxAlice, "alice", "?identity=bob", false},
		{mxAlice, "", "?realm=acme", false},
		{mxAliceApp, "bob", "", false},
		{mxRuntime, "bob", "", true},
		{mxRuntime, "", "", false},
	} {
		h := http.Header{}
		if c.token != "" {
			h.Set("Authorization", "Bearer "+c.token)
		}
		if c.identity != "" {
			h.Set("X-Memhost-Identity", c.identity)
		}
		cs, err := mcpHTTPClient(t, ctx, m.base+"/mcp"+c.query, h)
		if (err == nil) != c.ok {
			t.Errorf("/mcp%s as %s, identity %q: opened %v (%v), want %v", c.query, names[c.token], c.identity, err == nil, err, c.ok)
		}
		if err == nil {
			cs.Close()
		}
	}
	// What the tools do as alice, by every token that may act as her.
	for _, tok := range []string{mxApp, mxAliceApp, mxAlice, mxRuntime} {
		cs, err := mcpHTTPClient(t, ctx, m.base+"/mcp", http.Header{"Authorization": {"Bearer " + tok}, "X-Memhost-Identity": {"alice"}})
		if err != nil {
			t.Fatalf("/mcp as %s: %v", names[tok], err)
		}
		for _, sc := range []string{"identity:bob", "mob:team-b", "operator:umbrella", "identity:Bob"} {
			if res := callTool(t, ctx, cs, mcpserver.ToolRemember, map[string]any{"scope": sc, "title": "Planted", "body": "Planted by " + names[tok] + "."}, nil); !res.IsError {
				t.Errorf("memory_remember into %s as %s acting as alice succeeded", sc, names[tok])
			}
		}
		for _, sc := range []string{"identity:bob", "mob:team-b", "operator:umbrella", "realm", "mob:team-a", "operator:acme"} {
			if res := callTool(t, ctx, cs, mcpserver.ToolForget, map[string]any{"id": seed[sc]}, nil); !res.IsError {
				t.Errorf("memory_forget of the %s record as %s acting as alice succeeded", sc, names[tok])
			}
		}
		var idx mcpserver.IndexOutput
		callTool(t, ctx, cs, mcpserver.ToolIndex, map[string]any{}, &idx)
		var rec mcpserver.RecallOutput
		callTool(t, ctx, cs, mcpserver.ToolRecall, map[string]any{"query": "quince", "limit": 50}, &rec)
		seen := map[string]bool{}
		for _, r := range idx.Rows {
			seen[r.Scope] = true
		}
		for _, h := range rec.Hits {
			seen[h.Scope] = true
		}
		for _, sc := range []string{"identity:bob", "mob:team-b", "operator:umbrella"} {
			if seen[sc] {
				t.Errorf("memory_index or memory_recall as %s acting as alice answered a record of %s", names[tok], sc)
			}
		}
		cs.Close()
	}
	for sc, rid := range seed {
		if code, rec := getRecord(t, m, rid); code != 200 || rec.Status != "active" {
			t.Errorf("the %s record after the MCP calls = %d %+v", sc, code, rec)
		}
	}
}
