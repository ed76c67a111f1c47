package main

import (
	"context"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memhost/memhost/internal/mcpserver"
)

// Token secrets of the role-matrix deployments.
const (
	mxApp      = "mx-app-0123456789abcdef0123456789ab"
	mxAliceApp = "mx-alice-app-0123456789abcdef012345"
	mxAlice    = "mx-alice-0123456789abcdef0123456789"
	mxRuntime  = "mx-runtime-0123456789abcdef01234567"
)

// matrixTokens: an application token, an application token bound to
// alice, an agent token bound to alice and an agent runtime's token that
// acts as any identity.
const matrixTokens = `
token "app" {
  secret_env = "MX_APP"
  realms     = ["default"]
  role       = "application"
}
token "alice-app" {
  secret_env = "MX_ALICE_APP"
  realms     = ["default"]
  role       = "application"
  identity   = "alice"
}
token "alice" {
  secret_env = "MX_ALICE"
  realms     = ["default"]
  identity   = "alice"
}
token "runtime" {
  secret_env = "MX_RUNTIME"
  realms     = ["default"]
}
`

var matrixEnv = []string{"MX_APP=" + mxApp, "MX_ALICE_APP=" + mxAliceApp, "MX_ALICE=" + mxAlice, "MX_RUNTIME=" + mxRuntime}

type storedRecord struct {
	ID, Scope, Title, Body, Status, Trust string
	Tags                                  []string
}

func getRecord(t *testing.T, m *instance, id string) (int, storedRecord) {
	t.Helper()
	var rec storedRecord
	code := m.as(mxApp).do("GET", "/v1/records/"+id, nil, &rec)
	return code, rec
}

func hasProposalTag(tags []string) bool {
	for _, tag := range tags {
		if tag == "memhost:proposal" {
			return true
		}
	}
	return false
}

// TestApplicationWriteIsNotTakenByAProposal: a provider answers a write
// of content its scope already holds with the holder's id, and a pending
// proposal holds its content. An agent that proposed a shared record's
// content first used to have the application's own write of it answered
// with the proposal's id: a quarantined record, never recalled, with the
// agent's trust. The application's write now drops the proposal (from
// the store and the queue, as an approval over a target does) and stores
// the application's record, in every shared scope, on every provider that
// holds proposals; a retry answers the same record, and a batch holding
// the content twice gets it once.
func TestApplicationWriteIsNotTakenByAProposal(t *testing.T) {
	t.Parallel()
	for _, pc := range providerConfigs {
		if pc.plugin != "sqlite" && pc.plugin != "bleve" && pc.plugin != "markdown" {
			continue
		}
		t.Run(pc.plugin, func(t *testing.T) {
			t.Parallel()
			m := startMemhost(t, providerDeployment(pc.plugin, pc.config)+matrixTokens, matrixEnv...)
			for _, scope := range []string{"realm", "mob:ops", "operator:acme"} {
				title, body := "Deploy day "+scope, "Deploys of "+scope+" go out on Tuesdays with the quince checklist."
				rec := map[string]any{"scope": scope, "kind": "fact", "title": title, "body": body, "trust": "operator"}
				var prop struct{ IDs []string }
				if code := m.as(mxRuntime).do("POST", "/v1/records", map[string]any{"records": []any{rec}}, &prop); code != 202 || len(prop.IDs) != 1 {
					t.Fatalf("%s: the agent's proposal = %d %v", scope, code, prop.IDs)
				}
				var out struct{ IDs []string }
				if code := m.as(mxApp).do("POST", "/v1/records", map[string]any{"records": []any{rec, rec}}, &out); code != 200 || len(out.IDs) != 2 {
					t.Fatalf("%s: the application's write = %d %v", scope, code, out.IDs)
				}
				if out.IDs[0] == prop.IDs[0] || out.IDs[1] != out.IDs[0] {
					t.Fatalf("%s: the application's write of the proposed content was answered %v; want one new record for both, not proposal %s", scope, out.IDs, prop.IDs[0])
				}
				code, got := getRecord(t, m, out.IDs[0])
				if code != 200 || got.Status != "active" || got.Trust != "operator" || hasProposalTag(got.Tags) {
					t.Fatalf("%s: the application's record = %d %+v; want active, with its own trust, untagged", scope, code, got)
				}
				if code, old := getRecord(t, m, prop.IDs[0]); code != 404 {
					t.Errorf("%s: the proposal = %d %+v, want it dropped", scope, code, old)
				}
				var again struct{ IDs []string }
				if code := m.as(mxApp).do("POST", "/v1/records", map[string]any{"records": []any{rec}}, &again); code != 200 || len(again.IDs) != 1 || again.IDs[0] != out.IDs[0] {
					t.Errorf("%s: a retry = %d %v, want %s", scope, code, again.IDs, out.IDs[0])
				}
			}
			var list proposalList
			if code := m.as(mxApp).do("GET", "/v1/proposals", nil, &list); code != 200 || list.Pending != 0 || len(list.Proposals) != 0 {
				t.Errorf("the queue after the application's writes = %d %+v, want empty", code, list)
			}
			if got := recall(t, m.as(mxRuntime), "carol", "quince checklist tuesdays"); len(got.Hits) != 1 {
				t.Errorf("the application's realm record is not recalled: %+v", got.Hits)
			}
		})
	}
}

// TestApplicationImportIsNotTakenByAProposal: from an outside review.
// A provider skips an imported record whose content its scope holds live,
// a pending proposal included, so an agent that proposed a shared
// record's content first kept the application's import of it out of the
// store (sqlite and bleve answered imported 0, skipped 1: the record was
// never fetchable nor recalled). The import now drops such a proposal
// first, as the write path does, and stores the record, on every provider
// that holds proposals; a rerun skips it, and a proposal of content the
// import does not hold stays pending.
func TestApplicationImportIsNotTakenByAProposal(t *testing.T) {
	t.Parallel()
	for _, pc := range providerConfigs {
		if pc.plugin != "sqlite" && pc.plugin != "bleve" && pc.plugin != "markdown" {
			continue
		}
		t.Run(pc.plugin, func(t *testing.T) {
			t.Parallel()
			m := startMemhost(t, providerDeployment(pc.plugin, pc.config)+matrixTokens, matrixEnv...)
			now := time.Now().UTC().Format(time.RFC3339)
			var records []any
			var proposals []string
			for i, scope := range []string{"realm", "mob:ops", "operator:acme"} {
				title, body := "Refund policy "+scope, "Refunds of "+scope+" are granted within 30 days, on the damson form."
				var prop struct{ IDs []string }
				rec := map[string]any{"scope": scope, "kind": "procedure", "title": title, "body": body}
				if code := m.as(mxRuntime).do("POST", "/v1/records", map[string]any{"records": []any{rec}}, &prop); code != 202 || len(prop.IDs) != 1 {
					t.Fatalf("%s: the agent's proposal = %d %v", scope, code, prop.IDs)
				}
				proposals = append(proposals, prop.IDs[0])
				records = append(records, map[string]any{"id": "rimportpolicy" + strconv.Itoa(i), "scope": scope, "kind": "procedure",
					"title": title, "body": body, "status": "active", "trust": "application", "created_at": now, "updated_at": now})
			}
			var other struct{ IDs []string }
			if code := m.as(mxRuntime).do("POST", "/v1/records", map[string]any{"records": []any{map[string]any{
				"scope": "realm", "kind": "fact", "title": "Canteen", "body": "The canteen serves medlar pie on Thursdays."}}}, &other); code != 202 || len(other.IDs) != 1 {
				t.Fatalf("the agent's other proposal = %d %v", code, other.IDs)
			}
			for run, want := range []struct{ imported, skipped int }{{3, 0}, {0, 3}} {
				var res struct{ Imported, Skipped int }
				if code := m.as(mxApp).do("POST", "/v1/import", map[string]any{"records": records}, &res); code != 200 || res.Imported != want.imported || res.Skipped != want.skipped {
					t.Fatalf("import run %d = %d %+v, want imported %d, skipped %d", run+1, code, res, want.imported, want.skipped)
				}
			}
			for i, id := range proposals {
				if code, got := getRecord(t, m, "rimportpolicy"+strconv.Itoa(i)); code != 200 || got.Status != "active" || got.Trust != "application" {
					t.Errorf("imported record %d = %d %+v, want it stored as imported", i, code, got)
				}
				if code, old := getRecord(t, m, id); code != 404 {
					t.Errorf("the proposal %s of record %d = %d %+v, want it dropped", id, i, code, old)
				}
			}
			var list proposalList
			if code := m.as(mxApp).do("GET", "/v1/proposals", nil, &list); code != 200 || list.Pending != 1 || len(list.Proposals) != 1 || list.Proposals[0].ID != other.IDs[0] {
				t.Errorf("the queue after the import = %d %+v, want the other proposal alone", code, list)
			}
			if got := recall(t, m.as(mxRuntime), "carol", "refunds damson form"); len(got.Hits) != 1 || got.Hits[0].Record.ID != "rimportpolicy0" {
				t.Errorf("the imported realm record is not recalled: %+v", got.Hits)
			}
		})
	}
}

// TestApprovalActivatesOnEveryProvider: an approval answers an active
// record without the proposal tag, recalled, on every provider that holds
// proposals. On bleve, which answers a write of content its scope holds
// with the holder, superseding a proposal with its own content changed
// nothing: the approval answered 200 "active" with the proposal's id, and
// the proposal stayed quarantined, never recalled.
func TestApprovalActivatesOnEveryProvider(t *testing.T) {
	t.Parallel()
	for _, pc := range providerConfigs {
		if pc.plugin != "sqlite" && pc.plugin != "bleve" && pc.plugin != "markdown" {
			continue
		}
		t.Run(pc.plugin, func(t *testing.T) {
			t.Parallel()
			m := startMemhost(t, providerDeployment(pc.plugin, pc.config)+matrixTokens, matrixEnv...)
			var prop struct{ IDs []string }
			rec := map[string]any{"scope": "realm", "kind": "fact", "title": "Canteen", "body": "The canteen serves medlar pie on Thursdays."}
			if code := m.as(mxRuntime).do("POST", "/v1/records", map[string]any{"records": []any{rec}}, &prop); code != 202 || len(prop.IDs) != 1 {
				t.Fatalf("the agent's proposal = %d %v", code, prop.IDs)
			}
			var appr struct{ ID, Approved, Status string }
			if code := m.as(mxApp).do("POST", "/v1/records/"+prop.IDs[0]+"/approve", nil, &appr); code != 200 || appr.Approved != prop.IDs[0] || appr.Status != "active" {
				t.Fatalf("approve = %d %+v", code, appr)
			}
			if code, got := getRecord(t, m, appr.ID); code != 200 || got.Status != "active" || hasProposalTag(got.Tags) {
				t.Fatalf("the approved record %s = %d %+v, want active and untagged", appr.ID, code, got)
			}
			if got := recall(t, m.as(mxRuntime), "carol", "medlar pie thursdays"); len(got.Hits) != 1 || got.Hits[0].Record.ID != appr.ID {
				t.Errorf("after approval recall = %+v, want %s", got.Hits, appr.ID)
			}
			var e apiError
			if code := m.as(mxApp).do("POST", "/v1/records/"+prop.IDs[0]+"/approve", nil, &e); code != 409 && code != 404 {
				t.Errorf("a second approval = %d %+v, want 409 or 404", code, e)
			}
		})
	}
}

// TestBoundTokenDecidesNoOtherIdentitysProposal: a token bound to alice
// touches no other identity's own scope, on every verb. A pending proposal
// in bob's scope (an import stores one there: it takes records as they
// were) used to be approved (a write into bob's scope) and rejected (a
// delete of bob's record) by an application token bound to alice. A token
// bound to no identity still decides it.
func TestBoundTokenDecidesNoOtherIdentitysProposal(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+matrixTokens, matrixEnv...)
	now := time.Now().UTC().Format(time.RFC3339)
	imported := func(id, scope, title string) map[string]any {
		return map[string]any{"id": id, "scope": scope, "kind": "fact", "title": title, "body": title + " body.",
			"tags": []string{"memhost:proposal"}, "status": "quarantined", "trust": "agent_observed", "created_at": now, "updated_at": now}
	}
	var res struct{ Imported int }
	if code := m.as(mxApp).do("POST", "/v1/import", map[string]any{"records": []any{
		imported("rbobproposal1", "identity:bob", "Bob private plan"), imported("ralicepropos1", "identity:alice", "Alice plan"),
	}}, &res); code != 200 || res.Imported != 2 {
		t.Fatalf("import = %d %+v", code, res)
	}
	for _, verb := range []string{"approve", "reject"} {
		var e apiError
		if code := m.as(mxAliceApp).do("POST", "/v1/records/rbobproposal1/"+verb, nil, &e); code != 404 || e.Error.Code != "not_found" {
			t.Errorf("alice-app %s of bob's proposal = %d %+v, want 404, as for a missing record", verb, code, e)
		}
		if code, rec := getRecord(t, m, "rbobproposal1"); code != 200 || rec.Status != "quarantined" {
			t.Fatalf("after alice-app's %s bob's proposal = %d %+v, want it untouched", verb, code, rec)
		}
	}
	// Her own identity's is hers to decide; bob's is the unbound token's.
	if code := m.as(mxAliceApp).do("POST", "/v1/records/ralicepropos1/reject", nil, nil); code != 200 {
		t.Errorf("alice-app rejects alice's proposal = %d, want 200", code)
	}
	if code := m.as(mxApp).do("POST", "/v1/records/rbobproposal1/reject", nil, nil); code != 200 {
		t.Errorf("the application rejects bob's proposal = %d, want 200", code)
	}
	if code := m.as(mxAliceApp).do("POST", "/v1/records/rnosuchrecord1/reject", nil, nil); code != 404 {
		t.Errorf("alice-app rejects a record that does not exist = %d, want 404", code)
	}
}

// TestRolesMatrix pins who may do what, route by route, for every kind of
// token: a refusal changes nothing, and a bound token reaches no other
// identity's records, sessions or conversations. A bound token's refusal
// of a record named by id used to quote the record's scope, telling the
// token the other identity's id (an identity's name, often a person's).
func TestRolesMatrix(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+matrixTokens, matrixEnv...)
	app := m.as(mxApp)
	ids := remember(t, app,
		map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Alice quince", "body": "Alice grows quince."},
		map[string]any{"scope": "identity:bob", "kind": "fact", "title": "Bob quince", "body": "Bob grows quince."},
		map[string]any{"scope": "realm", "kind": "fact", "title": "Realm quince", "body": "The realm grows quince."},
	)
	aliceRec, bobRec, realmRec := ids[0], ids[1], ids[2]
	who := func(id string) map[string]string { return map[string]string{"id": id} }
	const (
		ok      = 200
		gone    = 204
		bad     = 400
		deny    = 403
		missing = 404
	)
	cases := []struct {
		token, method, path string
		body                any
		want                int
	}{
		// Records by id: a bound token reaches no other identity's own.
		// Another identity's record answers as a missing one does.
		{mxAlice, "GET", "/v1/records/" + bobRec, nil, missing},
		{mxAliceApp, "GET", "/v1/records/" + bobRec, nil, missing},
		{mxAlice, "GET", "/v1/records/" + realmRec, nil, ok},
		{mxRuntime, "GET", "/v1/records/" + bobRec, nil, ok},
		{mxAlice, "DELETE", "/v1/records/" + bobRec, nil, gone},
		{mxAliceApp, "DELETE", "/v1/records/" + bobRec, nil, gone},
		{mxAlice, "DELETE", "/v1/records/" + realmRec, nil, deny},
		{mxRuntime, "DELETE", "/v1/records/" + realmRec, nil, deny},
		{mxAliceApp, "GET", "/v1/records/" + strings.ToUpper(bobRec), nil, 404},
		// Writes: a batch holding one forbidden record stores nothing.
		{mxAlice, "POST", "/v1/records", map[string]any{"records": []any{
			map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Mixed ok", "body": "m"},
			map[string]any{"scope": "identity:bob", "kind": "fact", "title": "Mixed bad", "body": "m"}}}, deny},
		{mxAliceApp, "POST", "/v1/records", map[string]any{"records": []any{
			map[string]any{"scope": "realm", "kind": "fact", "title": "Mixed ok", "body": "m"},
			map[string]any{"scope": "identity:bob", "kind": "fact", "title": "Mixed bad", "body": "m"}}}, deny},
		{mxRuntime, "POST", "/v1/records", map[string]any{"records": []any{
			map[string]any{"scope": "identity:bob", "kind": "fact", "title": "Mixed ok", "body": "m"},
			map[string]any{"scope": "realm", "kind": "fact", "title": "Mixed bad", "body": "m"}}}, bad},
		// An agent bound to alice proposes only where alice reads, as over
		// MCP: not into a mob or an operator scope she is not in.
		{mxAlice, "POST", "/v1/records", map[string]any{"records": []any{
			map[string]any{"scope": "mob:ops", "kind": "fact", "title": "Not her mob", "body": "m"}}}, deny},
		{mxAlice, "POST", "/v1/records", map[string]any{"records": []any{
			map[string]any{"scope": "operator:acme", "kind": "fact", "title": "Not her operator", "body": "m"}}}, deny},
		// Acting as another identity.
		{mxAlice, "POST", "/v1/recall", map[string]any{"identity": who("bob"), "query": "quince"}, deny},
		{mxAliceApp, "POST", "/v1/turns/inject", map[string]any{"identity": who("bob"), "session": "s", "content": "quince"}, deny},
		{mxAlice, "POST", "/v1/sessions/s/compacted", map[string]any{"identity": who("bob")}, deny},
		{mxAlice, "POST", "/v1/manifest", map[string]any{"identity": who("bob")}, deny},
		{mxAlice, "POST", "/v1/guide/session-start", map[string]any{"identity": who("bob"), "task": "quince"}, deny},
		{mxAlice, "POST", "/v1/defang", map[string]any{"identity": who("bob"), "content": "x"}, deny},
		{mxAlice, "POST", "/v1/recall", map[string]any{"identity": who("alice"), "query": "quince", "scopes": []string{"identity:bob"}}, deny},
		{mxRuntime, "POST", "/v1/recall", map[string]any{"identity": who("alice"), "query": "quince", "scopes": []string{"identity:bob"}}, deny},
		// Application verbs.
		{mxAlice, "GET", "/v1/proposals", nil, deny},
		{mxRuntime, "GET", "/v1/records", nil, deny},
		{mxRuntime, "GET", "/v1/scopes", nil, deny},
		{mxRuntime, "GET", "/v1/traces", nil, deny},
		{mxRuntime, "POST", "/v1/records/" + realmRec + "/approve", nil, deny},
		{mxRuntime, "POST", "/v1/records/" + realmRec + "/reject", nil, deny},
		{mxRuntime, "POST", "/v1/export", map[string]any{}, deny},
		{mxAliceApp, "POST", "/v1/export", map[string]any{}, deny},
		{mxAliceApp, "POST", "/v1/import", map[string]any{"records": []any{}}, deny},
		{mxRuntime, "POST", "/v1/admin/reindex", map[string]any{}, deny},
		// A reindex reaches every identity's records, and its progress
		// and result count them: realm-wide, as export and import are.
		{mxAliceApp, "POST", "/v1/admin/reindex", map[string]any{}, deny},
		{mxAliceApp, "GET", "/v1/records?scope=identity:bob", nil, deny},
		{mxAliceApp, "GET", "/v1/sessions/s/trace?identity=bob", nil, deny},
		// Another realm, named in the query or the body.
		{mxApp, "GET", "/v1/records/" + realmRec + "?realm=acme", nil, deny},
		{mxApp, "POST", "/v1/recall", map[string]any{"identity": map[string]string{"realm": "acme", "id": "alice"}, "query": "quince"}, deny},
		{mxApp, "POST", "/v1/export", map[string]any{"realm": "Default"}, deny},
		{mxAlice, "DELETE", "/v1/records/" + aliceRec, nil, gone},
	}
	for _, tc := range cases {
		var e apiError
		if code := m.as(tc.token).do(tc.method, tc.path, tc.body, &e); code != tc.want {
			t.Errorf("%s %s as %s = %d %+v, want %d", tc.method, tc.path, tc.token[:12], code, e, tc.want)
		}
	}
	// A record named by id alone: a bound token must not learn that
	// another identity's id exists (ids of archived conversations can be
	// computed from a guessed name), so the answer is the one for an id
	// the realm does not hold, word for word, and it costs the same
	// provider calls: a missing id's DELETE used to go on to the
	// provider's forget, the queue and the traces, and took a few hundred
	// microseconds longer than a hidden one's, enough to tell them apart.
	const absent = "rnosuchrecord1"
	// The calls on records by id; a turn's usage marks may still land.
	providerCalls := func() map[string]int {
		out := map[string]int{}
		re := regexp.MustCompile(`(?m)^memhost_plugin_call_duration_seconds_count\{code="[a-z_]+",instance="main",method="(get|forget|supersede|remember)"\} (\d+)$`)
		for _, mm := range re.FindAllStringSubmatch(scrape(t, m), -1) {
			n, _ := strconv.Atoi(mm[2])
			out[mm[1]] += n
		}
		return out
	}
	callsOf := func(do func()) map[string]int {
		before := providerCalls()
		do()
		delta := map[string]int{}
		for method, n := range providerCalls() {
			if d := n - before[method]; d != 0 {
				delta[method] = d
			}
		}
		return delta
	}
	for _, tc := range []struct{ token, method, suffix string }{
		{mxAlice, "GET", ""},
		{mxAliceApp, "GET", ""},
		{mxAlice, "DELETE", ""},
		{mxAliceApp, "DELETE", ""},
		{mxAliceApp, "POST", "/approve"},
		{mxAliceApp, "POST", "/reject"},
	} {
		var held, none apiError
		var heldCode, noneCode int
		heldCalls := callsOf(func() { heldCode = m.as(tc.token).do(tc.method, "/v1/records/"+bobRec+tc.suffix, nil, &held) })
		noneCalls := callsOf(func() { noneCode = m.as(tc.token).do(tc.method, "/v1/records/"+absent+tc.suffix, nil, &none) })
		if heldCode != noneCode || held.Error.Code != none.Error.Code ||
			strings.ReplaceAll(held.Error.Message, bobRec, absent) != none.Error.Message {
			t.Errorf("%s %s as %s = %d %q; for a missing record %d %q: they must not differ",
				tc.method, tc.suffix, tc.token[:12], heldCode, held.Error.Message, noneCode, none.Error.Message)
		}
		if !maps.Equal(heldCalls, noneCalls) {
			t.Errorf("%s %s as %s: provider calls %v for another identity's record, %v for a missing one: they must not differ",
				tc.method, tc.suffix, tc.token[:12], heldCalls, noneCalls)
		}
	}
	for _, id := range []string{bobRec, realmRec} {
		if code, rec := getRecord(t, m, id); code != 200 || rec.Status != "active" {
			t.Errorf("record %s after the refusals = %d %+v", id, code, rec)
		}
	}
	var list struct {
		Records []struct{ Record storedRecord }
	}
	app.do("GET", "/v1/records?q=mixed", nil, &list)
	if len(list.Records) != 0 {
		t.Errorf("a refused batch stored records: %+v", list.Records)
	}
}

// TestStdioProposalsCountAgainstTheirToken: `memhost mcp` over stdio
// needs MEMHOST_TOKEN when the config declares tokens, and its proposals
// are bounded per token and realm like every other surface's. They used
// to be noted under no token at all, so every stdio agent of a realm
// shared one bound, whatever its token: one agent's flood refused the
// others' proposals, and the queue could not say who proposed what.
func TestStdioProposalsCountAgainstTheirToken(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+`
proposals {
  max_pending         = 2
  retry_after_seconds = 5
}
`+matrixTokens+`
token "bob" {
  secret_env = "MX_BOB"
  realms     = ["default"]
  identity   = "bob"
}
`)
	const mxBob = "mx-bob-0123456789abcdef0123456789ab"
	env := append([]string{"MX_BOB=" + mxBob}, matrixEnv...)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	propose := func(t *testing.T, secret, identity string, n int) (accepted int, refusal string) {
		t.Helper()
		cs, stderr := stdioMCP(t, ctx, t.TempDir(), append([]string{"MEMHOST_TOKEN=" + secret}, env...), "--config", cfgPath, "--data-dir", dataDir, "--identity", identity)
		for i := range n {
			res := callTool(t, ctx, cs, mcpserver.ToolRemember, map[string]any{"scope": "realm", "title": identity + " plan " + strconv.Itoa(i), "body": "A plan about medlars."}, nil)
			if res.IsError {
				refusal = toolText(res)
				continue
			}
			accepted++
		}
		if err := cs.Close(); err != nil {
			t.Logf("closing memhost mcp: %v\n%s", err, stderr)
		}
		return accepted, refusal
	}
	if accepted, refusal := propose(t, mxAlice, "alice", 3); accepted != 2 || !strings.Contains(refusal, "too many pending proposals") {
		t.Fatalf("alice's stdio proposals: %d accepted, refusal %q; want 2 and the bound's refusal", accepted, refusal)
	}
	if accepted, refusal := propose(t, mxBob, "bob", 1); accepted != 1 {
		t.Fatalf("bob's stdio proposal after alice's flood: refused %q; want it counted against bob's token only", refusal)
	}
	m, err := startWithConfig(t, cfgPath, dataDir, env...)
	if err != nil {
		t.Fatal(err)
	}
	var list proposalList
	if code := m.as(mxApp).do("GET", "/v1/proposals", nil, &list); code != 200 || list.Pending != 3 {
		t.Fatalf("the queue = %d %+v, want 3 pending", code, list)
	}
	by := map[string]int{}
	for _, p := range list.Proposals {
		by[p.Proposer]++
	}
	if by["alice"] != 2 || by["bob"] != 1 {
		t.Errorf("proposers %v, want alice 2 and bob 1", by)
	}
}

// TestBoundTokenListsNoOtherIdentitysProposal: from an outside review. A
// token bound to alice answers 404 for bob's record by id, yet GET
// /v1/proposals (and the console's queue, which calls it) handed it bob's
// pending own-scope record whole, counted in pending. The listing now
// leaves out what the token may not touch, before the page is cut, so a
// page of one is still full and the cursor reaches the next.
func TestBoundTokenListsNoOtherIdentitysProposal(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+matrixTokens, matrixEnv...)
	at := func(s int) string {
		return time.Now().UTC().Add(time.Duration(s-10) * time.Second).Format(time.RFC3339)
	}
	imported := func(id, scope, title string, s int) map[string]any {
		return map[string]any{"id": id, "scope": scope, "kind": "fact", "title": title, "body": title + " body.",
			"tags": []string{"memhost:proposal"}, "status": "quarantined", "trust": "agent_observed", "created_at": at(s), "updated_at": at(s)}
	}
	var res struct{ Imported int }
	if code := m.as(mxApp).do("POST", "/v1/import", map[string]any{"records": []any{
		imported("rbobproposal1", "identity:bob", "Bob private plan", 1),
		imported("ralicepropos1", "identity:alice", "Alice plan", 2),
		imported("rbobproposal2", "identity:bob", "Bob other plan", 3),
		imported("rrealmpropos1", "realm", "Realm plan", 4),
	}}, &res); code != 200 || res.Imported != 4 {
		t.Fatalf("import = %d %+v", code, res)
	}
	var seen []string
	for after, page := "", 0; page < 5; page++ {
		var list proposalList
		if code := m.as(mxAliceApp).do("GET", "/v1/proposals?limit=1&after="+after, nil, &list); code != 200 {
			t.Fatalf("alice-app GET /v1/proposals = %d", code)
		}
		if list.Pending != 2 {
			t.Errorf("alice-app's listing counts %d pending, want her own and the realm's: 2", list.Pending)
		}
		if list.Next != "" && len(list.Proposals) != 1 {
			t.Errorf("page %d holds %d proposals with more to come, want 1", page, len(list.Proposals))
		}
		for _, p := range list.Proposals {
			seen = append(seen, p.ID)
		}
		if list.Next == "" {
			break
		}
		after = list.Next
	}
	if strings.Join(seen, " ") != "ralicepropos1 rrealmpropos1" {
		t.Errorf("alice-app's pages listed %v, want ralicepropos1 rrealmpropos1 (nothing of bob's)", seen)
	}
	var all proposalList
	if code := m.as(mxApp).do("GET", "/v1/proposals", nil, &all); code != 200 || all.Pending != 4 || len(all.Proposals) != 4 {
		t.Errorf("the unbound application's listing = %d, %d of %d pending; want all 4", code, len(all.Proposals), all.Pending)
	}
}

// TestImportedProposalsCountAgainstNoLocalAgent: from an outside review.
// api.md says an imported pending proposal counts against no agent's
// bound, but on a host without tokens it was noted under the empty
// proposer, the name the local MCP agent proposes under: an import of
// max_pending proposals refused every proposal of that agent, and the
// console showed the imports as the local agent's. They are noted as
// imported, listed with "imported": true and no proposer.
func TestImportedProposalsCountAgainstNoLocalAgent(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+`
proposals {
  max_pending = 2
}
`)
	now := time.Now().UTC().Format(time.RFC3339)
	rec := func(id, title string) map[string]any {
		return map[string]any{"id": id, "scope": "realm", "kind": "fact", "title": title, "body": title + " body.",
			"tags": []string{"memhost:proposal"}, "status": "quarantined", "trust": "agent_observed", "created_at": now, "updated_at": now}
	}
	var res struct{ Imported int }
	if code := m.do("POST", "/v1/import", map[string]any{"records": []any{rec("rimported1", "Imported one"), rec("rimported2", "Imported two")}}, &res); code != 200 || res.Imported != 2 {
		t.Fatalf("import = %d %+v", code, res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := mcpHTTPClient(t, ctx, m.base+"/mcp", http.Header{"X-Memhost-Identity": {"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	for _, title := range []string{"Local agent's first", "Local agent's second"} {
		r := callTool(t, ctx, cs, mcpserver.ToolRemember, map[string]any{"scope": "realm", "title": title, "body": title + " about quince jam."}, nil)
		if r.IsError {
			t.Fatalf("the local MCP agent's proposal %q beside 2 imported ones: %s", title, toolText(r))
		}
	}
	var list struct {
		Pending   int
		Proposals []struct {
			ID       string
			Proposer string
			Imported bool
			Identity string
		}
	}
	if code := m.do("GET", "/v1/proposals", nil, &list); code != 200 || list.Pending != 4 {
		t.Fatalf("the queue = %d %+v, want 4 pending", code, list)
	}
	for _, p := range list.Proposals {
		if wantImported := strings.HasPrefix(p.ID, "rimported"); p.Imported != wantImported || p.Proposer != "" {
			t.Errorf("%s listed with proposer %q, imported %v; want imported %v", p.ID, p.Proposer, p.Imported, wantImported)
		}
	}
}

// TestAgentsReadNoOtherAgentsProposal: from an outside review. A store
// holds one copy of a content per scope, so an agent proposing what
// another agent proposed gets that proposal's id back; GET by that id then
// showed the other agent's pending proposal whole (description and tags
// too) before any review. An agent now reads only its own token's pending
// proposals by id; applications read every one.
func TestAgentsReadNoOtherAgentsProposal(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+matrixTokens, matrixEnv...)
	proposed := map[string]any{"scope": "realm", "kind": "fact", "title": "Layoffs", "body": "The Q3 list includes Dana.",
		"description": "from a 1:1 with the VP", "tags": []string{"hr-confidential"}}
	var first, again struct{ IDs []string }
	if code := m.as(mxRuntime).do("POST", "/v1/records", map[string]any{"records": []any{proposed}}, &first); code != 202 || len(first.IDs) != 1 {
		t.Fatalf("the runtime's proposal = %d %+v", code, first)
	}
	if code := m.as(mxAlice).do("POST", "/v1/records", map[string]any{"records": []any{proposed}}, &again); code != 202 || len(again.IDs) != 1 {
		t.Fatalf("alice's proposal of the same content = %d %+v", code, again)
	}
	id := again.IDs[0]
	if id != first.IDs[0] {
		t.Fatalf("alice's proposal of the same content answered %s, not the runtime's %s: the store holds two copies", id, first.IDs[0])
	}
	for _, tc := range []struct {
		token string
		want  int
	}{
		{mxAlice, 404},
		{mxRuntime, 200},
		{mxApp, 200},
	} {
		var rec storedRecord
		if code := m.as(tc.token).do("GET", "/v1/records/"+id, nil, &rec); code != tc.want {
			t.Errorf("GET of the runtime's pending proposal as %s = %d %+v, want %d", tc.token[:12], code, rec, tc.want)
		}
	}

	// Nor can alice tell it from a missing id by forgetting it (from an
	// outside review: DELETE answered 403 naming its scope, memory_forget
	// a permission error, where a missing id answers 204 and "not
	// found"), and it stays.
	const missing = "rnosuch0123456789"
	for _, target := range []string{id, missing} {
		if code := m.as(mxAlice).do("DELETE", "/v1/records/"+target, nil, nil); code != 204 {
			t.Errorf("alice's DELETE of %s = %d, want 204 as for a missing id", target, code)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cs, err := mcpHTTPClient(t, ctx, m.base+"/mcp", http.Header{"Authorization": {"Bearer " + mxAlice}})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var answers []string
	for _, target := range []string{id, missing} {
		res := callTool(t, ctx, cs, "memory_forget", map[string]any{"id": target}, nil)
		answers = append(answers, strings.ReplaceAll(toolText(res), target, "<id>"))
		if !res.IsError {
			t.Errorf("memory_forget of %s as alice succeeded", target)
		}
	}
	if answers[0] != answers[1] {
		t.Errorf("memory_forget of the runtime's pending proposal answered %q, of a missing id %q", answers[0], answers[1])
	}
	if code := m.as(mxRuntime).do("GET", "/v1/records/"+id, nil, nil); code != 200 {
		t.Errorf("after alice's forgets the runtime's proposal answers %d, want 200", code)
	}
}

// TestBoundApplicationWritesWhereItReads: a token bound to alice reads
// no record of a mob or operator scope her identity does not read, so it
// must not write there either, whatever its role. An application token
// bound to alice had its write of another mob's content answered with
// that mob's record id, which its GET then called missing, and with the
// stored record's tags (tags_not_added names those it lacks) and
// occurred_at: a write probed what a read hides. Now it is refused as an
// identity-bound agent's is, and nothing is stored.
func TestBoundApplicationWritesWhereItReads(t *testing.T) {
	t.Parallel()
	cfgPath, dataDir := writeConfig(t, resolverDeployment("mob_resolver = \"teams\"\n  operator_resolver = \"ops\"\n  operator_scope = \"provisional\"")+matrixTokens)
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	writeBindings(t, filepath.Join(dataDir, "bindings.json"), `{"realms": {"default": {"mobs": {"alice": ["team-a"], "carol": ["team-b"]}, "operators": {"alice": "acme", "carol": "umbrella"}}}}`)
	m, err := startWithConfig(t, cfgPath, dataDir, matrixEnv...)
	if err != nil {
		t.Fatal(err)
	}
	others := []map[string]any{
		{"scope": "mob:team-b", "kind": "fact", "title": "Team B plan", "body": "Team B merges with zebracorp.", "tags": []string{"merger"}},
		{"scope": "operator:umbrella", "kind": "fact", "title": "Umbrella note", "body": "Umbrella renews the quince contract.", "occurred_at": "2024-03-01T00:00:00Z"},
	}
	ids := remember(t, m.as(mxApp), others...)
	for i, rec := range others {
		probe := maps.Clone(rec)
		probe["tags"] = []string{"merger", "guess"}
		probe["occurred_at"] = "2020-01-01T00:00:00Z"
		var out struct {
			IDs []string `json:"ids"`
			apiError
		}
		code := m.as(mxAliceApp).do("POST", "/v1/records", map[string]any{"records": []any{probe}}, &out)
		if code != 403 || len(out.IDs) != 0 {
			t.Errorf("alice's application token writing into %s = %d %+v; want 403 and no id", rec["scope"], code, out)
		}
		fresh := maps.Clone(rec)
		fresh["title"], fresh["body"] = "Planted", "Alice plants a note in "+rec["scope"].(string)+"."
		if code := m.as(mxAliceApp).do("POST", "/v1/records", map[string]any{"records": []any{fresh}}, nil); code != 403 {
			t.Errorf("alice's application token writing new content into %s = %d; want 403", rec["scope"], code)
		}
		if code, got := getRecord(t, m, ids[i]); code != 200 || len(got.Tags) > 1 {
			t.Errorf("%s's record after the refused writes = %d %+v; want it as it was", rec["scope"], code, got)
		}
	}
	var list struct {
		Records []struct{ Record storedRecord } `json:"records"`
	}
	if code := m.as(mxApp).do("GET", "/v1/records", nil, &list); code != 200 || len(list.Records) != len(others) {
		t.Errorf("the realm after the refused writes = %d %d records; want only the %d the application wrote", code, len(list.Records), len(others))
	}
	// Where alice reads, her application token writes at once, as before.
	remember(t, m.as(mxAliceApp),
		map[string]any{"scope": "mob:team-a", "kind": "fact", "title": "Team A plan", "body": "Team A ships the quince release."},
		map[string]any{"scope": "operator:acme", "kind": "fact", "title": "Acme note", "body": "Acme pays on Fridays."},
		map[string]any{"scope": "realm", "kind": "fact", "title": "Realm note", "body": "Everyone reads this."},
		map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Alice note", "body": "Alice likes figs."})
}

// TestProposalOfHeldContentFindsItsHolder: an agent proposing content the
// realm scope holds active is answered the active record's id. The holder
// was looked up by its title alone, so a title of common words ("a")
// found nothing and the proposal was refused 409 "propose it again",
// whatever was sent again (from an outside review).
func TestProposalOfHeldContentFindsItsHolder(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, providerDeployment("sqlite", `{ path = "memory.db" }`)+matrixTokens, matrixEnv...)
	rec := map[string]any{"scope": "realm", "kind": "fact", "title": "a", "body": "Dana leads the Q3 launch review."}
	var stored, proposed struct{ IDs []string }
	if code := m.as(mxApp).do("POST", "/v1/records", map[string]any{"records": []any{rec}}, &stored); code != 200 || len(stored.IDs) != 1 {
		t.Fatalf("the application's write = %d %+v", code, stored)
	}
	if code := m.as(mxRuntime).do("POST", "/v1/records", map[string]any{"records": []any{rec}}, &proposed); code != 202 || len(proposed.IDs) != 1 || proposed.IDs[0] != stored.IDs[0] {
		t.Fatalf("the agent's proposal of the held content = %d %+v, want 202 with the active record's id %s", code, proposed, stored.IDs[0])
	}
}
