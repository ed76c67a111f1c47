package main

import (
	"fmt"
	"testing"
)

// TestApprovalFindsItsTargetPastOtherKinds: from an outside review. The
// record a proposal replaces was looked for among the first 5 hits of
// its title: six newer episodes titled alike ranked above the fact, so the
// listing showed no target and approval added a second active "Door
// code" fact beside the first.
func TestApprovalFindsItsTargetPastOtherKinds(t *testing.T) {
	t.Parallel()
	m := startMemhost(t, reviewConfig, reviewEnv...)
	m.token = appSecret
	r := remember(t, m, map[string]any{"scope": "realm", "kind": "fact", "title": "Door code", "body": "The door code is 1111, changed every quarter by the office manager."})[0]
	for i := range 6 {
		remember(t, m, map[string]any{"scope": "realm", "kind": "episode", "title": "Door code", "body": fmt.Sprintf("Changed %d.", i)})
	}
	_, _, ids := propose(t, m, agentSecret, "default", "Door code", "The door code is 2222.")
	var page proposalList
	if m.do("GET", "/v1/proposals", nil, &page); len(page.Proposals) != 1 || page.Proposals[0].Target != r {
		t.Fatalf("listing = %+v, want target %s", page, r)
	}
	if code := m.do("POST", "/v1/records/"+ids[0]+"/approve", nil, nil); code != 200 {
		t.Fatalf("approve = %d", code)
	}
	var rec struct{ Status string }
	if m.do("GET", "/v1/records/"+r, nil, &rec); rec.Status != "superseded" {
		t.Errorf("the fact the proposal restates is %q, want superseded", rec.Status)
	}
}
