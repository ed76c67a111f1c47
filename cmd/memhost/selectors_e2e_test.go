package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/memhost/memhost/internal/testbin"
)

// scopeRecords are one espresso record per scope class; each body names
// its scope, so an injection shows which scopes were composed.
var scopeRecords = []map[string]any{
	{"scope": "identity:alice", "kind": "fact", "title": "Espresso order", "body": "body-identity: no sugar."},
	{"scope": "mob:team", "kind": "fact", "title": "Espresso machine rota", "body": "body-mob: the team cleans it on Fridays."},
	{"scope": "operator:carol", "kind": "fact", "title": "Espresso budget", "body": "body-operator: carol approves beans."},
	{"scope": "realm", "kind": "fact", "title": "Espresso machine location", "body": "body-realm: second floor kitchen."},
}

var scopeBodyRE = regexp.MustCompile(`body-(identity|mob|operator|realm)`)

// injectedScopes answers the scope classes whose bodies text holds.
func injectedScopes(text string) []string {
	var out []string
	for _, m := range scopeBodyRE.FindAllStringSubmatch(text, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	slices.Sort(out)
	return out
}

func writeBindings(t *testing.T, path, content string) {
	t.Helper()
	// Write beside and rename over, as editors and config managers do.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

const aliceBindings = `{"realms": {"default": {"mobs": {"alice": ["team"]}, "operators": {"alice": "carol"}}}}`

// resolverDeployment is sqlite plus the given coordinator lines and, when
// resolvers are named, static resolver instances reading bindings.json in
// the data directory.
func resolverDeployment(coordinator string) string {
	return providerDeployment("sqlite", `{ path = "memory.db" }`) + `
mob_resolver "teams" {
  plugin = "static"
  config = { file = "bindings.json" }
}
operator_resolver "ops" {
  plugin = "static"
  config = { file = "bindings.json" }
}
coordinator {
` + coordinator + `
}
`
}

func turn(t testing.TB, m *instance, session, content string) turnAnswer {
	t.Helper()
	var out turnAnswer
	body := map[string]any{"identity": map[string]string{"id": "alice"}, "content": content}
	if session != "" {
		body["session"] = session
	}
	if code := m.do("POST", "/v1/turns/inject", body, &out); code != 200 {
		t.Fatalf("turns/inject = %d\n%s", code, m.logs())
	}
	return out
}

func build(t *testing.T, m *instance, query string) string {
	t.Helper()
	var out struct {
		Injection *string `json:"injection"`
	}
	if code := m.do("POST", "/v1/builds/inject", map[string]any{"identity": map[string]string{"id": "alice"}, "query_text": query}, &out); code != 200 {
		t.Fatalf("builds/inject = %d\n%s", code, m.logs())
	}
	if out.Injection == nil {
		return ""
	}
	return *out.Injection
}

// TestScopesFollowResolvers: mob and operator scopes reach turn and build
// injections only as DESIGN 5.3 says: mobs with a mob resolver; the
// operator only with operator_scope = "provisional" and an operator
// resolver, either alone changing nothing.
func TestScopesFollowResolvers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		coordinator string
		want        []string
	}{
		{"no resolvers", ``, []string{"identity", "realm"}},
		{"mob resolver", `mob_resolver = "teams"`, []string{"identity", "mob", "realm"}},
		{"operator resolver, scope off", `operator_resolver = "ops"`, []string{"identity", "realm"}},
		{"provisional without a resolver", `operator_scope = "provisional"`, []string{"identity", "realm"}},
		{"provisional with a resolver", "operator_scope = \"provisional\"\noperator_resolver = \"ops\"", []string{"identity", "operator", "realm"}},
		{"everything", "operator_scope = \"provisional\"\noperator_resolver = \"ops\"\nmob_resolver = \"teams\"", []string{"identity", "mob", "operator", "realm"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgPath, dataDir := writeConfig(t, resolverDeployment(tt.coordinator))
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				t.Fatal(err)
			}
			writeBindings(t, filepath.Join(dataDir, "bindings.json"), aliceBindings)
			m, err := startWithConfig(t, cfgPath, dataDir)
			if err != nil {
				t.Fatal(err)
			}
			remember(t, m, scopeRecords...)
			res := turn(t, m, "s1", "which espresso machine rules apply?")
			if got := injectedScopes(strings.Join(res.InjectedContext, "\n")); !slices.Equal(got, tt.want) {
				t.Errorf("turn injected scopes %v, want %v\n%v", got, tt.want, res.InjectedContext)
			}
			if got := injectedScopes(build(t, m, "espresso machine")); !slices.Equal(got, tt.want) {
				t.Errorf("build injected scopes %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBindingsEditWithoutRestart: an edit of the bindings file changes the
// next turn's scopes; a malformed edit keeps the last good bindings and
// says why in the log.
func TestBindingsEditWithoutRestart(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, resolverDeployment("mob_resolver = \"teams\"\nresolver_cache_ms = 0"))
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	bindings := filepath.Join(dataDir, "bindings.json")
	writeBindings(t, bindings, aliceBindings)
	m, err := startWithConfig(t, cfgPath, dataDir)
	if err != nil {
		t.Fatal(err)
	}
	remember(t, m, scopeRecords...)
	pidsBefore := pluginPids(t, m)
	steps := []struct {
		write string
		want  []string
	}{
		{"", []string{"identity", "mob", "realm"}},
		{`{"realms": {"default": {"mobs": {"alice": ["other"]}}}}`, []string{"identity", "realm"}},
		{aliceBindings, []string{"identity", "mob", "realm"}},
		{`{"realms": {"default": {"mobs": {"alice": "team"}}}}`, []string{"identity", "mob", "realm"}}, // malformed
	}
	for i, st := range steps {
		if st.write != "" {
			writeBindings(t, bindings, st.write)
		}
		res := turn(t, m, fmt.Sprintf("s%d", i), "espresso machine rules")
		if got := injectedScopes(strings.Join(res.InjectedContext, "\n")); !slices.Equal(got, st.want) {
			t.Errorf("step %d: injected scopes %v, want %v", i, got, st.want)
		}
	}
	// The plugin's line crosses its stderr pipe after the turn has answered.
	waitForLog(t, m, "bindings file refused")
	if !strings.Contains(m.logs(), "realms.default.mobs.alice") && !strings.Contains(m.logs(), "line 1") {
		t.Errorf("the malformed edit left no clear error in the log:\n%s", m.logs())
	}
	if !slices.Equal(pidsBefore, pluginPids(t, m)) {
		t.Error("a plugin restarted; bindings must reload in place")
	}
}

// TestLexicalSelectorChangesTheTurn: with the lexical selector a turn
// injects the record whose title matches, not the one that only repeats
// the words in its body, which plain recall also injects.
func TestLexicalSelectorChangesTheTurn(t *testing.T) {
	t.Parallel()
	records := []map[string]any{
		{"scope": "identity:alice", "kind": "procedure", "title": "Deploy checklist", "description": "before every release", "body": "Run the migrations first."},
		{"scope": "identity:alice", "kind": "fact", "title": "Lunch notes", "body": "We talked about the deploy checklist, the deploy checklist and the deploy checklist again."},
	}
	injected := func(coordinator string) []string {
		m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+"selector \"rerank\" { plugin = \"lexical\" }\n"+coordinator)
		ids := remember(t, m, records...)
		res := turn(t, m, "s", "where is the deploy checklist?")
		var out []string
		for _, id := range res.RecordIDs {
			out = append(out, map[string]string{ids[0]: "checklist", ids[1]: "lunch"}[id])
		}
		slices.Sort(out)
		return out
	}
	plain := injected("")
	selected := injected("coordinator {\n  selector = \"rerank\"\n}\n")
	if !slices.Equal(plain, []string{"checklist", "lunch"}) {
		t.Errorf("plain recall injected %v, want both records", plain)
	}
	if !slices.Equal(selected, []string{"checklist"}) {
		t.Errorf("the lexical selector injected %v, want only the checklist", selected)
	}
}

// TestSelectorSeesTheRecallRanking: the record a turn needs is older than
// the whole working set, and 1,000 newer records share one of the turn's
// words. /v1/recall ranks it first; the turn must inject it too: the
// selector's working set leads with recall's top records (it once held
// only the newest rows, and every turn answered no_records). With the
// fallback off, a selector that chooses nothing says selector_empty.
func TestSelectorSeesTheRecallRanking(t *testing.T) {
	t.Parallel()
	deployment := providerDeployment("sqlite", `{ path = "memory.db" }`) + "selector \"rerank\" { plugin = \"lexical\" }\n"
	m := startMemhost(t, deployment+"coordinator {\n  selector = \"rerank\"\n}\n")
	old := remember(t, m, map[string]any{"scope": "identity:alice", "kind": "gotcha", "title": "Kubernetes quota escalation", "body": "Page the platform team before raising quotas."})[0]
	for batch := range 10 {
		var recs []map[string]any
		for i := range 100 {
			recs = append(recs, map[string]any{"scope": "identity:alice", "kind": "fact", "title": fmt.Sprintf("Quota note %d-%d", batch, i), "body": "the monthly quota report"})
		}
		remember(t, m, recs...)
	}
	const ask = "kubernetes quota escalation"
	if got := recall(t, m, "alice", ask); len(got.Hits) == 0 || got.Hits[0].Record.ID != old {
		t.Fatalf("recall does not rank the record first: %+v", got.Hits[:min(3, len(got.Hits))])
	}
	if first := turn(t, m, "s", ask); !slices.Contains(first.RecordIDs, old) {
		t.Fatalf("first turn = %+v, want the record recall ranks first", first)
	}
}

// TestCompleteExampleStarts starts docs/config.md's complete example as
// written, only the listen address and directories pointed at the test's.
func TestCompleteExampleStarts(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile(filepath.Join(testbin.ModuleRoot(t), "docs", "config.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, example, _ := strings.Cut(string(raw), "## Complete example")
	_, example, _ = strings.Cut(example, "```hcl\n")
	example, _, _ = strings.Cut(example, "```")
	pluginDir := testbin.PluginDir(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "memhost-data")
	for key, value := range map[string]string{"listen": "127.0.0.1:0", "plugin_dir": pluginDir, "data_dir": dataDir} {
		re := regexp.MustCompile(`(?m)^` + key + `\s*=.*$`)
		if !re.MatchString(example) {
			t.Fatalf("the example has no %s line", key)
		}
		example = re.ReplaceAllString(example, fmt.Sprintf("%s = %q", key, value))
	}
	cfgPath := filepath.Join(dir, "memhost.hcl")
	if err := os.WriteFile(cfgPath, []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := startWithConfig(t, cfgPath, dataDir, "MEMHOST_TOKEN_OPS=ops-secret-0123456789abcdef", "MEMHOST_TOKEN_NOTES=notes-secret-0123456789abcdef")
	if err != nil {
		t.Fatal(err)
	}
	m.token = "ops-secret-0123456789abcdef"
	var plugins pluginsAnswer
	if code := m.do("GET", "/v1/plugins", nil, &plugins); code != 200 {
		t.Fatalf("GET /v1/plugins = %d\n%s", code, m.logs())
	}
	var healthy []string
	for _, p := range plugins.Plugins {
		if p.Healthy {
			healthy = append(healthy, p.Instance)
		}
	}
	for _, want := range []string{"main", "fulltext", "notes", "rerank", "summary", "teams"} {
		if !slices.Contains(healthy, want) {
			t.Errorf("instance %s is not running healthy: %+v", want, plugins)
		}
	}
	// The example's selector and mob resolver serve a turn.
	ids := remember(t, m, map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Espresso order", "body": "no sugar"})
	if res := turn(t, m, "s", "espresso order"); !slices.Equal(res.RecordIDs, ids) {
		data, _ := json.Marshal(res)
		t.Errorf("turn through the example = %s\n%s", data, m.logs())
	}
}
