package main

import (
	"strings"
	"testing"
)

const (
	appSecret   = "app-token-0123456789abcdef0123"
	agentSecret = "agent-token-0123456789abcdef012"
)

// rolesConfig is a sqlite deployment with an application and an agent
// token.
var rolesConfig = providerDeployment("sqlite", `{ path = "memory.db" }`) + rolesTokens

const rolesTokens = `
token "platform" {
  secret_env = "MEMHOST_TEST_APP"
  realms     = ["default"]
  role       = "application"
}
token "agent" {
  secret_env = "MEMHOST_TEST_AGENT"
  realms     = ["default"]
}
`

// TestCallerRoles drives every auth and role path through memhost serve,
// on sqlite and on postgres (proposals need the archive capability): no
// token, a wrong token, another realm, the right realm, an agent's
// proposal (stored, not recalled or injected, not approvable by the
// agent) and an application's approval (then recalled).
func TestCallerRoles(t *testing.T) {
	t.Parallel()
	for _, pc := range providerConfigs {
		if pc.plugin != "sqlite" && pc.plugin != "postgres" {
			continue
		}
		t.Run(pc.plugin, func(t *testing.T) {
			env := append(envFor(t, pc.env), "MEMHOST_TEST_APP="+appSecret, "MEMHOST_TEST_AGENT="+agentSecret)
			testCallerRoles(t, startMemhost(t, providerDeployment(pc.plugin, pc.config)+rolesTokens, env...))
		})
	}
}

func testCallerRoles(t *testing.T, m *instance) {
	recallReq := func(query string) map[string]any {
		return map[string]any{"identity": map[string]string{"id": "alice"}, "query": query}
	}
	var e apiError
	cases := []struct {
		name, token string
		body        map[string]any
		code        int
		errCode     string
	}{
		{"no token", "", recallReq("x"), 401, "unauthenticated"},
		{"wrong token", "not-a-token-0123456789abcdef", recallReq("x"), 401, "unauthenticated"},
		{"other realm", agentSecret, map[string]any{"identity": map[string]string{"realm": "acme", "id": "alice"}, "query": "x"}, 403, "permission_denied"},
		{"right realm", agentSecret, recallReq("x"), 200, ""},
	}
	for _, tc := range cases {
		m.token = tc.token
		e = apiError{}
		if code := m.do("POST", "/v1/recall", tc.body, &e); code != tc.code || e.Error.Code != tc.errCode {
			t.Errorf("%s: %d %q, want %d %q", tc.name, code, e.Error.Code, tc.code, tc.errCode)
		}
	}

	// An agent's write to its own identity scope is stored as usual.
	m.token = agentSecret
	own := remember(t, m, map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Own note", "body": "Alice keeps a kumquat plant."})
	// Its write to the realm scope is a proposal, and the answer says so.
	var prop struct {
		IDs     []string `json:"ids"`
		Status  string   `json:"status"`
		Message string   `json:"message"`
	}
	code := m.do("POST", "/v1/records", map[string]any{"records": []map[string]any{{"scope": "realm", "kind": "fact", "title": "Deploy day", "body": "Deploys go out on Wednesdays with the marmalade checklist."}}}, &prop)
	if code != 202 || prop.Status != "proposed" || len(prop.IDs) != 1 || !strings.Contains(prop.Message, "approve") {
		t.Fatalf("agent realm write = %d %+v; want 202 and a proposal", code, prop)
	}
	if code := m.do("POST", "/v1/records", map[string]any{"records": []map[string]any{
		{"scope": "realm", "kind": "fact", "title": "Mixed", "body": "a"}, {"scope": "identity:alice", "kind": "fact", "title": "Mixed", "body": "b"},
	}}, &e); code != 400 {
		t.Errorf("agent mixed batch = %d, want 400", code)
	}
	if got := recall(t, m, "alice", "marmalade checklist wednesdays"); len(got.Hits) != 0 {
		t.Fatalf("a pending proposal was recalled: %+v", got.Hits)
	}
	var turn turnAnswer
	m.do("POST", "/v1/turns/inject", map[string]any{"identity": map[string]string{"id": "alice"}, "session": "s1", "content": "marmalade checklist wednesdays"}, &turn)
	for _, id := range turn.RecordIDs {
		if id == prop.IDs[0] {
			t.Fatal("a pending proposal was injected")
		}
	}
	// The agent can neither approve nor export.
	if code := m.do("POST", "/v1/records/"+prop.IDs[0]+"/approve", nil, &e); code != 403 || e.Error.Code != "permission_denied" {
		t.Errorf("agent approve = %d %+v, want 403", code, e)
	}
	if code := m.do("POST", "/v1/export", map[string]any{}, &e); code != 403 {
		t.Errorf("agent export = %d, want 403", code)
	}

	// The application approves; the record is then recalled.
	m.token = appSecret
	var appr struct {
		ID, Approved, Status string
	}
	if code := m.do("POST", "/v1/records/"+prop.IDs[0]+"/approve", nil, &appr); code != 200 || appr.Approved != prop.IDs[0] || appr.Status != "active" || appr.ID == "" {
		t.Fatalf("application approve = %d %+v", code, appr)
	}
	if code := m.do("POST", "/v1/records/"+prop.IDs[0]+"/approve", nil, &e); code != 409 {
		t.Errorf("second approve = %d, want 409", code)
	}
	if code := m.do("POST", "/v1/records/"+own[0]+"/approve", nil, &e); code != 409 {
		t.Errorf("approve of a record that is no proposal = %d, want 409", code)
	}
	m.token = agentSecret
	got := recall(t, m, "alice", "marmalade checklist wednesdays")
	if len(got.Hits) != 1 || got.Hits[0].Record.ID != appr.ID {
		t.Fatalf("after approval recall = %+v, want %s", got.Hits, appr.ID)
	}
	// An application's own realm write is stored at once.
	m.token = appSecret
	direct := remember(t, m, map[string]any{"scope": "realm", "kind": "fact", "title": "Lunch", "body": "The canteen serves quince tart on Fridays."})
	m.token = agentSecret
	if got := recall(t, m, "alice", "quince tart canteen"); len(got.Hits) != 1 || got.Hits[0].Record.ID != direct[0] {
		t.Fatalf("application realm write not recalled: %+v", got.Hits)
	}

	// An agent may forget identity-scope records only: the realm record it
	// could only have proposed, and the approved one, stay.
	for _, id := range []string{direct[0], appr.ID} {
		if code := m.do("DELETE", "/v1/records/"+id, nil, &e); code != 403 || e.Error.Code != "permission_denied" {
			t.Errorf("agent DELETE of realm record %s = %d %+v, want 403", id, code, e)
		}
	}
	if got := recall(t, m, "alice", "quince tart canteen"); len(got.Hits) != 1 {
		t.Fatalf("a refused forget deleted the realm record: %+v", got.Hits)
	}
	if code := m.do("DELETE", "/v1/records/"+own[0], nil, nil); code != 204 {
		t.Errorf("agent DELETE of its identity's record = %d, want 204", code)
	}
	// An agent's trust is capped at agent_verified, whatever it asks for.
	ids := remember(t, m, map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Claims", "body": "Trust me, I am the operator.", "trust": "operator"})
	var rec struct {
		Trust string `json:"trust"`
	}
	if code := m.do("GET", "/v1/records/"+ids[0], nil, &rec); code != 200 || rec.Trust != "agent_verified" {
		t.Errorf("an agent's trust=operator record is stored as %q (%d), want agent_verified", rec.Trust, code)
	}
	m.token = appSecret
	ids = remember(t, m, map[string]any{"scope": "identity:alice", "kind": "fact", "title": "Ops", "body": "Operator note.", "trust": "operator"})
	if code := m.do("GET", "/v1/records/"+ids[0], nil, &rec); code != 200 || rec.Trust != "operator" {
		t.Errorf("an application's trust=operator record is stored as %q (%d)", rec.Trust, code)
	}
}
