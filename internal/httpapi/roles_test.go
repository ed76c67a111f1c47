package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/memhost/memhost/coordinator/coordinatortest"
	"github.com/memhost/memhost/sdk"
)

// Which caller may do what (DESIGN 5.3): an application token, or a
// server without tokens, writes shared scopes and approves proposals; an
// agent token, or one that names no role, writes its identity scope
// directly, has its shared-scope writes kept as proposals, and may not
// approve. The provider here cannot hold proposals (no archive
// capability), so a write taken as a proposal answers unsupported rather
// than being written.
func TestCallerRoles(t *testing.T) {
	tokens := []Token{
		{Name: "app", Secret: "app-secret-0123456789", Realms: []string{"default"}, Role: RoleApplication},
		{Name: "bot", Secret: "bot-secret-0123456789", Realms: []string{"default"}, Role: RoleAgent},
		{Name: "plain", Secret: "plain-secret-0123456789", Realms: []string{"default"}},
	}
	caps := []sdk.Capability{sdk.CapWrite, sdk.CapFetch, sdk.CapSupersede}
	withTokens, p := newTestServer(t, Options{Tokens: tokens}, caps...)
	open, q := newTestServer(t, Options{}, caps...)
	active := p.MustAdd("default", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "active"})[0]
	openActive := q.MustAdd("default", sdk.Record{Scope: sdk.RealmScope, Kind: sdk.KindFact, Title: "active"})[0]

	record := func(scope sdk.Scope) string {
		return fmt.Sprintf(`{"scope":%q,"kind":"fact","title":"t %s"}`, scope, scope)
	}
	// Bodies by name, so each subtest says what it sends.
	bodies := map[string]string{
		"own":      `{"records":[` + record(sdk.IdentityScope("alice")) + `]}`,
		"realm":    `{"records":[` + record(sdk.RealmScope) + `]}`,
		"mob":      `{"records":[` + record(sdk.MobScope("ops")) + `]}`,
		"operator": `{"records":[` + record(sdk.OperatorScope("acme")) + `]}`,
		"mixed":    `{"records":[` + record(sdk.IdentityScope("alice")) + `,` + record(sdk.RealmScope) + `]}`,
	}

	const written, proposed, refused, forbidden, approvable = "written", "proposed", "refused", "forbidden", "reaches approval"
	cases := []struct {
		caller string // a token name, or "none" for the server without tokens
		method string
		body   string // a key of bodies
		want   string
	}{
		{"app", "write", "own", written},
		{"app", "write", "realm", written},
		{"app", "write", "mob", written},
		{"app", "write", "mixed", written},
		{"app", "approve", "", approvable},
		{"none", "write", "operator", written},
		{"none", "approve", "", approvable},
		{"bot", "write", "own", written},
		{"bot", "write", "realm", proposed},
		{"bot", "write", "mob", proposed},
		{"bot", "write", "operator", proposed},
		{"bot", "write", "mixed", refused},
		{"bot", "approve", "", forbidden},
		{"plain", "write", "own", written},
		{"plain", "write", "realm", proposed},
		{"plain", "approve", "", forbidden},
	}
	for _, tc := range cases {
		t.Run(tc.caller+" "+tc.method+" "+tc.body, func(t *testing.T) {
			srv, prov, id, token := withTokens, p, active, ""
			if tc.caller == "none" {
				srv, prov, id = open, q, openActive
			} else {
				for _, tok := range tokens {
					if tok.Name == tc.caller {
						token = tok.Secret
					}
				}
			}
			before := prov.Calls("Remember")
			var status int
			var e errorBody
			if tc.method == "write" {
				status, e = call(t, srv, "POST", "/v1/records", token, []byte(bodies[tc.body]))
			} else {
				status, e = call(t, srv, "POST", "/v1/records/"+id+"/approve?realm=default", token, nil)
			}
			wrote := prov.Calls("Remember") - before
			var got string
			switch {
			case status == 200 && wrote == 1:
				got = written
			case e.Error.Code == "unsupported" && wrote == 0:
				got = proposed // the proposal path, refused by this provider
			case status == 400 && wrote == 0:
				got = refused
			case status == 403 && e.Error.Code == "permission_denied":
				got = forbidden
			case status == 409 && e.Error.Code == "conflict":
				got = approvable // the record is active, so no pending proposal
			default:
				got = fmt.Sprintf("status %d %+v, %d writes", status, e, wrote)
			}
			if got != tc.want {
				t.Fatalf("%s: %s, want %s", tc.caller, got, tc.want)
			}
		})
	}
}

// TestWritesMayNotMarkProposals: a write whose record carries the
// proposal tag, in any case, is refused, and nothing is stored. A record
// an agent tagged "MEMHOST:Proposal" was stored as a proposal whose
// approved copy kept the tag, hiding it from the lookup that makes a
// later approval supersede it (from an outside review).
func TestWritesMayNotMarkProposals(t *testing.T) {
	srv, p := newTestServer(t, Options{})
	for _, tag := range []string{"memhost:proposal", "MEMHOST:Proposal", "Memhost:PROPOSAL"} {
		body := `{"records":[{"scope":"identity:alice","kind":"fact","title":"Kiwi","body":"Kiwis on Fridays.","tags":["fruit",` + strconv.Quote(tag) + `]}]}`
		status, e := call(t, srv, "POST", "/v1/records", "", []byte(body))
		if status != http.StatusBadRequest || e.Error.Field != "records[0].tags[1]" || !strings.Contains(e.Error.Message, "pending proposal") {
			t.Errorf("a write tagged %q = %d %+v, want 400 on records[0].tags[1]", tag, status, e)
		}
	}
	if n := p.Calls(coordinatortest.MethodRemember); n != 0 {
		t.Fatalf("refused writes reached the provider %d times", n)
	}
}
